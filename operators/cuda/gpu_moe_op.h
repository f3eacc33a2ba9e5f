#pragma once
// The MoE block on a GPU (KDeepseekV3MoE, KQwen3MoeSparseMoeBlock, ... on cuda:N): the router and
// its top-k run on the GPU; the routed experts run where the profile puts them for the phase
// (generate_device in decode, prefill_device in prefill):
//   - on the same GPU: one grouped computation over all selected experts (cuda/kernels/routed_experts.h),
//     the layer's experts resident in device memory;
//   - on the CPU: handed off through pinned memory (cpu_experts_hand_off.h) while the GPU computes
//     the shared experts, then added.
#include <memory>

#include "operators/cuda/kernels/moe_gate.h"
#include "operators/ops/feed_forward_op.h"
#include "operators/ops/mlp_op.h"
#include "operators/ops/experts_work.h"
#include "operators/cuda/gpu_runtime.h"

namespace switchyard {

struct GpuExpertStack;

class GpuMoeOp final : public FeedForwardOp {
 public:
  GpuMoeOp(const BuildContext& context, const Module& moe);
  ~GpuMoeOp() override;
  void forward(const float* x, std::int64_t tokens, float* out) override;
  // One token with the routed experts on the CPU: the shared experts' output in `out` and the CPU's
  // routed sum left on the host for the next norm to add (no read-back launch here).
  PendingDelta forward_deferred(const float* x, std::int64_t tokens, float* out) override;
  Device device() const override { return gpu_->where(); }

 private:
  // The shared experts' SwiGLU (into h) as side blocks of the router's launch: `side` for
  // cuda::router_gate, and whether the launch can take it.
  bool side_swiglu(const float* x, float* h, cuda::SideSwiglu& side) const;

  GpuRuntime* gpu_;
  Tracer* tracer_;
  int layer_, layers_;
  std::int64_t hidden_;
  LinearOp router_;                    // f32 on the GPU: the router's logits decide the top-k exactly
  cuda::DeviceBuffer correction_bias_;  // DeepSeek-V3, or empty
  std::int32_t* router_counter_ = nullptr;  // for cuda::router_gate, when decode uses it
  MoeGateConfig gate_;
  Implementation generate_experts_ = Implementation::none, prefill_experts_ = Implementation::none;
  std::unique_ptr<ExpertsWork> cpu_experts_;    // when either phase runs them on the CPU
  std::unique_ptr<GpuExpertStack> gpu_experts_;  // when either phase runs them on this GPU
  std::unique_ptr<MlpOp> shared_;
};

}  // namespace switchyard
