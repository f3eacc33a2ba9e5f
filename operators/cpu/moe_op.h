#pragma once
// The MoE block on the CPU (implementation moe.cpu): router and top-k, the routed experts
// (experts.cpu) and the shared experts, all in host memory.
#include <memory>
#include <vector>

#include "operators/ops/build_context.h"
#include "operators/cpu/kernels/moe_gate.h"
#include "operators/ops/feed_forward_op.h"
#include "operators/ops/linear_op.h"
#include "operators/ops/mlp_op.h"
#include "operators/cpu/routed_experts.h"

namespace switchyard {

class MoeOp final : public FeedForwardOp {
 public:
  MoeOp(const BuildContext& context, const Module& moe);
  void forward(const float* x, std::int64_t tokens, float* out) override;
  Device device() const override { return Device::cpu(); }

 private:
  Tracer* tracer_;
  int layer_;
  LinearOp router_;                       // gate weight [n_experts, hidden]
  std::vector<float> correction_bias_;    // DeepSeek-V3 e_score_correction_bias, or empty
  MoeGateConfig gate_;
  RoutedExperts experts_;
  std::unique_ptr<MlpOp> shared_;
};

}  // namespace switchyard
