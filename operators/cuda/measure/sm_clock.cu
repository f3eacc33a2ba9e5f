#include "operators/cuda/measure/sm_clock.h"

#include <cstdint>
#include <memory>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

// One thread: cycles and nanoseconds over a spin of at least `window_ns`.
__global__ void count_cycles(std::uint64_t window_ns, unsigned long long* out) {
  begin_after_previous_grid();
  if (threadIdx.x != 0) return;
  std::uint64_t start_ns, now_ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start_ns));
  const long long start_cycles = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now_ns));
  } while (now_ns - start_ns < window_ns);
  out[0] = static_cast<unsigned long long>(clock64() - start_cycles);
  out[1] = now_ns - start_ns;
}

}  // namespace

double measure_sm_clock_mhz(int device, double window_us) {
  const DeviceGuard on(device);
  unsigned long long* counts = nullptr;
  check_allocation(cudaMalloc(reinterpret_cast<void**>(&counts), 2 * sizeof(unsigned long long)), device,
                   2 * sizeof(unsigned long long), "the SM clock's counts", __FILE__, __LINE__);
  const std::unique_ptr<unsigned long long, void (*)(unsigned long long*)> owned(counts, [](unsigned long long* p) {
    if (cudaFree(p) != cudaSuccess) cudaGetLastError();
  });
  unsigned long long host[2] = {0, 0};
  launch_kernel(count_cycles, 1, 32, 0, cudaStream_t{}, static_cast<std::uint64_t>(window_us * 1e3), counts);
  SWITCHYARD_CUDA_CHECK(cudaMemcpy(host, counts, sizeof host, cudaMemcpyDeviceToHost));
  return host[1] > 0 ? static_cast<double>(host[0]) * 1e3 / static_cast<double>(host[1]) : 0.0;
}

}  // namespace switchyard::cuda
