// A kwarg is honoured, or reported: the registry says which kwargs Switchyard acts on; one it does
// not act on is accepted and warned about where it is written, once per rule, with the reason,
// unless its value asks for what Switchyard does anyway. Unknown kwargs stay errors.
#include <set>

#include "core/model_description.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;
using switchyard::core_testing::SeededRng;

namespace {

// The arch and name of the first module of a tiny preset that `replacement` can replace (routed
// experts for the module-list classes).
std::pair<std::string, std::string> first_target(const ReplacementClass& replacement) {
  for (const char* arch : {"tiny-deepseek-v3", "tiny-qwen3-moe", "tiny-mixtral"}) {
    Diagnostics diagnostics;
    ModelSpec spec;
    spec.arch = arch;
    const ModuleTree tree = describe_model(spec, diagnostics);
    for (int m = 0; m < static_cast<int>(tree.size()); ++m) {
      const ModuleClass& cls = *tree.at(m).cls;
      if (!replacement.replaced_classes.empty() && replacement.can_replace(cls) &&
          (cls.role != ModuleRole::module_list || tree.is_routed_experts(m)))
        return {arch, std::string(tree.at(m).name)};
    }
  }
  return {};
}

std::string anchored(const std::string& module) {
  std::string escaped;
  for (const char c : module) escaped += c == '.' ? std::string("\\.") : std::string(1, c);
  return "'^" + escaped + "$'";
}

// A value of `spec`'s type that does not ask for what Switchyard does on `prefill_device`, as YAML
// text; "" when every value does.
std::string value_not_asked(const KwargSpec& spec, const Device& prefill_device, SeededRng& rng) {
  std::vector<std::string> texts;
  std::vector<nlohmann::ordered_json> values;
  switch (spec.type) {
    case KwargType::integer: {
      const long long low = std::max<long long>(spec.min_value, 0);
      const long long high = std::min<long long>(spec.max_value, 1'000'000);
      const long long v = rng.between(low, high);
      texts.push_back(std::to_string(v));
      values.emplace_back(v);
      break;
    }
    case KwargType::boolean:
      texts = {"true", "false"};
      values = {true, false};
      break;
    case KwargType::choice:
      for (const std::string& c : spec.choices) texts.push_back(c), values.emplace_back(c);
      break;
    case KwargType::device:
      texts = {"cuda:0"};
      values = {"cuda:0"};
      break;
    default: break;
  }
  std::vector<std::string> usable;
  for (std::size_t i = 0; i < texts.size(); ++i)
    if (!spec.asks_what_switchyard_does || !spec.asks_what_switchyard_does(values[i], prefill_device))
      usable.push_back(texts[i]);
  return usable.empty() ? "" : usable[rng.below(usable.size())];
}

}  // namespace

TEST_CASE("kwargs: the registry says which kwargs Switchyard honours") {
  // What the engine acts on today; every other kwarg must carry the reason it has no effect.
  const std::set<std::string> honoured = {"generate_device", "prefill_device", "out_device",
                                          "generate_op",     "prefill_op",     "transfer_map"};
  int ignored = 0;
  for (const OperatorInfo& op : operators()) {
    for (const KwargSpec& spec : op.kwargs) {
      INFO(op.name << "." << spec.name);
      const bool expected = honoured.count(spec.name) > 0 && (spec.name != "out_device" || op.has_out_device);
      CHECK(spec.honoured == expected);
      if (spec.honoured) {
        CHECK(spec.no_effect.empty());
        CHECK_FALSE(static_cast<bool>(spec.asks_what_switchyard_does));
      } else {
        ++ignored;
        CHECK(spec.no_effect.size() > 40);
      }
    }
  }
  CHECK(ignored >= 7);  // out_device (Linear), backend, absorb_for_prefill, chunck_size, chunk_size, per_layer_*
}

TEST_CASE("kwargs: one that has no effect is reported where it is written, once per rule, with the reason") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  int reported = 0;
  for (const std::string& spelling : replacement_class_spellings()) {
    const ReplacementClass& replacement = *find_replacement_class(spelling);
    const auto [arch, module] = first_target(replacement);
    if (module.empty()) continue;  // `default`: it has only honoured kwargs
    for (const KwargSpec& spec : replacement.op->kwargs) {
      if (spec.honoured) continue;
      for (const Device& prefill : {Device::cpu(), Device::cuda(0)}) {
        const std::string value = value_not_asked(spec, prefill, rng);
        INFO(spelling << " " << spec.name << ": " << value << ", prefill on " << prefill.str());
        REQUIRE(!value.empty());
        // Two rules write it: the first matches every module of the class it replaces, and is
        // reported once; the second never applies, and is reported all the same.
        std::string yaml;
        for (int rule = 0; rule < 2; ++rule)
          yaml += "- match: {" + (rule == 0 ? "class: " + replacement.replaces.front() : "name: " + anchored(module)) + "}\n" +
                  "  replace:\n    class: '" + spelling + "'\n    kwargs:\n      prefill_device: " + prefill.str() +
                  "\n      " + spec.name + ": " + value + "\n";
        CheckSetup setup;
        setup.arch = arch;
        setup.gpus = 1;
        const CheckResult result = check_yaml(yaml, setup);
        for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
        CHECK(with_code(result, "unknown-kwarg").empty());
        const auto found = with_code(result, "kwarg-no-effect");
        REQUIRE(found.size() == 2);
        for (std::size_t i = 0; i < found.size(); ++i) {
          const Diagnostic& d = found[i];
          CHECK(d.severity == Severity::warning);
          CHECK(d.location.line == static_cast<int>(6 * i + 6));
          CHECK(d.location.column == 7);
          CHECK(d.rule == static_cast<int>(i));
          CHECK(d.message.find("'" + spec.name + ": " + value + "'") != std::string::npos);
          CHECK(d.message.find("rule #" + std::to_string(i + 1) + " ") != std::string::npos);
          CHECK(d.message.find("has no effect in Switchyard: " + spec.no_effect) != std::string::npos);
        }
        ++reported;
      }
    }
  }
  CHECK(reported >= 20);
}

TEST_CASE("kwargs: a value that asks for what Switchyard does is not reported") {
  const char* cases[][3] = {
      // (arch, rule, prefill device)
      {"tiny-deepseek-v3", "{name: '^model$'}, replace: {class: Model, kwargs: {per_layer_prefill_intput_threshold: 0",
       "cuda:0"},
      {"tiny-deepseek-v3", "{name: 'self_attn$'}, replace: {class: MLA, kwargs: {absorb_for_prefill: false", "cuda:0"},
      {"tiny-deepseek-v3", "{name: 'self_attn$'}, replace: {class: MLA, kwargs: {absorb_for_prefill: true", "cpu"},
      {"tiny-deepseek-v3", "{name: 'experts$'}, replace: {class: Experts, kwargs: {backend: auto", "cuda:0"},
  };
  for (const auto& c : cases) {
    const std::string yaml = std::string("- {match: ") + c[1] + ", prefill_device: '" + c[2] + "'}}}\n";
    INFO(yaml);
    CheckSetup setup;
    setup.arch = c[0];
    setup.gpus = 1;
    const CheckResult result = check_yaml(yaml, setup);
    for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
    CHECK(with_code(result, "kwarg-no-effect").empty());
    CHECK(with_code(result, "unknown-kwarg").empty());
  }
  // The same kwargs asking for something else are reported.
  CheckSetup setup;
  setup.gpus = 1;
  const CheckResult other = check_yaml(
      "- match: {name: '^model$'}\n  replace: {class: Model, kwargs: {per_layer_prefill_intput_threshold: 30000}}\n"
      "- match: {name: 'self_attn$'}\n  replace: {class: MLA, kwargs: {absorb_for_prefill: true, prefill_device: 'cuda:0'}}\n",
      setup);
  const auto found = with_code(other, "kwarg-no-effect");
  REQUIRE(found.size() == 2);
  CHECK(found[0].message.find("'per_layer_prefill_intput_threshold: 30000'") != std::string::npos);
  CHECK(found[0].message.find("never streams layers") != std::string::npos);
  CHECK(found[1].message.find("'absorb_for_prefill: true'") != std::string::npos);
}

TEST_CASE("kwargs: unknown kwargs stay errors") {
  const CheckResult result =
      check_yaml("- match: {name: 'self_attn$'}\n  replace: {class: MLA, kwargs: {absorb_for_prefil: true}}\n");
  const Diagnostic d = only(result, "unknown-kwarg");
  CHECK(d.severity == Severity::error);
  CHECK(d.message.find("did you mean 'absorb_for_prefill'") != std::string::npos);
  CHECK(with_code(result, "kwarg-no-effect").empty());
}

TEST_CASE("kwargs: out_device on a Linear names no device the plan uses") {
  CheckSetup setup;
  setup.gpus = 1;
  const CheckResult result = check_yaml(
      "- match: {name: '^lm_head$'}\n"
      "  replace: {class: ktransformers.operators.linear.KTransformersLinear,\n"
      "            kwargs: {generate_device: 'cuda:0', prefill_device: 'cuda:0', out_device: 'cuda:3'}}\n",
      setup);
  for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
  CHECK(with_code(result, "device-out-of-range").empty());
  CHECK(result.rules->gpus_named() == 1);
  CHECK_FALSE(placement(result, "lm_head").out_device.has_value());
  const Diagnostic d = only(result, "kwarg-no-effect");
  CHECK(d.location.line == 3);
  CHECK(d.message.find("'out_device: cuda:3'") != std::string::npos);
}

TEST_CASE("kwargs: an op of None runs that phase with the other phase's op, where that runs") {
  const std::string experts = "- match: {name: '^model\\.layers\\..*\\.mlp\\.experts$'}\n  replace:\n"
                              "    class: ktransformers.operators.experts.KTransformersExperts\n    kwargs:\n";
  CheckSetup setup;
  setup.gpus = 1;
  const CheckResult cpu_prefill = check_yaml(
      experts + "      generate_device: cpu\n      generate_op: KExpertsCPU\n      prefill_device: cpu\n"
                "      prefill_op: KExpertsCPU\n      out_device: cuda:0\n  recursive: false\n",
      setup);
  REQUIRE_FALSE(cpu_prefill.diagnostics.has_errors());
  // ktransformers writes None as a string; YAML's null means the same.
  for (const char* none : {"None", "null", "~"}) {
    INFO(none);
    const CheckResult result = check_yaml(
        experts + "      generate_device: cpu\n      generate_op: KExpertsCPU\n      prefill_device: cuda:0\n"
                  "      prefill_op: " + none + "\n      out_device: cuda:0\n  recursive: false\n",
        setup);
    for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
    CHECK_FALSE(result.diagnostics.has_errors());
    const ModulePlacement& p = placement(result, "model.layers.2.mlp.experts");
    CHECK(p.prefill_op == "KExpertsCPU");
    CHECK(p.prefill_device == Device::cpu());
    // The GPU holds no copy of the experts for prefill: the same memory as prefilling on the CPU.
    REQUIRE(result.memory.size() == cpu_prefill.memory.size());
    for (std::size_t i = 0; i < result.memory.size(); ++i)
      CHECK(result.memory[i].weight_bytes == cpu_prefill.memory[i].weight_bytes);
    // The prefill_device written is unused, and said to be.
    const Diagnostic d = only(result, "kwarg-no-effect");
    CHECK(d.location.line == 7);
    CHECK(d.message.find("'prefill_device: cuda:0'") != std::string::npos);
    CHECK(d.message.find("prefill_op is None, so that phase runs generate_op KExpertsCPU on cpu") != std::string::npos);
  }
  const CheckResult neither = check_yaml(experts + "      generate_op: None\n      prefill_op: None\n  recursive: false\n", setup);
  const Diagnostic d = only(neither, "no-op");
  CHECK(d.location.line == 6);
  CHECK(d.message.find("neither phase") != std::string::npos);
  // An op that is not one stays an error.
  CHECK(with_code(check_yaml(experts + "      prefill_op: Nope\n  recursive: false\n", setup), "unknown-op").size() == 1);
}
