#pragma once
// Internal to the quantised kernels (quant_dot.h): each block type as unsigned integer weights and
// the scales that turn them into values, in plain C++. Every ISA's translation unit includes this
// and gets its own copy (unnamed namespace), compiled with its own flags, so that no AVX-512 copy
// can be linked into a caller on a CPU without it (linear_kernels.h says why).
//
// Two shapes, one per family of core/quant_blocks.h:
// - a 32-weight block: w[i] = d * (u[i] - offset) + m, u[i] in [0, 256);
// - a K super-block: w[i] = a * scale[i / 16] * u[i] - b * min[i / 16], u[i] in [0, 64), with
//   16-weight groups (Q4_K's and Q5_K's 32-weight sub-blocks are two groups of equal scales).
// The integer products against activation bytes q (|q| <= 127) fit the SIMD code's int16 pairs:
// 2 * 63 * 127 < 2^15.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/quant_blocks.h"
#include "operators/cpu/kernels/linear_kernels.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace switchyard::cpu::detail {
namespace {

using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;

// IEEE half bits to float, exactly (subnormals, inf and NaN included).
inline float half_to_float(std::uint16_t bits) {
#if defined(__F16C__)
  return _cvtsh_ss(bits);
#else
  const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16, exponent = (bits >> 10) & 0x1fu,
                      mantissa = bits & 0x3ffu;
  std::uint32_t out;
  if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // mantissa * 2^-24, exact
    std::memcpy(&out, &magnitude, 4);
    out |= sign;
  } else if (exponent == 31) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &out, 4);
  return value;
#endif
}

template <class Block>
constexpr bool kIsK = std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ3_K> ||
                      std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K> ||
                      std::is_same_v<Block, BlockQ6_K>;
template <class Block>
constexpr int kElements = kIsK<Block> ? quant::kSuperBlock : quant::kBlock;

// Calls f(Block{}) with the block struct of `dtype` (a block type).
template <class F>
void visit_block_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::q4_0: return f(BlockQ4_0{});
    case DType::q4_1: return f(BlockQ4_1{});
    case DType::q5_0: return f(BlockQ5_0{});
    case DType::q5_1: return f(BlockQ5_1{});
    case DType::q8_0: return f(BlockQ8_0{});
    case DType::q2_k: return f(BlockQ2_K{});
    case DType::q3_k: return f(BlockQ3_K{});
    case DType::q4_k: return f(BlockQ4_K{});
    case DType::q5_k: return f(BlockQ5_K{});
    case DType::q6_k: return f(BlockQ6_K{});
    default: return;
  }
}

// Tokens a K-type pass over rows multiplies at once: each super-block is unpacked once per group
// (a prefill's rows are read from L2 once a group).
constexpr std::int64_t kTokenGroup = 16;

// f(sub-block) for each group of up to kTokenGroup tokens of `block`, in order.
template <class F>
void for_token_groups(const LinearBlock& block, F&& f) {
  for (std::int64_t t = block.token_begin; t < block.token_end; t += kTokenGroup)
    f(LinearBlock{block.row_begin, block.row_end, t, t + kTokenGroup < block.token_end ? t + kTokenGroup : block.token_end});
}

// ---- 32-weight blocks ------------------------------------------------------------------------

struct Scales32 {
  float d, m;
  int offset;
};

inline Scales32 scales_of(const BlockQ4_0& b) { return {half_to_float(b.d), 0.0f, 8}; }
inline Scales32 scales_of(const BlockQ4_1& b) { return {half_to_float(b.d), half_to_float(b.m), 0}; }
inline Scales32 scales_of(const BlockQ5_0& b) { return {half_to_float(b.d), 0.0f, 16}; }
inline Scales32 scales_of(const BlockQ5_1& b) { return {half_to_float(b.d), half_to_float(b.m), 0}; }
// Q8_0's signed bytes as u = q + 128.
inline Scales32 scales_of(const BlockQ8_0& b) { return {half_to_float(b.d), 0.0f, 128}; }

// The same per type, for code that wants them at compile time.
template <class Block>
constexpr int kOffset = std::is_same_v<Block, BlockQ4_0> ? 8 : std::is_same_v<Block, BlockQ5_0> ? 16
                        : std::is_same_v<Block, BlockQ8_0> ? 128 : 0;
template <class Block>
constexpr bool kHasMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;

inline std::uint32_t high_bits(const std::uint8_t (&qh)[4]) {
  return std::uint32_t{qh[0]} | std::uint32_t{qh[1]} << 8 | std::uint32_t{qh[2]} << 16 | std::uint32_t{qh[3]} << 24;
}

template <class Block>
void unpack_nibbles(const Block& b, std::uint8_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = b.qs[j] & 0xF;
    u[j + 16] = b.qs[j] >> 4;
  }
}
inline void unpack_scalar(const BlockQ4_0& b, std::uint8_t* u) { unpack_nibbles(b, u); }
inline void unpack_scalar(const BlockQ4_1& b, std::uint8_t* u) { unpack_nibbles(b, u); }
template <class Block>
void unpack_five_bits(const Block& b, std::uint8_t* u) {
  unpack_nibbles(b, u);
  const std::uint32_t qh = high_bits(b.qh);
  for (int j = 0; j < 32; ++j) u[j] |= static_cast<std::uint8_t>(((qh >> j) & 1u) << 4);
}
inline void unpack_scalar(const BlockQ5_0& b, std::uint8_t* u) { unpack_five_bits(b, u); }
inline void unpack_scalar(const BlockQ5_1& b, std::uint8_t* u) { unpack_five_bits(b, u); }
inline void unpack_scalar(const BlockQ8_0& b, std::uint8_t* u) {
  for (int j = 0; j < 32; ++j) u[j] = static_cast<std::uint8_t>(b.qs[j] + 128);
}

// ---- K super-blocks --------------------------------------------------------------------------

struct ScalesK {
  float a, b;
  std::int16_t scale[16];  // per 16 weights
  std::int16_t min[16];
};

// Q4_K's and Q5_K's six-bit scale and minimum of sub-block j (of 8) from their 12 packed bytes:
// sub-blocks 0-3 in the low six bits of bytes 0-3 (scales) and 4-7 (minimums); sub-blocks 4-7
// in the nibbles of bytes 8-11 (low: scale, high: minimum) with their top two bits in the top
// bits of bytes 0-3 (scales) and 4-7 (minimums).
inline void scale_min_k4(int j, const std::uint8_t* s, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
template <class Block>
ScalesK scales_k4(const Block& b) {
  ScalesK s;
  s.a = half_to_float(b.d);
  s.b = half_to_float(b.dmin);
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    scale_min_k4(j, b.scales, scale, min);
    s.scale[2 * j] = s.scale[2 * j + 1] = static_cast<std::int16_t>(scale);
    s.min[2 * j] = s.min[2 * j + 1] = static_cast<std::int16_t>(min);
  }
  return s;
}
inline ScalesK scales_of(const BlockQ4_K& b) { return scales_k4(b); }
inline ScalesK scales_of(const BlockQ5_K& b) { return scales_k4(b); }

inline ScalesK scales_of(const BlockQ2_K& b) {
  ScalesK s;
  s.a = half_to_float(b.d);
  s.b = half_to_float(b.dmin);
  for (int g = 0; g < 16; ++g) {
    s.scale[g] = b.scales[g] & 0xF;
    s.min[g] = b.scales[g] >> 4;
  }
  return s;
}
// Q3_K's 16 six-bit scales (stored + 32): the low four bits of scale g in the nibbles of bytes
// 0-7 (low nibbles for 0-7, high for 8-15), the top two in bits 2 (g / 4) of byte 8 + g % 4.
// w = d * (scale - 32) * (u - 4), so min = 4 * (scale - 32) with b = d.
inline ScalesK scales_of(const BlockQ3_K& b) {
  ScalesK s;
  s.a = s.b = half_to_float(b.d);
  for (int g = 0; g < 16; ++g) {
    const int low = g < 8 ? b.scales[g] & 0xF : b.scales[g - 8] >> 4;
    const int high = (b.scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    s.scale[g] = static_cast<std::int16_t>((low | high << 4) - 32);
    s.min[g] = static_cast<std::int16_t>(4 * s.scale[g]);
  }
  return s;
}
// Q6_K: w = d * scale * (u - 32).
inline ScalesK scales_of(const BlockQ6_K& b) {
  ScalesK s;
  s.a = s.b = half_to_float(b.d);
  for (int g = 0; g < 16; ++g) {
    s.scale[g] = b.scales[g];
    s.min[g] = static_cast<std::int16_t>(32 * b.scales[g]);
  }
  return s;
}

// Q2_K: weight 128 n + 32 s + l in bits 2 s of qs[32 n + l].
inline void unpack_scalar(const BlockQ2_K& b, std::uint8_t* u) {
  for (int n = 0; n < 2; ++n)
    for (int s = 0; s < 4; ++s)
      for (int l = 0; l < 32; ++l) u[128 * n + 32 * s + l] = (b.qs[32 * n + l] >> (2 * s)) & 3;
}
// Q3_K: as Q2_K, plus 4 where bit 4 n + s of hmask[l] is set (u = q + 4 * high bit).
inline void unpack_scalar(const BlockQ3_K& b, std::uint8_t* u) {
  for (int n = 0; n < 2; ++n)
    for (int s = 0; s < 4; ++s)
      for (int l = 0; l < 32; ++l)
        u[128 * n + 32 * s + l] = static_cast<std::uint8_t>(((b.qs[32 * n + l] >> (2 * s)) & 3) |
                                                            (((b.hmask[l] >> (4 * n + s)) & 1) << 2));
}
// Q4_K: for each 64 weights (c), qs[32 c + l] holds weight 64 c + l low and 64 c + 32 + l high.
inline void unpack_scalar(const BlockQ4_K& b, std::uint8_t* u) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      u[64 * c + l] = b.qs[32 * c + l] & 0xF;
      u[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
}
// Q5_K: Q4_K plus 16 where bit s of qh[l] is set, for weight 32 s + l.
inline void unpack_scalar(const BlockQ5_K& b, std::uint8_t* u) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      u[64 * c + l] = static_cast<std::uint8_t>((b.qs[32 * c + l] & 0xF) | (((b.qh[l] >> (2 * c)) & 1) << 4));
      u[64 * c + 32 + l] = static_cast<std::uint8_t>((b.qs[32 * c + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
}
// Q6_K: for each 128 weights (n), with ql = ql + 64 n and qh = qh + 32 n, weight 128 n + 32 k + l
// (l < 32) has low bits ql[l + 32 (k % 2)] (low nibble for k < 2, high for k >= 2) and high bits
// qh[l] >> 2 k.
inline void unpack_scalar(const BlockQ6_K& b, std::uint8_t* u) {
  for (int n = 0; n < 2; ++n) {
    const std::uint8_t *ql = b.ql + 64 * n, *qh = b.qh + 32 * n;
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int low = (ql[l + 32 * (k % 2)] >> (k < 2 ? 0 : 4)) & 0xF;
        u[128 * n + 32 * k + l] = static_cast<std::uint8_t>(low | (((qh[l] >> (2 * k)) & 3) << 4));
      }
  }
}

}  // namespace
}  // namespace switchyard::cpu::detail
