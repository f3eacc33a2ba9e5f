#pragma once
// Kernel launches with programmatic dependent launch (PDL, Hopper and later), for the kernels'
// .cu files. A decode step is a chain of small kernels on one stream, each a few microseconds;
// launched plainly, each waits for the previous one to finish before the GPU even schedules its
// blocks. With PDL the next kernel's blocks are scheduled while the previous kernel runs and wait
// on the device for its results, which hides most of that gap (also inside CUDA graphs).
//
// The contract, for every kernel launched with cuda::launch_kernel:
//   - it calls wait_for_previous_grid() before it reads or writes any global memory that an
//     earlier kernel of the stream may read or write (in practice: as its first statement, after
//     loads of constant weights and of what no kernel of a decode step writes: the step's position,
//     written before the step's first kernel by a copy or by the step before's greedy choice
//     (cuda::NextStep), and the KV cache rows before it, written by earlier steps. The exceptions
//     say why they are safe where they are: the norm that takes the CPU experts' row reads host
//     memory that only the host writes and a residual row that the kernel before it cannot write,
//     rms_norm.cu; the MLA decode kernels read the position and the cache rows before it early,
//     mla_decode.h and kv_cache.h);
//   - it may call allow_next_grid() when it no longer needs to hold the next kernel back (we call
//     it right after the wait, or before it where the next kernel gains from starting early: the
//     next kernel's own wait still orders its memory accesses).
// The wait returns once the previous kernel has completed and its writes are visible, so the chain
// keeps stream order: kernel C after B after A sees A's writes because B could not finish before
// A did. Work that is not a PDL kernel (copies, stream memory operations, events, cuBLAS) keeps
// full ordering on both sides.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/measure/measuring_aids.h"

namespace switchyard::cuda {

// A measuring aid (timeline.h): where the kernels of this translation unit stamp the end of their
// PDL wait, null while no timeline runs. One copy per .cu file (no relocatable device code), each
// registered for Timeline to point at its buffer; constant memory, read before the wait.
namespace timeline_detail {
namespace {
__constant__ unsigned long long* stamps;  // [0]: the count; [1, 1 + room): the times, in ns
__constant__ unsigned long long room;
cudaError_t point_here(unsigned long long* to, unsigned long long size) {
  const cudaError_t status = cudaMemcpyToSymbol(stamps, &to, sizeof to);
  return status != cudaSuccess ? status : cudaMemcpyToSymbol(room, &size, sizeof size);
}
[[maybe_unused]] const bool registered = register_timeline_target(&point_here);
}  // namespace
}  // namespace timeline_detail

__device__ inline void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ inline void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// With a timeline running: the time the previous grid's wait ended, from the grid's first thread
// (its clock read before the atomic, whose return waits on L2). The stamps come in chain order:
// a grid's wait ends after the previous grid ends, and a grid ends after its first thread stamps.
__device__ inline void stamp_wait_end(unsigned long long* to) {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  const unsigned long long slot = atomicAdd(to, 1ull);
  if (slot < timeline_detail::room) to[1 + slot] = now;
}

// The first statement of every kernel launched with cuda::launch_kernel.
__device__ inline void begin_after_previous_grid() {
  // The timeline's address loads before the wait (no kernel writes it), so its latency hides there.
  const bool first = (blockIdx.x | blockIdx.y | blockIdx.z | threadIdx.x | threadIdx.y | threadIdx.z) == 0;
  unsigned long long* timeline = first ? timeline_detail::stamps : nullptr;
  wait_for_previous_grid();
  allow_next_grid();
  if (timeline != nullptr) stamp_wait_end(timeline);
}

// Whether `p` is 16-byte aligned (null counts as aligned): the condition of every 16-byte load path.
inline bool aligned_16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Whether the current device takes PDL launches (compute capability 9.0 or later), asked once per
// device. Defined in launch.cu.
bool programmatic_launch_supported();

// Whether the current device has bf16 tensor cores (mma.sync m16n8k16: compute capability 8.0 or
// later). Defined in launch.cu.
bool bf16_tensor_cores_supported();

// kernel<<<grid, block, shared_bytes, stream>>>(args...), with PDL where the device supports it;
// then the launch check. Nothing, for a kernel leave_out_kernels (leave_out.h) named; a timeline
// that records launches (timeline.h) records it.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream,
            Args&&... args) {
  if (measuring_aids_on() && measure_launch(reinterpret_cast<const void*>(kernel))) return;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (programmatic_launch_supported()) {
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  SWITCHYARD_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(std::forward<Args>(args))...));
}

}  // namespace switchyard::cuda
