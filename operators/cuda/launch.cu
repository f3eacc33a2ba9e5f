#include "operators/cuda/launch.cuh"

#include <array>
#include <atomic>

namespace switchyard::cuda {

bool programmatic_launch_supported() {
  // Per device: 0 unknown, 1 no, 2 yes. Devices past the table ask every time.
  static std::array<std::atomic<int>, 64> known{};
  int device = 0;
  SWITCHYARD_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= 0 && device < static_cast<int>(known.size())) {
    const int state = known[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
    if (state != 0) return state == 2;
  }
  int major = 0;
  SWITCHYARD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const bool supported = major >= 9;
  if (device >= 0 && device < static_cast<int>(known.size()))
    known[static_cast<std::size_t>(device)].store(supported ? 2 : 1, std::memory_order_relaxed);
  return supported;
}

}  // namespace switchyard::cuda
