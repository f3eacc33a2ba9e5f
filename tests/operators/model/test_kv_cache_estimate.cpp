// check's KV cache estimate per device (placement/memory_estimate.h) against what the built model
// allocates (CausalLM::kv_cache_bytes per device): equal, for f32 and bf16 caches and for the
// default, the checkpoint's activation dtype (the fidelity fixtures are float32, make-model's bf16
// checkpoint bfloat16). On the CPU here; with attention on a GPU in the CUDA build (skipped,
// visibly, without a GPU).
#include "tests/fidelity_support.h"

#include <optional>
#include <utility>

#include "core/make_model.h"
#include "tests/core_test_support.h"
#include "tests/test_seed.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "tests/cuda_test_support.h"
#endif

using namespace switchyard;
using namespace switchyard::testing;

namespace {

// Every device's estimate equals the model's allocation there; returns the bytes on `device`.
std::uint64_t check_estimate_is_allocation(const Loaded& l, Device device) {
  std::uint64_t on_device = 0;
  for (const DeviceMemory& m : l.check.memory) {
    INFO(m.device.str());
    CHECK(m.kv_cache_bytes == l.model->kv_cache_bytes(m.device));
    if (m.device == device) on_device = m.kv_cache_bytes;
  }
  CHECK(l.model->kv_cache_bytes() == on_device);  // every layer's cache is on that device
  return on_device;
}

constexpr std::pair<const char*, const char*> kCpuCases[] = {
    {"deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml"},
    {"deepseek_v2", "DeepSeek-V2-Lite-Chat-cpu.yaml"},
    {"qwen3_moe", "Qwen3-MoE-cpu.yaml"},
    {"mixtral", "Mixtral-cpu.yaml"},
};

}  // namespace

TEST_CASE("kv cache: check's estimate per device is what the model allocates on the CPU, f32 and bf16") {
  for (const auto& one : kCpuCases) {
    const std::string fixture = one.first, profile = one.second;
    INFO(fixture << " with " << profile);
    const Loaded by_default = load(fixture, profile);
    const Loaded f32 = load(fixture, profile, "", {}, nullptr, nullptr, DType::f32);
    const Loaded bf16 = load(fixture, profile, "", {}, nullptr, nullptr, DType::bf16);
    const std::uint64_t default_bytes = check_estimate_is_allocation(by_default, Device::cpu());
    const std::uint64_t f32_bytes = check_estimate_is_allocation(f32, Device::cpu());
    const std::uint64_t bf16_bytes = check_estimate_is_allocation(bf16, Device::cpu());
    CHECK(default_bytes == f32_bytes);  // a float32 checkpoint keeps f32 caches
    CHECK(bf16_bytes * 2 == f32_bytes);
    const ModelConfig& config = by_default.check.tree->config();
    CHECK(f32_bytes == kv_cache_layout(config, 128, DType::f32).bytes() * static_cast<std::uint64_t>(config.num_hidden_layers));
  }
}

TEST_CASE("kv cache: a bf16 checkpoint gets bf16 caches by default, as check estimates them") {
  core_testing::TempDir dir;
  MakeModelOptions make;
  make.preset = "tiny-qwen3-moe";
  make.out_dir = dir.path();
  make.seed = test_seed();
  make.dtype = "bf16";
  make.force = true;
  make_model(make);
  for (const std::optional<DType> requested : {std::optional<DType>{}, std::optional<DType>{DType::f32}}) {
    INFO("--kv_cache_dtype " << (requested ? dtype_name(*requested) : "(default)"));
    CheckOptions options;
    options.model.model_path = dir.path();
    options.profile = "<all on the CPU>";
    options.profile_text = R"(- match:
    name: ""
  replace:
    class: default
    kwargs: {generate_device: "cpu", prefill_device: "cpu"}
)";
    options.budget.max_context = 64;
    options.budget.kv_cache_dtype = requested;
    const CheckResult check = run_check(options);
    REQUIRE_FALSE(check.diagnostics.has_errors());
    const Checkpoint weights = Checkpoint::open(dir.path());
    BuildContext context{*check.tree, check.plan, weights, options.budget.max_context};
    context.kv_cache_dtype = requested;
    const CausalLM model(context);
    CHECK(context.kv_cache().dtype == (requested ? *requested : DType::bf16));
    CHECK(check.memory.back().device == Device::cpu());
    CHECK(check.memory.back().kv_cache_bytes == model.kv_cache_bytes(Device::cpu()));
    CHECK(model.kv_cache_bytes() == context.kv_cache().bytes() * static_cast<std::uint64_t>(check.tree->num_layers()));
  }
}

#if SWITCHYARD_HAVE_CUDA

TEST_CASE("kv cache: check's estimate per device is what the model allocates with attention on a GPU") {
  if (no_gpu()) return;
  constexpr std::pair<const char*, const char*> kHybridCases[] = {
      {"deepseek_v3", "DeepSeek-V3-Chat.yaml"},
      {"qwen3_moe", "Qwen3-MoE.yaml"},
  };
  for (const auto& one : kHybridCases)
    for (const DType dtype : {DType::f32, DType::bf16}) {
      const std::string fixture = one.first, profile = one.second;
      INFO(fixture << " with " << profile << ", " << dtype_name(dtype) << " caches");
      const Loaded l = load(fixture, profile, "", {}, nullptr, nullptr, dtype);
      const std::uint64_t on_gpu = check_estimate_is_allocation(l, Device::cuda(0));
      CHECK(on_gpu > 0);
    }
}

#endif
