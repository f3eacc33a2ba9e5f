#pragma once
// The output of a head placed on a GPU: the last token's logits [vocab] in a fixed device buffer
// (a decode graph writes there), their page-locked host copy, the greedy choice written by the GPU
// straight into pinned memory, and every token's logits [tokens, vocab] when a caller asks for all.
#include <cstdint>
#include <vector>

#include "operators/cuda/kernels/argmax.h"
#include "operators/cuda/gpu_runtime.h"

namespace switchyard {

class GpuLogits {
 public:
  GpuLogits(GpuRuntime& gpu, std::int64_t vocab);

  GpuRuntime& gpu() const { return gpu_; }
  // [vocab] device memory for the last token's logits.
  float* row() { return row_.as<float>(); }
  // Queued on the GPU's stream after the head: the row to the host, or its argmax (with `next`,
  // also handed to the next decode step).
  void queue_row_to_host();
  void queue_argmax(const cuda::NextStep& next);
  // [rows, vocab] device memory for every token's logits, grown as needed.
  float* all(std::int64_t rows);

  // After the stream has finished: the host copy of the row, every token's logits, the choice.
  std::vector<float> host_row() const;
  std::vector<float> read_all(std::int64_t rows) const;
  std::int32_t greedy_id() const;

 private:
  GpuRuntime& gpu_;
  std::int64_t vocab_;
  cuda::DeviceBuffer row_;        // [vocab]
  cuda::PinnedBuffer host_row_;   // [vocab]
  cuda::PinnedBuffer host_id_;    // one int32: the argmax, written by the GPU through its device view
  std::int32_t* host_id_device_ = nullptr;
  cuda::DeviceBuffer all_;        // [tokens, vocab]
  cuda::DeviceBuffer argmax_candidates_;  // the greedy choice's scratch (cuda::ArgmaxScratch)
  cuda::ArgmaxScratch argmax_scratch_;
};

}  // namespace switchyard
