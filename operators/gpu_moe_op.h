#pragma once
// The MoE block on a GPU (KDeepseekV3MoE, KQwen3MoeSparseMoeBlock, ... on cuda:N): the router and
// its top-k run on the GPU; the routed experts run where the profile puts them for the phase
// (generate_device in decode, prefill_device in prefill):
//   - on the same GPU: one grouped computation over all selected experts (cuda/routed_experts.h),
//     the layer's experts resident in device memory;
//   - on the CPU: handed off through pinned memory (cpu_experts_hand_off.h) while the GPU computes
//     the shared experts, then added.
#include <memory>

#include "operators/feed_forward_op.h"
#include "operators/gpu_runtime.h"

namespace switchyard {

struct GpuExpertStack;

class GpuMoeOp final : public FeedForwardOp {
 public:
  GpuMoeOp(const BuildContext& context, const Module& moe);
  ~GpuMoeOp() override;
  void forward(const float* x, std::int64_t tokens, float* out) override;
  Device device() const override { return gpu_->where(); }

 private:
  // The shared experts on x, or only their down projection when h (their SwiGLU activations) is
  // already computed.
  void forward_shared(const float* x, std::int64_t tokens, const float* h, float* out);

  GpuRuntime* gpu_;
  Tracer* tracer_;
  int layer_, layers_;
  std::int64_t hidden_;
  LinearOp router_;                    // f32 on the GPU: the router's logits decide the top-k exactly
  cuda::DeviceBuffer correction_bias_;  // DeepSeek-V3, or empty
  std::int32_t* router_counter_ = nullptr;  // for cuda::router_gate, when decode uses it
  cpu::MoeGateConfig gate_;
  Device generate_experts_, prefill_experts_;
  std::unique_ptr<RoutedExperts> cpu_experts_;   // when either phase runs them on the CPU
  std::unique_ptr<GpuExpertStack> gpu_experts_;  // when either phase runs them on this GPU
  std::unique_ptr<MlpOp> shared_;
};

}  // namespace switchyard
