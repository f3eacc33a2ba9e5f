#include "operators/cuda/gpu_logits.h"

#include <cstring>

#include "operators/cuda/kernels/cuda_check.h"

namespace switchyard {

GpuLogits::GpuLogits(GpuRuntime& gpu, std::int64_t vocab)
    : gpu_(gpu),
      vocab_(vocab),
      row_(gpu.context().allocate(static_cast<std::size_t>(vocab) * sizeof(float), "the logits")),
      host_row_(static_cast<std::size_t>(vocab) * sizeof(float), "the logits"),
      host_id_(sizeof(std::int32_t), "the greedy token"),
      host_id_device_(host_id_.device_view_as<std::int32_t>()),
      argmax_candidates_(gpu.context().allocate(cuda::kArgmaxBlocks * sizeof(float) * 2,
                                                "the greedy choice's candidates")),
      argmax_scratch_{argmax_candidates_.data(), gpu.zeroed_counters(1)} {}

void GpuLogits::queue_row_to_host() { gpu_.context().copy_to_host(host_row_.data(), row_.data(), row_.bytes()); }

void GpuLogits::queue_argmax(const cuda::NextStep& next) {
  cuda::argmax(row_.as<float>(), vocab_, host_id_device_, gpu_.stream(), next, &argmax_scratch_);
}

float* GpuLogits::all(std::int64_t rows) {
  const std::size_t bytes = static_cast<std::size_t>(rows * vocab_) * sizeof(float);
  if (all_.bytes() < bytes) all_ = gpu_.context().allocate(bytes, "every token's logits");
  return all_.as<float>();
}

std::vector<float> GpuLogits::host_row() const {
  std::vector<float> logits(static_cast<std::size_t>(vocab_));
  std::memcpy(logits.data(), host_row_.data(), logits.size() * sizeof(float));
  return logits;
}

std::vector<float> GpuLogits::read_all(std::int64_t rows) const {
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab_));
  SWITCHYARD_CUDA_CHECK(cudaMemcpy(logits.data(), all_.data(), logits.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return logits;
}

std::int32_t GpuLogits::greedy_id() const {
  std::int32_t id = 0;
  std::memcpy(&id, host_id_.data(), sizeof(id));
  return id;
}

}  // namespace switchyard
