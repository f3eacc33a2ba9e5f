#pragma once
// Internal to the quantised kernels (quant_dot.h): each block type as unsigned integer weights and
// the scales that turn them into values, in plain C++. Every ISA's translation unit includes this
// and gets its own copy (unnamed namespace), compiled with its own flags, so that no AVX-512 copy
// can be linked into a caller on a CPU without it (linear_kernels.h says why).
//
// Three shapes:
// - a 32-weight block: w[i] = d * (u[i] - offset) + m, u[i] in [0, 256) (Q8_0, IQ4_NL and MXFP4,
//   whose values are signed bytes v, as u = v + 128: kSigned32);
// - a K super-block: w[i] = a * scale[i / 16] * u[i] - b * min[i / 16], u[i] in [0, 64), with
//   16-weight groups (Q4_K's and Q5_K's 32-weight sub-blocks are two groups of equal scales);
// - a signed super-block (the 256-weight IQ types: kSignedK): w[i] = a * scale[i / 16] * v[i],
//   v[i] a signed byte with |v| <= 127, scale a small integer (odd multiples for the lattice types,
//   scale - 32 for IQ4_XS), a the block's float factor (d / 8 for IQ2 and IQ1, d / 4 for IQ3_XXS,
//   d for IQ3_S and IQ4_XS). The IQ1 types' values are 8 point + or - 1, in [-9, 9].
// The integer products against activation bytes q (|q| <= 127) fit the SIMD code's int16 pairs:
// 2 * 63 * 127 < 2^15, and for signed weights |v| times q with v's sign: 2 * 127 * 127 < 2^15.
// The signed super-blocks' values a * scale * v are the reference decoder's
// (core/quant_dequantize.cpp) exactly: a's 11 significant bits, scale's 6 at most and v's 7 at
// most fit a float's 24, so no product rounds.
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/quant_blocks.h"
#include "core/quant_grids.h"
#include "operators/cpu/kernels/linear_kernels.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace switchyard::cpu::detail {
namespace {

using quant::BlockIQ1_M;
using quant::BlockIQ1_S;
using quant::BlockIQ2_S;
using quant::BlockIQ2_XS;
using quant::BlockIQ2_XXS;
using quant::BlockIQ3_S;
using quant::BlockIQ3_XXS;
using quant::BlockIQ4_NL;
using quant::BlockIQ4_XS;
using quant::BlockMXFP4;
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

// The 256-weight IQ types: signed values, no minimum.
template <class Block>
constexpr bool kSignedK = std::is_same_v<Block, BlockIQ2_XXS> || std::is_same_v<Block, BlockIQ2_XS> ||
                          std::is_same_v<Block, BlockIQ2_S> || std::is_same_v<Block, BlockIQ3_XXS> ||
                          std::is_same_v<Block, BlockIQ3_S> || std::is_same_v<Block, BlockIQ1_S> ||
                          std::is_same_v<Block, BlockIQ1_M> || std::is_same_v<Block, BlockIQ4_XS>;
// Every 256-weight type: they take BlockQ8_K activations (quant_dot.h's takes_q8_k).
template <class Block>
constexpr bool kIsK = std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ3_K> ||
                      std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K> ||
                      std::is_same_v<Block, BlockQ6_K> || kSignedK<Block>;
template <class Block>
constexpr int kElements = kIsK<Block> ? quant::kSuperBlock : quant::kBlock;
// The 32-weight types whose values are signed bytes (Q8_0's quants, IQ4_NL's and MXFP4's codebook
// values): the SIMD code multiplies |v| by x with v's sign.
template <class Block>
constexpr bool kSigned32 = std::is_same_v<Block, BlockQ8_0> || std::is_same_v<Block, BlockIQ4_NL> ||
                           std::is_same_v<Block, BlockMXFP4>;

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
    case DType::iq2_xxs: return f(BlockIQ2_XXS{});
    case DType::iq2_xs: return f(BlockIQ2_XS{});
    case DType::iq2_s: return f(BlockIQ2_S{});
    case DType::iq3_xxs: return f(BlockIQ3_XXS{});
    case DType::iq3_s: return f(BlockIQ3_S{});
    case DType::iq1_s: return f(BlockIQ1_S{});
    case DType::iq1_m: return f(BlockIQ1_M{});
    case DType::iq4_nl: return f(BlockIQ4_NL{});
    case DType::iq4_xs: return f(BlockIQ4_XS{});
    case DType::mxfp4: return f(BlockMXFP4{});
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
                        : kSigned32<Block> ? 128 : 0;
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

// MXFP4's scale 2^(e - 128) (quant::e8m0_half; the codes are doubled). The kernels' translation
// units keep their own copy of every function they call (linear_kernels.h says why).
inline float e8m0_half_scale(std::uint8_t e) {
  const std::uint32_t bits = e < 2 ? std::uint32_t{0x00200000} << e : std::uint32_t{e - 1u} << 23;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
// IQ4_NL and MXFP4: a codebook value per nibble (Q4_0's order), as u = v + 128.
template <class Block>
void unpack_codebook(const Block& b, const std::int8_t (&table)[16], std::uint8_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = static_cast<std::uint8_t>(table[b.qs[j] & 0xF] + 128);
    u[j + 16] = static_cast<std::uint8_t>(table[b.qs[j] >> 4] + 128);
  }
}
inline Scales32 scales_of(const BlockIQ4_NL& b) { return {half_to_float(b.d), 0.0f, 128}; }
inline Scales32 scales_of(const BlockMXFP4& b) { return {e8m0_half_scale(b.e), 0.0f, 128}; }
inline void unpack_scalar(const BlockIQ4_NL& b, std::uint8_t* u) { unpack_codebook(b, quant::kIq4Values, u); }
inline void unpack_scalar(const BlockMXFP4& b, std::uint8_t* u) { unpack_codebook(b, quant::kMxfp4Values, u); }
// A 32-weight block's d, as scales_of gives it.
inline float scale_d(const BlockMXFP4& b) { return e8m0_half_scale(b.e); }
template <class Block>
float scale_d(const Block& b) {
  return half_to_float(b.d);
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

// ---- Signed super-blocks (the 256-weight IQ types) -------------------------------------------

// The unpacked weights of a block: signed values v, or unsigned u.
template <class Block>
using Unpacked = std::conditional_t<kSignedK<Block>, std::int8_t, std::uint8_t>;

struct ScalesSignedK {
  float a;
  std::int16_t scale[16];  // per 16 weights
};

// quant::iq2_signs for every 7-bit index, as data.
constexpr std::array<std::uint8_t, 128> kIq2Signs = [] {
  std::array<std::uint8_t, 128> table{};
  for (unsigned k = 0; k < 128; ++k) table[k] = quant::iq2_signs(k);
  return table;
}();

inline std::uint32_t load_word(const void* p) {
  std::uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}
// Eight weights from an IQ2 or IQ3 grid point (byte j: weight j's magnitude), negated where bit j
// of `signs` is set.
inline void signed_point8(std::uint64_t point, unsigned signs, std::int8_t* v) {
  for (int j = 0; j < 8; ++j) {
    const int magnitude = static_cast<int>((point >> (8 * j)) & 0xFF);
    v[j] = static_cast<std::int8_t>((signs >> j) & 1u ? -magnitude : magnitude);
  }
}
// Eight IQ1 weights 8 point + delta (delta = 1 or -1), the point's bytes -1, 0 or 1.
inline void shifted_point8(std::uint64_t point, int delta, std::int8_t* v) {
  for (int j = 0; j < 8; ++j) v[j] = static_cast<std::int8_t>(8 * static_cast<std::int8_t>(point >> (8 * j)) + delta);
}
// Two IQ3 grid points (four magnitudes each) as one eight-weight point.
inline std::uint64_t point_pair(const std::uint32_t* grid, int first, int second) {
  return grid[first] | std::uint64_t{grid[second]} << 32;
}
// The scale of 32 weights, 2 s + 1, into both of their 16-weight groups.
inline void odd_scale32(ScalesSignedK& s, int sub_block, int scale) {
  s.scale[2 * sub_block] = s.scale[2 * sub_block + 1] = static_cast<std::int16_t>(2 * scale + 1);
}
// IQ2_XS's and IQ2_S's 16 four-bit scales (nibble h % 2 of scales[h / 2]) as 2 s + 1.
inline void odd_scales16(const std::uint8_t (&scales)[8], ScalesSignedK& s) {
  for (int h = 0; h < 16; ++h) s.scale[h] = static_cast<std::int16_t>(2 * ((scales[h / 2] >> (4 * (h % 2))) & 0xF) + 1);
}

// IQ2_XXS: sub-block s is the words a (grid indices, a byte a group) and w (sign indices, 7 bits a
// group; the scale in bits 28-31), qs[4 s .. 4 s + 1] and qs[4 s + 2 .. 4 s + 3].
inline std::uint32_t iq2_xxs_word(const BlockIQ2_XXS& b, int s, int which) {
  return b.qs[4 * s + 2 * which] | std::uint32_t{b.qs[4 * s + 2 * which + 1]} << 16;
}
inline ScalesSignedK scales_of(const BlockIQ2_XXS& b) {
  ScalesSignedK s{half_to_float(b.d) * 0.125f, {}};
  for (int sb = 0; sb < 8; ++sb) odd_scale32(s, sb, static_cast<int>(iq2_xxs_word(b, sb, 1) >> 28));
  return s;
}
inline void unpack_scalar(const BlockIQ2_XXS& b, std::int8_t* v) {
  for (int s = 0; s < 8; ++s) {
    const std::uint32_t a = iq2_xxs_word(b, s, 0), w = iq2_xxs_word(b, s, 1);
    for (int l = 0; l < 4; ++l)
      signed_point8(quant::kIq2xxsGrid[(a >> (8 * l)) & 0xFF], kIq2Signs[(w >> (7 * l)) & 127], v + 32 * s + 8 * l);
  }
}
// IQ2_XS: group g is qs[g]: grid index in bits 0-8, sign index in 9-15.
inline ScalesSignedK scales_of(const BlockIQ2_XS& b) {
  ScalesSignedK s{half_to_float(b.d) * 0.125f, {}};
  odd_scales16(b.scales, s);
  return s;
}
inline void unpack_scalar(const BlockIQ2_XS& b, std::int8_t* v) {
  for (int g = 0; g < 32; ++g) signed_point8(quant::kIq2xsGrid[b.qs[g] & 511], kIq2Signs[b.qs[g] >> 9], v + 8 * g);
}
// IQ2_S: group g = 4 s + l: grid index qs[g] with bits 2 l, 2 l + 1 of qh[s] as bits 8-9; signs qs[32 + g].
inline ScalesSignedK scales_of(const BlockIQ2_S& b) {
  ScalesSignedK s{half_to_float(b.d) * 0.125f, {}};
  odd_scales16(b.scales, s);
  return s;
}
inline void unpack_scalar(const BlockIQ2_S& b, std::int8_t* v) {
  for (int g = 0; g < 32; ++g) {
    const int index = b.qs[g] | ((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8;
    signed_point8(quant::kIq2sGrid[index], b.qs[32 + g], v + 8 * g);
  }
}
// IQ3_XXS: weights [4 k, 4 k + 4) are grid point qs[k]; sub-block s's word at qs + 64 + 4 s holds
// its groups' sign indices and the scale, as IQ2_XXS's w.
inline ScalesSignedK scales_of(const BlockIQ3_XXS& b) {
  ScalesSignedK s{half_to_float(b.d) * 0.25f, {}};
  for (int sb = 0; sb < 8; ++sb) odd_scale32(s, sb, static_cast<int>(load_word(b.qs + 64 + 4 * sb) >> 28));
  return s;
}
inline void unpack_scalar(const BlockIQ3_XXS& b, std::int8_t* v) {
  for (int s = 0; s < 8; ++s) {
    const std::uint32_t w = load_word(b.qs + 64 + 4 * s);
    for (int l = 0; l < 4; ++l) {
      const int k = 8 * s + 2 * l;
      signed_point8(point_pair(quant::kIq3xxsGrid, b.qs[k], b.qs[k + 1]), kIq2Signs[(w >> (7 * l)) & 127],
                    v + 32 * s + 8 * l);
    }
  }
}
// IQ3_S: weights [4 k, 4 k + 4) are grid point qs[k] | (bit k % 8 of qh[k / 8]) << 8; group g's
// signs are signs[g]; sub-block s's scale nibble s % 2 of scales[s / 2].
inline ScalesSignedK scales_of(const BlockIQ3_S& b) {
  ScalesSignedK s{half_to_float(b.d), {}};
  for (int sb = 0; sb < 8; ++sb) odd_scale32(s, sb, (b.scales[sb / 2] >> (4 * (sb % 2))) & 0xF);
  return s;
}
inline void unpack_scalar(const BlockIQ3_S& b, std::int8_t* v) {
  auto index = [&b](int k) { return b.qs[k] | ((b.qh[k / 8] >> (k % 8)) & 1) << 8; };
  for (int g = 0; g < 32; ++g)
    signed_point8(point_pair(quant::kIq3sGrid, index(2 * g), index(2 * g + 1)), b.signs[g], v + 8 * g);
}
// IQ1_S: sub-block s's word h = qh[s]: group 4 s + l is grid point qs[4 s + l] | ((h >> 3 l) & 7) << 8;
// the scale is bits 12-14, bit 15 makes the shift -1/8 (else 1/8).
inline ScalesSignedK scales_of(const BlockIQ1_S& b) {
  ScalesSignedK s{half_to_float(b.d) * 0.125f, {}};
  for (int sb = 0; sb < 8; ++sb) odd_scale32(s, sb, (b.qh[sb] >> 12) & 7);
  return s;
}
inline void unpack_scalar(const BlockIQ1_S& b, std::int8_t* v) {
  for (int s = 0; s < 8; ++s) {
    const unsigned h = b.qh[s];
    const int delta = h & 0x8000u ? -1 : 1;
    for (int l = 0; l < 4; ++l)
      shifted_point8(quant::kIq1sGrid[b.qs[4 * s + l] | ((h >> (3 * l)) & 7u) << 8], delta, v + 32 * s + 8 * l);
  }
}
// IQ1_M: group g = 4 s + l: nibble n = nibble l % 2 of qh[2 s + l / 2]; grid point qs[g] | (n & 7) << 8,
// shift -1/8 where bit 3 of n is set. The four little-endian words of scales hold the three-bit
// scale of weights [16 h, 16 h + 16) in bits 3 (h % 4) of word h / 4, and d in their top nibbles.
inline ScalesSignedK scales_of(const BlockIQ1_M& b) {
  std::uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  const auto d_bits = static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                                 (sc[3] & 0xF000));
  ScalesSignedK s{half_to_float(d_bits) * 0.125f, {}};
  for (int h = 0; h < 16; ++h) s.scale[h] = static_cast<std::int16_t>(2 * ((sc[h / 4] >> (3 * (h % 4))) & 7) + 1);
  return s;
}
inline void unpack_scalar(const BlockIQ1_M& b, std::int8_t* v) {
  for (int g = 0; g < 32; ++g) {
    const unsigned n = (b.qh[g / 2] >> (4 * (g % 2))) & 0xFu;
    shifted_point8(quant::kIq1sGrid[b.qs[g] | (n & 7u) << 8], n & 8u ? -1 : 1, v + 8 * g);
  }
}
// IQ4_XS: sub-block s's six-bit scale (stored + 32) is nibble s % 2 of scales_l[s / 2] with bits
// 2 s, 2 s + 1 of scales_h on top; its weights are codebook values of qs[16 s .. 16 s + 15]'s
// nibbles in Q4_0's order.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int s) {
  return (((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((b.scales_h >> (2 * s)) & 3) << 4) - 32;
}
inline ScalesSignedK scales_of(const BlockIQ4_XS& b) {
  ScalesSignedK s{half_to_float(b.d), {}};
  for (int sb = 0; sb < 8; ++sb) s.scale[2 * sb] = s.scale[2 * sb + 1] = static_cast<std::int16_t>(iq4_xs_scale(b, sb));
  return s;
}
inline void unpack_scalar(const BlockIQ4_XS& b, std::int8_t* v) {
  for (int s = 0; s < 8; ++s)
    for (int j = 0; j < 16; ++j) {
      v[32 * s + j] = quant::kIq4Values[b.qs[16 * s + j] & 0xF];
      v[32 * s + 16 + j] = quant::kIq4Values[b.qs[16 * s + j] >> 4];
    }
}

}  // namespace
}  // namespace switchyard::cpu::detail
