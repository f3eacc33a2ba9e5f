#pragma once
// bf16 and f16 <-> f32 conversions for the kernels: core/half_float.h's, plus widening a buffer.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/half_float.h"

namespace switchyard::cpu {

// The conversions live in core (core/half_float.h); the kernels keep calling them by these names.
using switchyard::bf16_to_f32;
using switchyard::f16_to_f32;
using switchyard::f32_to_bf16;
using switchyard::f32_to_f16;

// Converts `count` elements of `dtype` (f32, bf16 or f16) at `data` to f32.
inline void widen_to_f32(DType dtype, const void* data, std::size_t count, float* out) {
  for (std::size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DType::f32: out[i] = static_cast<const float*>(data)[i]; break;
      case DType::bf16: out[i] = bf16_to_f32(static_cast<const std::uint16_t*>(data)[i]); break;
      default: out[i] = f16_to_f32(static_cast<const std::uint16_t*>(data)[i]); break;
    }
  }
}

}  // namespace switchyard::cpu
