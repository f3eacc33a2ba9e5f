// libFuzzer target for a checkpoint's config.json: the input is the file's text. It is parsed as
// JSON and then as a model config (parse_model_config, what `--model_path` reads); an accepted
// config must survive being written back (model_config_to_json, what make-model writes) and read
// again unchanged, and its module tree is built under each weight scheme and placed, validated and
// sized as `check` does, with two profiles. InputError is the expected answer to a bad config; any
// other exception, a crash, a sanitizer report, a broken promise (below), or an input that takes
// longer than libFuzzer's -timeout is a bug. Build and run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_config.h"
#include "core/module_tree.h"
#include "core/weight_scheme.h"
#include "placement/check.h"
#include "placement/memory_estimate.h"
#include "placement/placement_plan.h"
#include "placement/report.h"
#include "placement/rule_set.h"
#include "placement/validate.h"

namespace {

using namespace switchyard;

// The config validator allows 2^18 routed experts over all layers, a tree that takes a second to
// build and, instrumented, many seconds to place. The target builds trees up to 4 k layer-experts
// (DeepSeek-V2-Lite is 1.8 k); past that it stops after the parse and round trip: a DeepSeek-V3-size
// config took 10-20 s an input here, next to the 20 s time-out (fuzz_rules checks deepseek-v3).
constexpr std::uint64_t kMaxLayerExperts = 1 << 12;
// Below this size every weight scheme is tried; above it only bf16.
constexpr std::uint64_t kMaxLayerExpertsAllSchemes = 1 << 10;

// A hybrid profile written against module names every family shares: routed experts on the CPU,
// the layers' linear layers on cuda:0, the embedding on the CPU, the rest on the default device.
constexpr const char* kHybridProfile = R"(
- match:
    name: "^model\\.layers\\..*\\.experts$"
  replace:
    class: ktransformers.operators.experts.KTransformersExperts
    kwargs: {generate_device: cpu, prefill_device: cpu, generate_op: KExpertsCPU, prefill_op: KExpertsCPU, out_device: "cuda:0"}
  recursive: false
- match:
    name: "^model\\.layers\\."
    class: torch.nn.Linear
  replace:
    class: ktransformers.operators.linear.KTransformersLinear
    kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0", generate_op: KLinearMarlin, prefill_op: KLinearTorch}
- match:
    name: "^model\\.embed_tokens"
  replace:
    class: default
    kwargs: {generate_device: cpu, prefill_device: cpu}
)";

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_model_config: %s\n", what.c_str());
  __builtin_trap();
}

// parse(write(c)) == c, compared as what write() makes of both: what make-model writes, every
// reader of config.json must read back as the same model.
void check_round_trip(const ModelConfig& config) {
  const std::string written = model_config_to_json(config).dump();
  ModelConfig again;
  try {
    again = parse_model_config(nlohmann::json::parse(written), "written config.json");
  } catch (const InputError& error) {
    fail(std::string("model_config_to_json wrote a config that parse_model_config refuses: ") + error.what() +
         "\n" + written);
  }
  const std::string rewritten = model_config_to_json(again).dump();
  if (rewritten != written) fail("a config changed on its way through config.json:\n" + written + "\n" + rewritten);
}

// Every module's name leads back to it: describe_model finds a tensor's module this way.
void check_names(const ModuleTree& tree) {
  for (std::size_t m = 0; m < tree.size(); ++m) {
    const std::string name(tree.at(static_cast<int>(m)).name);
    if (tree.find(name) != static_cast<int>(m)) fail("module " + name + " is not found by its name");
  }
}

// run_check's steps after describe_model, for a tree run_check cannot be handed.
void check_placement(std::unique_ptr<ModuleTree> tree, const char* profile, int gpus) {
  CheckResult result;
  result.tree = std::move(tree);
  result.rules = std::make_unique<RuleSet>(parse_rules(profile, "fuzz.yaml", result.diagnostics));
  PlacementOptions placement;
  placement.gpus = gpus;
  placement.default_device = gpus > 0 ? Device::cuda(0) : Device::cpu();
  MemoryBudget budget;
  budget.gpu_bytes = {24ULL << 30};
  result.plan = plan_placement(*result.tree, *result.rules, placement, result.diagnostics);
  validate_plan(result.plan, result.diagnostics);
  result.memory = estimate_memory(result.plan, budget);
  check_memory(result.memory, result.diagnostics, "fuzz.yaml");
  if (result.plan.visited.empty()) fail("no module placed");
  (void)format_check_table(result, budget);
  (void)check_to_json(result, budget).dump(2);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;  // load_model_config's "not JSON"
  try {
    const ModelConfig config = parse_model_config(json, "fuzz/config.json");
    check_round_trip(config);
    const std::uint64_t layer_experts =
        static_cast<std::uint64_t>(config.num_hidden_layers) * (static_cast<std::uint64_t>(config.n_routed_experts) + 1);
    if (layer_experts > kMaxLayerExperts) return 0;
    for (const std::string& scheme_name : weight_scheme_names()) {
      if (layer_experts > kMaxLayerExpertsAllSchemes && scheme_name != "bf16") continue;
      const WeightScheme* scheme = find_weight_scheme(scheme_name);
      if (!scheme) fail("weight scheme " + scheme_name + " is listed but not found");
      auto tree = std::make_unique<ModuleTree>(build_module_tree(config, *scheme));
      if (layer_experts <= kMaxLayerExpertsAllSchemes) check_names(*tree);
      check_placement(std::move(tree), kHybridProfile, 1);
      // No profile: every module on the CPU, as `check` without --optimize_config_path.
      if (scheme_name == "bf16") check_placement(std::make_unique<ModuleTree>(build_module_tree(config, *scheme)), "", 0);
    }
  } catch (const InputError&) {
  }
  return 0;
}
