#include "operators/cuda/launch.cuh"

#include <array>
#include <atomic>

namespace switchyard::cuda {

namespace {

// The current device's compute capability major, asked once per device.
int compute_capability_major() {
  // Per device: 0 unknown, else major + 1. Devices past the table ask every time.
  static std::array<std::atomic<int>, 64> known{};
  int device = 0;
  SWITCHYARD_CUDA_CHECK(cudaGetDevice(&device));
  const bool cached = device >= 0 && device < static_cast<int>(known.size());
  if (cached) {
    const int state = known[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
    if (state != 0) return state - 1;
  }
  int major = 0;
  SWITCHYARD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (cached) known[static_cast<std::size_t>(device)].store(major + 1, std::memory_order_relaxed);
  return major;
}

}  // namespace

bool programmatic_launch_supported() { return compute_capability_major() >= 9; }

bool bf16_tensor_cores_supported() { return compute_capability_major() >= 8; }

}  // namespace switchyard::cuda
