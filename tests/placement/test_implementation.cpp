// What runs each placed module (implementation_of) and how check reports it: every replacement
// class spelling and op reaches an implementation on the device it is placed on, or check says it
// cannot run there; the table, the JSON document and --explain name the implementation.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/model_description.h"
#include "placement/implementation.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;
using switchyard::core_testing::SeededRng;

namespace {

// Every family's test-size presets.
std::vector<std::string> tiny_presets() {
  std::vector<std::string> names;
  for (const ArchPreset& preset : arch_presets())
    if (preset.test_size) names.push_back(preset.name);
  return names;
}

struct Target {
  std::string arch;
  std::string module;
};

// A random module of one of the tiny presets that `replacement` may stand in for: for a class
// that replaces module lists, a MoE block's routed experts (model.layers is a list too); for
// `default`, a module with an operator of its own.
std::optional<Target> target_for(const ReplacementClass& replacement, SeededRng& rng) {
  std::vector<Target> candidates;
  for (const std::string& arch : tiny_presets()) {
    Diagnostics diagnostics;
    ModelSpec spec;
    spec.arch = arch;
    const ModuleTree tree = describe_model(spec, diagnostics);
    for (int m = 0; m < static_cast<int>(tree.size()); ++m) {
      const ModuleClass& cls = *tree.at(m).cls;
      if (!replacement.can_replace(cls)) continue;
      if (cls.role == ModuleRole::module_list && !tree.is_routed_experts(m)) continue;
      if (replacement.op->kind == OperatorKind::default_op && !native_operator(cls)) continue;
      candidates.push_back({arch, std::string(tree.at(m).name)});
    }
  }
  if (candidates.empty()) return std::nullopt;
  return candidates[rng.below(candidates.size())];
}

std::string profile_for(const Target& target, const std::string& spelling, const OperatorInfo& op,
                        const std::string& op_name, const Device& device) {
  std::string escaped;
  for (const char c : target.module) escaped += c == '.' ? std::string("\\.") : std::string(1, c);
  std::string yaml = "- match:\n    name: '^" + escaped + "$'\n  replace:\n    class: '" + spelling +
                     "'\n    kwargs:\n      generate_device: '" + device.str() + "'\n      prefill_device: '" +
                     device.str() + "'\n";
  if (!op_name.empty()) yaml += "      generate_op: '" + op_name + "'\n      prefill_op: '" + op_name + "'\n";
  if (op.has_out_device) yaml += "      out_device: '" + device.str() + "'\n";
  return yaml + "  recursive: false\n";
}

// "experts.gpu" -> "gpu"; "" for implementations without a device in their name (rotary).
std::string device_part(Implementation implementation) {
  // "linear.gpu.quant" -> "gpu": the part after the first dot, up to the next.
  const std::string name = implementation_name(implementation);
  const auto dot = name.find('.');
  if (dot == std::string::npos) return "";
  const auto end = name.find('.', dot + 1);
  return name.substr(dot + 1, end == std::string::npos ? std::string::npos : end - dot - 1);
}

}  // namespace

TEST_CASE("implementation: every replacement class and op runs on its device, or check says it cannot") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  int checked = 0;
  for (const std::string& spelling : replacement_class_spellings()) {
    const ReplacementClass& replacement = *find_replacement_class(spelling);
    const OperatorInfo& op = *replacement.op;
    const std::optional<Target> target = target_for(replacement, rng);
    INFO(spelling);
    REQUIRE_MESSAGE(target.has_value(), "no tiny preset has a module that " << spelling << " replaces");
    std::vector<std::string> op_names = op.op_spellings();
    if (op_names.empty()) op_names.push_back("");
    for (const Device& device : {Device::cpu(), Device::cuda(0)}) {
      for (const std::string& op_name : op_names) {
        INFO(target->arch << " " << target->module << " on " << device.str() << " with op '" << op_name << "'");
        CheckSetup setup;
        setup.arch = target->arch;
        setup.default_device = device;
        setup.gpus = device.is_cuda() ? 1 : 0;
        const CheckResult result = check_yaml(profile_for(*target, spelling, op, op_name, device), setup);
        for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
        for (const char* code : {"unknown-class", "unknown-op", "unknown-kwarg", "incompatible-replacement"})
          CHECK(with_code(result, code).empty());
        const int module = result.tree->find(target->module);
        REQUIRE(module >= 0);
        REQUIRE(placement(result, target->module).op == &op);
        const PhaseImplementations runs = implementation_of(result.plan, module);
        const bool mismatch = !with_code(result, "op-device-mismatch").empty();
        // An op that cannot run on the device is an error and runs nothing; any other runs in both
        // phases, on the device it is placed on.
        CHECK(mismatch == (runs.generate == Implementation::none));
        CHECK(runs.generate == runs.prefill);
        if (!mismatch && !device_part(runs.generate).empty())
          CHECK(device_part(runs.generate) == (device.is_cpu() ? "cpu" : "gpu"));
        // The registry's own answer for this op on this device.
        const OpInfo* chosen = op.find_op(op_name);
        if (chosen) CHECK((chosen->runs.on(device) == Implementation::none) == mismatch);
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("implementation: the experts' class and ops choose CPU or GPU experts, per phase") {
  struct Case {
    const char* kwargs;
    const char* generate;
    const char* prefill;
  };
  const Case cases[] = {
      {"generate_device: 'cuda:0', prefill_device: 'cuda:0', generate_op: KExpertsTorch, prefill_op: KExpertsTorch",
       "experts.gpu", "experts.gpu"},
      {"generate_device: cpu, prefill_device: cpu, generate_op: KExpertsCPU, prefill_op: KExpertsCPU", "experts.cpu",
       "experts.cpu"},
      {"generate_device: cpu, prefill_device: 'cuda:0', generate_op: KExpertsTorch, prefill_op: KExpertsTorch",
       "experts.cpu", "experts.gpu"},
      // ktransformers' defaults: KExpertsCPU in decode, KExpertsTorch in prefill.
      {"generate_device: cpu, prefill_device: 'cuda:0'", "experts.cpu", "experts.gpu"},
      // A prefill op of None prefills with the decode experts, where they run.
      {"generate_device: cpu, prefill_device: cpu, generate_op: KExpertsCPU, prefill_op: None", "experts.cpu",
       "experts.cpu"},
  };
  for (const char* spelling : {"ktransformers.operators.experts.KTransformersExperts",
                               "ktransformers.operators.experts.KTransformersExpertsV2", "Experts"}) {
    for (const Case& c : cases) {
      INFO(spelling << " with " << c.kwargs);
      const std::string profile = std::string("- match: {name: '^model\\.layers\\..*\\.mlp\\.experts$'}\n") +
                                  "  replace: {class: " + spelling + ", kwargs: {" + c.kwargs +
                                  ", out_device: 'cuda:0'}}\n  recursive: false\n";
      const std::string path =
          (std::filesystem::temp_directory_path() / ("switchyard-test-implementation-" + std::to_string(getpid()) + ".yaml"))
              .string();
      std::ofstream(path) << profile;
      const std::string base = "check --arch tiny-deepseek-v3 --optimize_config_path " + path;

      const CommandResult json_run = run_switchyard(base + " --format json");
      CHECK(json_run.exit_code == 0);
      const nlohmann::json doc = nlohmann::json::parse(json_run.output, nullptr, false);
      REQUIRE(!doc.is_discarded());
      int experts = 0;
      for (const nlohmann::json& m : doc["modules"]) {
        REQUIRE(m["implementation"].is_object());
        const std::string name = m["name"];
        if (name.size() < 12 || name.substr(name.size() - 12) != ".mlp.experts") continue;
        ++experts;
        CHECK(m["implementation"]["generate"] == c.generate);
        CHECK(m["implementation"]["prefill"] == c.prefill);
      }
      CHECK(experts == 3);  // tiny-deepseek-v3: layers 1-3 are MoE layers

      const std::string both = std::string(c.generate) == c.prefill ? std::string(c.generate)
                                                                     : std::string(c.generate) + "/" + c.prefill;
      const CommandResult table = run_switchyard(base);
      CHECK(table.output.find("IMPLEMENTATION") != std::string::npos);
      CHECK(table.output.find("  " + both + "  ") != std::string::npos);

      const std::string explained = std::string("implementation: ") + c.generate + " in decode, " + c.prefill + " in prefill";
      CHECK(run_switchyard(base + " --explain model.layers.2.mlp.experts").output.find(explained) != std::string::npos);
      // A module below the experts is part of their operator.
      CHECK(run_switchyard(base + " --explain model.layers.2.mlp.experts.5.up_proj").output.find(explained) !=
            std::string::npos);
      std::filesystem::remove(path);
    }
  }
}

TEST_CASE("implementation: default placements run each module's own implementation; containers run none") {
  // (module, implementation without its device; "" for none; embedding, rotary and the decoder
  // stack have no device in their names)
  const std::pair<const char*, const char*> expected[] = {
      {"", ""},
      {"model", "decoder-stack"},
      {"model.embed_tokens", "embedding"},
      {"model.layers", ""},
      {"model.layers.1", ""},
      {"model.layers.1.self_attn", "mla"},
      {"model.layers.1.self_attn.q_a_proj", "linear"},
      {"model.layers.1.self_attn.kv_a_layernorm", "rms-norm"},
      {"model.layers.1.self_attn.rotary_emb", "rotary"},
      {"model.layers.0.mlp", "mlp"},
      {"model.layers.1.mlp", "moe"},
      {"model.layers.1.mlp.gate", "gate"},
      {"model.layers.1.mlp.experts", "experts"},
      {"model.layers.1.mlp.experts.3", "mlp"},
      {"model.layers.1.mlp.shared_experts", "mlp"},
      {"model.norm", "rms-norm"},
      {"lm_head", "linear"},
  };
  for (const Device& device : {Device::cpu(), Device::cuda(0)}) {
    CheckSetup setup;
    setup.default_device = device;
    setup.gpus = device.is_cuda() ? 1 : 0;
    const CheckResult result = check_yaml("- match: {name: '^model\\.norm$'}\n  replace: {class: default}\n", setup);
    CHECK_FALSE(result.diagnostics.has_errors());
    for (const auto& one : expected) {
      const auto& name = one.first;
      const auto& base = one.second;
      INFO(name << " on " << device.str());
      const int module = result.tree->find(name);
      REQUIRE(module >= 0);
      const PhaseImplementations runs = implementation_of(result.plan, module);
      std::string want = base;
      if (!want.empty() && want != "embedding" && want != "rotary" && want != "decoder-stack")
        want += device.is_cpu() ? ".cpu" : ".gpu";
      // A Linear's default op on a GPU is KLinearMarlin: the file's blocks kept (weight_storage.h).
      if (want == "linear.gpu") want = "linear.gpu.quant";
      // Likewise the routed experts' default op on a GPU, KExpertsMarlin.
      if (want == "experts.gpu") want = "experts.gpu.quant";
      CHECK(implementation_name(runs.generate) == (want.empty() ? std::string("none") : want));
      CHECK(runs.prefill == runs.generate);
    }
  }
}
