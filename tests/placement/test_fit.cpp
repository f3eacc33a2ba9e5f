// --fit (placement/fit.h): the smallest number of MoE layers whose routed experts go to the CPU
// so that every GPU fits its budget less the margin; one layer fewer would not fit.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "placement/check.h"
#include "placement/report.h"
#include "placement/weight_storage.h"
#include "tests/test_support.h"

namespace sy = switchyard;

namespace {

sy::CheckOptions fit_options(const std::string& arch, const std::string& weight_dtype, std::uint64_t gpu_bytes) {
  sy::CheckOptions o;
  o.model.arch = arch;
  o.model.weight_dtype = weight_dtype;
  o.budget.gpu_bytes = {gpu_bytes};
  o.fit.enabled = true;
  return o;
}

// cuda:0's estimate with the experts of the first n MoE layers on the CPU.
std::uint64_t gpu_total(sy::CheckOptions o, int n) {
  o.fit.enabled = false;
  if (n > 0) o.quick_rules.n_cpu_moe = n;
  const sy::CheckResult r = sy::run_check(o);
  for (const sy::DeviceMemory& d : r.memory)
    if (d.device == sy::Device::cuda(0)) return d.total_bytes();
  FAIL("no cuda:0 in the estimate");
  return 0;
}

}  // namespace

TEST_CASE("fit: the experts of the fewest first MoE layers go to the CPU, and one layer fewer would not fit") {
  struct Case {
    const char* arch;
    const char* dtype;
  };
  for (const Case c : {Case{"deepseek-v3", "q4_k_m"}, Case{"tiny-qwen3-moe", "bf16"}, Case{"tiny-mixtral", "bf16"}}) {
    INFO(c.arch << " " << c.dtype);
    sy::CheckOptions o = fit_options(c.arch, c.dtype, 0);
    o.fit.margin_bytes = 1 << 20;
    // A budget between all experts on the CPU and none there, so that the fit has to choose.
    const std::uint64_t none = gpu_total(o, 0);
    sy::CheckResult probe = sy::run_check([&] { auto p = o; p.fit.enabled = false; return p; }());
    int moe_layers = 0;
    for (int i = 0; i < static_cast<int>(probe.tree->size()); ++i) moe_layers += probe.tree->is_routed_experts(i);
    const std::uint64_t all = gpu_total(o, moe_layers);
    REQUIRE(none > all);
    o.budget.gpu_bytes = {all + o.fit.margin_bytes + (none - all) / 3};
    const sy::CheckResult r = sy::run_check(o);
    REQUIRE(r.fit.has_value());
    CHECK_FALSE(r.diagnostics.has_errors());
    const int n = r.fit->cpu_layers;
    CHECK(r.fit->moe_layers == moe_layers);
    CHECK(n > 0);
    CHECK(n < moe_layers);
    for (const sy::DeviceMemory& d : r.memory)
      if (d.device.is_cuda()) CHECK(d.total_bytes() + o.fit.margin_bytes <= o.budget.gpu_bytes[0]);
    CHECK(gpu_total(o, n) == gpu_total(o, n));  // deterministic
    CHECK(gpu_total(o, n - 1) + o.fit.margin_bytes > o.budget.gpu_bytes[0]);  // maximal: one more layer on the GPU overflows
    CHECK(r.fit->override_tensor.rfind("blk\\.(", 0) == 0);
    CHECK(r.rules->rules.front().origin == "--fit");
    CHECK(r.fit->first_layers);  // one GPU: the first n MoE layers, as --n-cpu-moe n
    const std::string table = sy::format_check_table(r, o.budget);
    CHECK(table.find("fit: the routed experts of the first " + std::to_string(n) + " of " + std::to_string(moe_layers)) !=
          std::string::npos);
  }
}

TEST_CASE("fit: a budget nothing fits says how much is missing; --fit needs --gpu_memory and chooses N itself") {
  sy::CheckOptions o = fit_options("tiny-deepseek-v3", "bf16", 1024);
  const sy::CheckResult r = sy::run_check(o);
  const sy::Diagnostic d = sy::testing::only(r, "fit-impossible");
  CHECK(d.message.find("even with the routed experts of all 3 MoE layers on the CPU, cuda:0 needs") != std::string::npos);
  CHECK(d.message.find("missing") != std::string::npos);

  o.budget.gpu_bytes.clear();
  CHECK_THROWS_WITH_AS(sy::run_check(o), doctest::Contains("--fit needs the GPUs' budgets"), sy::InputError);
  o.budget.gpu_bytes = {std::uint64_t{1} << 40};
  o.quick_rules.cpu_moe = true;
  CHECK_THROWS_WITH_AS(sy::run_check(o), doctest::Contains("leave out --cpu-moe and --n-cpu-moe"), sy::InputError);
}

TEST_CASE("fit: check --fit on DeepSeek-V3 prints the plan and the equivalent llama.cpp -ot") {
  const auto r = sy::testing::run_switchyard("check --arch deepseek-v3 --weight_dtype q4_k_m --fit --gpu_memory 80GiB");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("fit: the routed experts of the first ") != std::string::npos);
  CHECK(r.output.find("llama.cpp: -ot \"blk\\.(3|4|") != std::string::npos);
  CHECK(r.output.find("1.0 GiB left free on every GPU") != std::string::npos);
  // With the shipped profile, which sends every routed expert to the CPU: a 24 GiB GPU takes one
  // layer's back.
  const auto profiled = sy::testing::run_switchyard("check --arch deepseek-v3 --weight_dtype q4_k_m --fit --gpu_memory 24GiB "
                                                    "--optimize_config_path " +
                                                    sy::testing::source_path("optimize_rules/DeepSeek-V3-Chat.yaml"));
  INFO(profiled.output);
  CHECK(profiled.exit_code == 0);
  CHECK(profiled.output.find("fit: the routed experts of the first 57 of 58 MoE layers on the CPU (--n-cpu-moe 57;") !=
        std::string::npos);
  CHECK(profiled.output.find("those of layer 60 moved onto the GPU that runs their layer") != std::string::npos);
}

TEST_CASE("fit: DeepSeek-V3 in Q4_K_M fits a 24 GiB GPU, its projections and experts kept in blocks there") {
  // Attention, shared experts, dense layers and the head stay on the GPU as Q4_K/Q6_K blocks
  // (KLinearMarlin, placement/weight_storage.h); in bf16 they alone would need ~32 GiB. The routed
  // experts the fit moves to the GPU stay blocks too (KExpertsMarlin): a layer's take ~6.6 GiB
  // there, where their bf16 copies (~21 GiB) would not fit beside the rest.
  sy::CheckOptions o = fit_options("deepseek-v3", "q4_k_m", std::uint64_t{24} << 30);
  const sy::CheckResult r = sy::run_check(o);
  for (const sy::Diagnostic& d : r.diagnostics.items()) INFO(sy::format_diagnostic(d));
  REQUIRE_FALSE(r.diagnostics.has_errors());
  REQUIRE(r.fit.has_value());
  CHECK(r.fit->gpu_layers >= 1);
  MESSAGE("fit: " << r.fit->gpu_layers << " of " << r.fit->moe_layers << " MoE layers' experts on the 24 GiB GPU");
  for (const sy::DeviceMemory& m : r.memory)
    if (m.device.is_cuda()) {
      CHECK(m.total_bytes() <= std::uint64_t{24} << 30);
      CHECK(m.dequantize_buffer_bytes > 0);
    }
  int experts_on_gpu = 0;
  for (int i = 0; i < static_cast<int>(r.tree->size()); ++i) {
    const sy::Module& m = r.tree->at(i);
    if (m.expert < 0 || m.cls->role != sy::ModuleRole::linear || r.plan.owner_of(i).generate_device.is_cpu()) continue;
    ++experts_on_gpu;
    const sy::DType stored = m.params.front().dtype;
    REQUIRE(sy::resident_dtype(r.plan, i, stored, sy::Device::cuda(0)) == stored);
  }
  CHECK(experts_on_gpu == r.fit->gpu_layers * 256 * 3);
}

TEST_CASE("fit: a profile that keeps every routed expert on the CPU gets those of its last layers onto the GPU, as many as fit") {
  // The shipped DeepSeek-V3 profile runs attention, shared experts and dense layers on cuda:0 and
  // every routed expert on the CPU; a larger GPU has room for some layers' experts beside them.
  sy::CheckOptions o = fit_options("deepseek-v3", "q4_k_m", std::uint64_t{80} << 30);
  o.profile = sy::testing::source_path("optimize_rules/DeepSeek-V3-Chat.yaml");
  std::ifstream in(o.profile);
  o.profile_text = std::string(std::istreambuf_iterator<char>(in), {});
  REQUIRE_FALSE(o.profile_text->empty());
  const sy::CheckResult r = sy::run_check(o);
  for (const sy::Diagnostic& d : r.diagnostics.items()) INFO(sy::format_diagnostic(d));
  REQUIRE_FALSE(r.diagnostics.has_errors());
  CHECK(sy::testing::with_code(r, "quick-rule-overrides-profile").empty());  // the fit's moves are its purpose
  REQUIRE(r.fit.has_value());
  const std::vector<int>& brought = r.fit->brought_to_gpu;
  const int k = static_cast<int>(brought.size());
  REQUIRE(k > 0);
  REQUIRE(k < 58);
  // The last k MoE layers (60, 59, ...), the first 58 - k staying on the CPU as --n-cpu-moe says.
  for (int i = 0; i < k; ++i) CHECK(brought[static_cast<std::size_t>(i)] == 61 - k + i);
  CHECK(r.fit->gpu_layers == k);
  CHECK(r.fit->cpu_layers == 58 - k);
  CHECK(r.fit->first_layers);
  CHECK(sy::testing::placement(r, "model.layers.60.mlp.experts").generate_device == sy::Device::cuda(0));
  CHECK(sy::testing::placement(r, "model.layers." + std::to_string(60 - k) + ".mlp.experts").generate_device.is_cpu());
  const auto cuda0 = [](const sy::CheckResult& result) {
    for (const sy::DeviceMemory& d : result.memory)
      if (d.device == sy::Device::cuda(0)) return d.total_bytes();
    FAIL("no cuda:0 in the estimate");
    return std::uint64_t{0};
  };
  CHECK(cuda0(r) + o.fit.margin_bytes <= o.budget.gpu_bytes[0]);
  // Maximal: one more layer's experts on the GPU would overflow it.
  sy::CheckOptions more = o;
  more.fit.enabled = false;
  for (int layer = 60 - k; layer <= 60; ++layer) more.quick_rules.fit_gpu_layers.emplace_back(layer, sy::Device::cuda(0));
  CHECK(cuda0(sy::run_check(more)) + o.fit.margin_bytes > o.budget.gpu_bytes[0]);
  const std::string table = sy::format_check_table(r, o.budget);
  CHECK(table.find("fit: the routed experts of the first " + std::to_string(58 - k) + " of 58 MoE layers on the CPU") !=
        std::string::npos);
  CHECK(table.find("moved onto the GPU that runs their layer") != std::string::npos);
  // A GPU with no room beyond the profile's own modules: every expert stays where the rules put it.
  o.budget.gpu_bytes = {cuda0(sy::run_check([&] { auto p = o; p.fit.enabled = false; return p; }())) + o.fit.margin_bytes};
  const sy::CheckResult full = sy::run_check(o);
  REQUIRE(full.fit.has_value());
  CHECK(full.fit->brought_to_gpu.empty());
  CHECK(full.fit->gpu_layers == 0);
}
