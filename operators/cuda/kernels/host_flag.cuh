#pragma once
// Device side of the host-mapped flags of host_flag.h, for kernels that wait for the host
// themselves (no stream-wait node before them, which would keep the kernel from launching early).
#include <cstdint>

namespace switchyard::cuda {

__device__ inline std::uint32_t load_acquire_system(const std::uint32_t* address) {
  std::uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}

// For one block: thread 0 spins until the host sets *flag to 1 and clears it for the next round;
// the block then reads what the host wrote before the flag. One poller per wait: many blocks
// polling host memory over PCIe at once slow the whole GPU (docs/performance.md).
__device__ inline void take_host_flag(std::uint32_t* flag) {
  if (threadIdx.x == 0) {
    while (load_acquire_system(flag) != 1) __nanosleep(64);
    *reinterpret_cast<volatile std::uint32_t*>(flag) = 0;
  }
  __syncthreads();
}

}  // namespace switchyard::cuda
