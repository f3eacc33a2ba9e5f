#pragma once
// The dense SwiGLU MLP block: DeepSeek's dense layers and shared experts, Qwen3's dense layers.
#include "operators/ops/build_context.h"
#include "operators/ops/feed_forward_op.h"
#include "operators/ops/linear_op.h"

namespace switchyard {

// down(silu(gate(x)) * up(x)); DeepSeek's dense MLP and shared experts, Qwen3's dense layers. On
// the CPU or a GPU, with its projections on the block's device.
class MlpOp final : public FeedForwardOp {
 public:
  MlpOp(const BuildContext& context, const Module& mlp, const char* gate = "gate_proj", const char* up = "up_proj",
        const char* down = "down_proj");
  // CPU projections that do not come from a checkpoint (benchmarks, tests): gate and up [width,
  // in], down [in, width].
  MlpOp(LinearOp gate, LinearOp up, LinearOp down);
  void forward(const float* x, std::int64_t tokens, float* out) override;
  Device device() const override { return gate_.device(); }
  // The projections, for launches that run part of the block beside other work.
  const LinearOp& gate_proj() const { return gate_; }
  // Whether gate, up and SiLU-mul can be one GPU launch (cuda::gemv_swiglu, router_gate's side
  // blocks): one weight dtype and no bias (the fused kernels add none).
  bool gate_up_fusable() const;
  const LinearOp& up_proj() const { return up_; }
  const LinearOp& down_proj() const { return down_; }

 private:
  // Whether the CPU runs `tokens` tokens through forward_gated_on_cpu.
  bool gated_on_cpu(std::int64_t tokens) const;
  // forward on the CPU with gate, up and SiLU as one gated call (cpu::gated_batch) into the down
  // projection's x tiles: no f32 gate, up or h in memory.
  void forward_gated_on_cpu(const float* x, std::int64_t tokens, float* out) const;

  LinearOp gate_, up_, down_;
};

}  // namespace switchyard
