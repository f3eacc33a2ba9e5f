#pragma once
// The KV cache's element types in the kernels' .cu files (core/kv_cache_layout.h): f32, or bf16
// held as its bits (std::uint16_t). Written from f32 rounded to nearest even (as cpu::f32_to_bf16
// for finite values), read widened to f32 exactly; the arithmetic stays f32.
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/dtype.h"
#include "operators/cuda/kernels/widen.cuh"

namespace switchyard::cuda {

__device__ inline void store_cache(float* at, float value) { *at = value; }
__device__ inline void store_cache(std::uint16_t* at, float value) {
  *at = __bfloat16_as_ushort(__float2bfloat16_rn(value));
}

__device__ inline float load_cache(const float* at) { return *at; }
__device__ inline float load_cache(const std::uint16_t* at) { return bf16_to_float(*at); }

// Four consecutive elements as f32: 16 bytes of f32 or 8 of bf16, aligned to their size.
__device__ inline float4 widen4(uint2 bits) {
  return make_float4(__uint_as_float(bits.x << 16), __uint_as_float(bits.x & 0xffff0000u),
                     __uint_as_float(bits.y << 16), __uint_as_float(bits.y & 0xffff0000u));
}
__device__ inline float4 load_cache4(const float* at) { return *reinterpret_cast<const float4*>(at); }
__device__ inline float4 load_cache4(const std::uint16_t* at) { return widen4(*reinterpret_cast<const uint2*>(at)); }
// The same through the read-only data cache (global memory no kernel of the launch writes).
__device__ inline float4 load_cache4_read_only(const float* at) { return __ldg(reinterpret_cast<const float4*>(at)); }
__device__ inline float4 load_cache4_read_only(const std::uint16_t* at) {
  return widen4(__ldg(reinterpret_cast<const uint2*>(at)));
}
__device__ inline float load_cache_read_only(const float* at) { return __ldg(at); }
__device__ inline float load_cache_read_only(const std::uint16_t* at) { return bf16_to_float(__ldg(at)); }

// Bytes of one element; std::invalid_argument naming `function` for a type a cache cannot hold.
inline int cache_element_bytes(DType dtype, const char* function) {
  if (dtype == DType::f32) return 4;
  if (dtype == DType::bf16) return 2;
  throw std::invalid_argument(std::string(function) + ": KV caches are f32 or bf16, not " + dtype_name(dtype));
}

}  // namespace switchyard::cuda
