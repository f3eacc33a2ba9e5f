#include "operators/cuda/measure/timeline.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/measure/measuring_aids.h"

namespace switchyard::cuda {

Timeline::Timeline(std::size_t room) : room_(room) {
  const std::size_t bytes = (room + 1) * sizeof(unsigned long long);
  check_allocation(cudaMalloc(reinterpret_cast<void**>(&buffer_), bytes), -1, bytes, "the timeline's stamps",
                   __FILE__, __LINE__);
  try {
    clear();
    point_timelines(buffer_, room_);
  } catch (...) {
    if (cudaFree(buffer_) != cudaSuccess) cudaGetLastError();
    throw;
  }
}

Timeline::~Timeline() {
  try {
    point_timelines(nullptr, 0);
  } catch (...) {
    // A failed reset leaves kernels stamping into freed memory only if the device is already lost.
  }
  if (cudaFree(buffer_) != cudaSuccess) cudaGetLastError();
}

void Timeline::clear() {
  SWITCHYARD_CUDA_CHECK(cudaDeviceSynchronize());
  SWITCHYARD_CUDA_CHECK(cudaMemset(buffer_, 0, sizeof(unsigned long long)));
  SWITCHYARD_CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<std::uint64_t> Timeline::stamps(std::uint64_t* taken) const {
  SWITCHYARD_CUDA_CHECK(cudaDeviceSynchronize());
  unsigned long long count = 0;
  SWITCHYARD_CUDA_CHECK(cudaMemcpy(&count, buffer_, sizeof count, cudaMemcpyDeviceToHost));
  if (taken != nullptr) *taken = count;
  const std::size_t kept = std::min<std::size_t>(count, room_);
  std::vector<std::uint64_t> times(kept);
  if (kept > 0)
    SWITCHYARD_CUDA_CHECK(
        cudaMemcpy(times.data(), buffer_ + 1, kept * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  return times;
}

}  // namespace switchyard::cuda
