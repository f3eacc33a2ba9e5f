#pragma once
// Reductions inside a thread block, for the kernels' .cu files. blockDim.x must be a multiple of 32
// and at most 1024; every thread of the block must call them (they contain __syncthreads).

namespace switchyard::cuda {

template <typename T>
__device__ T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

template <typename T>
__device__ T warp_max(T value) {
  for (int offset = 16; offset > 0; offset /= 2) value = fmax(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// The sum (or max) of every thread's `value`, returned to all threads of the block.
template <typename T, bool kMax = false>
__device__ T block_reduce(T value) {
  __shared__ T partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  value = kMax ? warp_max(value) : warp_sum(value);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  value = partial[0];
  for (int w = 1; w < warps; ++w) value = kMax ? fmax(value, partial[w]) : value + partial[w];
  return value;
}

template <typename T>
__device__ T block_sum(T value) { return block_reduce<T, false>(value); }
template <typename T>
__device__ T block_max(T value) { return block_reduce<T, true>(value); }

}  // namespace switchyard::cuda
