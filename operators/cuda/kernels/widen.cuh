#pragma once
// Narrow weights widened exactly to f32 in registers, for the kernels' .cu files.
#include <cuda_bf16.h>

namespace switchyard::cuda {

__device__ inline float widen(float value) { return value; }

__device__ inline float bf16_to_float(unsigned short bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}

// 16 bytes of bf16 (8 values) to 8 floats.
__device__ inline void widen(const uint4& packed, float (&w)[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&packed);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    w[2 * i] = f.x;
    w[2 * i + 1] = f.y;
  }
}

}  // namespace switchyard::cuda
