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
    // Phase by phase (sums over calls, their differences, their means).
    GroupedSeconds& operator+=(const GroupedSeconds& other) { return each(other, [](double& a, double b) { a += b; }); }
    GroupedSeconds& operator-=(const GroupedSeconds& other) { return each(other, [](double& a, double b) { a -= b; }); }
    GroupedSeconds& operator/=(double n) { return each(*this, [n](double& a, double) { a /= n; }); }
    double total() const { return gather + gate_up + silu + down + scatter; }  // the preps are within their batches

   private:
    template <class F>
    GroupedSeconds& each(const GroupedSeconds& o, F f) {
      const GroupedSeconds b = o;  // o may be *this
      f(gather, b.gather);
      f(gate_up_prep, b.gate_up_prep);
      f(gate_up, b.gate_up);
      f(silu, b.silu);
      f(down_prep, b.down_prep);
      f(down, b.down);
      f(scatter, b.scatter);
      return *this;
    }
  };
  static GroupedSeconds last_grouped_seconds();
  // Every grouped call of the process added up, from every thread, with their count: the share
  // of a whole prefill that the CPU experts took (bench decode reads it before and after).
  struct GroupedTotals {
    std::int64_t calls = 0;
    GroupedSeconds seconds;
  };
  static GroupedTotals grouped_totals();

 private:
  // Decode: at most this many (token, slot) pairs go through one fused parallel region.
  static constexpr std::int64_t kFusedSlots = 16;
  void forward_fused(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights, int top_k,
                     float* out) const;

  std::vector<Expert> experts_;
  std::int64_t hidden_ = 0;
};

}  // namespace switchyard
