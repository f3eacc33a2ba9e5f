#pragma once
// The routed experts of one MoE layer on the CPU (implementation experts.cpu), as one operator over
// all of them. They are the work the CPU-experts hand-off runs (operators/runtime/experts_work.h) under a
// GPU MoE block, and the experts of a MoE block on the CPU.
#include <vector>

#include "operators/model/build_context.h"
#include "operators/runtime/experts_work.h"
#include "operators/blocks/feed_forward_op.h"
#include "operators/blocks/linear_op.h"

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
  // Where the calling thread's last grouped call (more than kFusedSlots slots: a prefill) spent its
  // time, in seconds: rows gathered by expert, the gate and up batch (x's tiles or quantised x
  // written, then the blocks), SiLU, the down batch (the same two), the weighted sum per token.
  struct GroupedSeconds {
    double gather = 0, gate_up_prep = 0, gate_up = 0, silu = 0, down_prep = 0, down = 0, scatter = 0;
  };
  static GroupedSeconds last_grouped_seconds();

 private:
  // Decode: at most this many (token, slot) pairs go through one fused parallel region.
  static constexpr std::int64_t kFusedSlots = 16;
  void forward_fused(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights, int top_k,
                     float* out) const;

  std::vector<Expert> experts_;
  std::int64_t hidden_ = 0;
};

}  // namespace switchyard
