// The rule's class and op reach their builder: every implementation the registry can name has one,
// and a model built under a profile runs each block as the plan's implementation_of says.
#include <string>

#include "core/error.h"
#include "operators/model/implementation_builders.h"
#include "placement/operator_registry.h"
#include "tests/fidelity_support.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "tests/cuda_test_support.h"
#endif

using namespace switchyard;
using namespace switchyard::testing;

namespace {

#if SWITCHYARD_HAVE_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

// Everything on `device`, the routed experts as `op` in both phases (DeepSeek-V3 fixture names).
std::string experts_profile(const std::string& device, const std::string& generate_op, const std::string& prefill_op,
                            const std::string& generate_device = "", const std::string& prefill_device = "") {
  const std::string g = generate_device.empty() ? device : generate_device;
  const std::string p = prefill_device.empty() ? device : prefill_device;
  return "- match:\n    name: \"^model\\\\.layers\\\\..*\\\\.mlp\\\\.experts$\"\n"
         "  replace:\n    class: ktransformers.operators.experts.KTransformersExperts\n"
         "    kwargs: {generate_device: \"" + g + "\", generate_op: \"" + generate_op + "\", prefill_device: \"" + p +
         "\", prefill_op: \"" + prefill_op + "\", out_device: \"" + device + "\"}\n"
         "  recursive: false\n"
         "- match:\n    name: \"\"\n  replace:\n    class: default\n"
         "    kwargs: {generate_device: \"" + device + "\", prefill_device: \"" + device + "\"}\n";
}

// Every block the builders recorded runs as the plan says, and every attention, MLP, MoE block and
// routed-experts list of the model was recorded.
void check_built_as_planned(const Loaded& l, const BuiltImplementations& built) {
  const ModuleTree& tree = *l.check.tree;
  std::vector<bool> seen(tree.modules().size());
  for (const auto& entry : built.modules) {
    const int module = entry.first;
    const PhaseImplementations& implementation = entry.second;
    INFO(tree.at(module).name);
    CHECK(implementation == implementation_of(l.check.plan, module));
    CHECK(implementation.generate != Implementation::none);
    seen[static_cast<std::size_t>(module)] = true;
  }
  for (std::size_t m = 0; m < tree.modules().size(); ++m) {
    const Module& module = tree.at(static_cast<int>(m));
    const ModuleRole role = module.cls->role;
    const bool block = (role == ModuleRole::attention || role == ModuleRole::moe || role == ModuleRole::mlp) &&
                       tree.at(module.parent).cls->role == ModuleRole::decoder_layer;
    const bool experts = role == ModuleRole::module_list && tree.at(module.parent).cls->role == ModuleRole::moe;
    INFO(module.name);
    if (block || experts) CHECK(seen[m]);
  }
}

// The implementations recorded for the routed experts of every MoE layer.
std::vector<PhaseImplementations> experts_built(const Loaded& l, const BuiltImplementations& built) {
  std::vector<PhaseImplementations> out;
  for (const auto& [module, implementation] : built.modules)
    if (l.check.tree->at(module).local_name() == "experts") out.push_back(implementation);
  return out;
}

}  // namespace

TEST_CASE("implementation builders: every implementation the registry names has a builder in this build") {
  for (const OperatorInfo& op : operators()) {
    INFO(op.name);
    std::vector<DeviceImplementations> runs{op.runs};
    for (const OpInfo& o : op.ops) runs.push_back(o.runs);
    for (const DeviceImplementations& r : runs) {
      CHECK(has_builder(r.on_cpu));
      if (kCudaBuild) CHECK(has_builder(r.on_gpu));
    }
  }
  CHECK(has_builder(Implementation::mla_gpu) == kCudaBuild);
}

TEST_CASE("implementation builders: every CPU op name of the routed experts builds the CPU experts") {
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  for (const char* op : {"KExpertsCPU", "cpu", "KExpertsTorch", "torch"}) {
    INFO(op);
    BuiltImplementations built;
    const Loaded l = load("deepseek_v3", "<experts " + std::string(op) + ">", experts_profile("cpu", op, op), {},
                          nullptr, &built);
    check_built_as_planned(l, built);
    const auto experts = experts_built(l, built);
    CHECK(experts.size() == 2);  // layers 1 and 2 are MoE
    for (const PhaseImplementations& e : experts)
      CHECK(e == PhaseImplementations{Implementation::experts_cpu, Implementation::experts_cpu});
    const FidelityRun run = run_greedy(*l.model, ref);
    CHECK(run.prompt_error <= 1e-4);
    CHECK(run.generated == ref.generated);
  }
}

#if SWITCHYARD_HAVE_CUDA
TEST_CASE("implementation builders: KExpertsTorch and KExpertsMarlin on a GPU build the GPU experts, KExpertsCPU the CPU's") {
  if (no_gpu()) return;
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  struct Case {
    std::string profile;
    PhaseImplementations expected;
  };
  const Case cases[] = {
      {experts_profile("cuda:0", "KExpertsTorch", "KExpertsTorch"),
       {Implementation::experts_gpu, Implementation::experts_gpu}},
      {experts_profile("cuda:0", "KExpertsMarlin", "KExpertsMarlin"),
       {Implementation::experts_gpu_quant, Implementation::experts_gpu_quant}},
      {experts_profile("cuda:0", "KExpertsCPU", "KExpertsCPU", "cpu", "cpu"),
       {Implementation::experts_cpu, Implementation::experts_cpu}},
      {experts_profile("cuda:0", "KExpertsCPU", "KExpertsTorch", "cpu", "cuda:0"),
       {Implementation::experts_cpu, Implementation::experts_gpu}},
  };
  for (const Case& c : cases) {
    INFO(c.profile);
    BuiltImplementations built;
    const Loaded l = load("deepseek_v3", "<experts on a GPU>", c.profile, {}, nullptr, &built);
    check_built_as_planned(l, built);
    for (const PhaseImplementations& e : experts_built(l, built)) CHECK(e == c.expected);
    const FidelityRun run = run_greedy(*l.model, ref);
    CHECK(run.prompt_error <= 1.0 / 256);
    CHECK(run.generated == ref.generated);
  }
}

#endif

TEST_CASE("implementation builders: a GPU implementation without a GPU is an error naming the device") {
#if SWITCHYARD_HAVE_CUDA
  if (cuda::device_count() > 0) return;  // the GPU cases above build it there
#endif
  CheckOptions options;
  options.model.model_path = source_path("tests/fixtures/fidelity/deepseek_v3");
  options.profile = "<all on cuda:0>";
  options.profile_text = experts_profile("cuda:0", "KExpertsTorch", "KExpertsTorch");
  const CheckResult check = run_check(options);
  REQUIRE_FALSE(check.diagnostics.has_errors());
  const Checkpoint weights = Checkpoint::open(options.model.model_path);
  const BuildContext context{*check.tree, check.plan, weights, 128, nullptr};
  try {
    CausalLM model(context);
    FAIL("built a GPU model without the CUDA backend");
  } catch (const InputError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("cuda:0") != std::string::npos);
    CHECK(std::string(e.what()).find(kCudaBuild ? "not present" : "no CUDA backend") != std::string::npos);
  }
}
