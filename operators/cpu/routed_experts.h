#pragma once
// The routed experts of one MoE layer on the CPU (implementation experts.cpu), as one operator over
// all of them. They are the work the CPU-experts hand-off runs (operators/ops/experts_work.h) under a
// GPU MoE block, and the experts of a MoE block on the CPU.
#include <vector>

#include "operators/ops/build_context.h"
#include "operators/ops/experts_work.h"
#include "operators/ops/feed_forward_op.h"
#include "operators/ops/linear_op.h"

namespace switchyard {

// The routed experts of one layer as one operator over all experts: tokens are grouped by expert
// and each expert's projections run once over its group. Weights stay in the checkpoint mapping.
class RoutedExperts final : public ExpertsWork {
 public:
  struct Expert {
    LinearOp gate, up, down;  // [inter, hidden], [inter, hidden], [hidden, inter]
  };
  // The experts' weights used in place from the checkpoint mapping, on the CPU.
  RoutedExperts(const BuildContext& context, const Module& experts);
  explicit RoutedExperts(std::vector<Expert> experts);
  // x: [tokens, hidden]; ids, weights: [tokens, top_k]; out: [tokens, hidden] (overwritten)
  // Host memory.
  void forward(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights, int top_k,
               float* out) const override;
  const std::vector<Expert>& experts() const { return experts_; }

 private:
  // Decode: at most this many (token, slot) pairs go through one fused parallel region.
  static constexpr std::int64_t kFusedSlots = 16;
  // Up to kFusedSlots slots: every selected expert's rows shared out in one parallel region.
  void forward_fused(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights, int top_k,
                     float* out) const;
  // More: the slots grouped by expert, each expert's projections run once over its group.
  void forward_grouped(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights, int top_k,
                       float* out) const;

  std::vector<Expert> experts_;
  std::int64_t hidden_ = 0;
};

}  // namespace switchyard
