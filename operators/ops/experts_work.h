#pragma once
// The work the CPU-experts hand-off runs on the host (operators/cuda/cpu_experts_hand_off.h): one
// layer's routed experts over the tokens handed to it. Declared here, below both the hand-off and
// the experts that implement it (operators/cpu/routed_experts.h), so that the hand-off calls nothing
// above it.
#include <cstdint>

namespace switchyard {

class ExpertsWork {
 public:
  virtual ~ExpertsWork() = default;
  // x: [tokens, hidden] f32; ids, weights: [tokens, top_k] (expert index, routing weight);
  // out: [tokens, hidden] f32, overwritten with the weighted sum of the chosen experts' outputs.
  // Host memory.
  virtual void forward(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights, int top_k,
                       float* out) const = 0;
};

}  // namespace switchyard
