#pragma once
// bf16 and f16 <-> f32 conversions, bit-exact, for scalar code, references and tests.
// Widening is exact. Narrowing rounds to nearest, ties to even, like torch's `.to(dtype)`, ggml's
// FP32->FP16 conversion and the hardware instructions (vcvtps2ph, vcvtneps2bf16); NaN stays NaN
// (quiet), overflow goes to inf. Core keeps them so that the weight formats (core/quant_formats.h)
// can use them; operators/cpu/kernels/half.h re-exports them to the kernels.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace switchyard {

inline float bf16_to_f32(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }

inline std::uint16_t f32_to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN
  const std::uint32_t round_to_even = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + round_to_even) >> 16);
}

inline float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline std::uint16_t f32_to_f16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (magnitude < 0x38800000u) {                        // below 2^-14: f16 subnormal (or zero)
    // Scaling by 2^24 is exact; nearbyint rounds half to even in the default rounding mode.
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even; a carry
  // into the exponent is the correct result.
  const std::uint32_t rebased = magnitude - 0x38000000u;
  const std::uint32_t round_to_even = 0xfffu + ((rebased >> 13) & 1u);
  return sign | static_cast<std::uint16_t>((rebased + round_to_even) >> 13);
}

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

}  // namespace switchyard
