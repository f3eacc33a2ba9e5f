#pragma once
// Asynchronous 16-byte copies from global to shared memory (cp.async, compute capability 8.0 or
// later), for the kernels' .cu files. Each thread waits for its own copies only: a thread that
// reads what others copied needs a barrier after its wait.
#include <cstdint>

namespace switchyard::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ inline unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared, or 16 zero bytes where !valid (nothing is read then). Both
// addresses 16-byte aligned; the copy bypasses L1.
__device__ inline void copy_16_async(void* shared, const void* global, bool valid = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)), "l"(global),
               "r"(valid ? 16 : 0));
}

// Closes the group of this thread's copies issued since the last commit.
__device__ inline void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ inline void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
#endif

}  // namespace switchyard::cuda
