#pragma once
// ggml's block formats decoded in registers, for the kernels' .cu files: eight consecutive
// weights of a row of blocks at a time, as f32. The layouts and the arithmetic are
// core/quant_blocks.h's and core/quant_dequantize.cpp's, in the same order of float operations
// (d * scale first, then the quant, then the minimum) with every product and difference rounded
// on its own (__fmul_rn, __fsub_rn: no fused multiply-add), so that a decoded weight equals the
// CPU's scalar reference bit for bit.
//
// A row of `in` weights is in / kElements blocks of kBytes each. Blocks are only 2-byte aligned
// (Q8_0's 34 bytes, Q6_K's 210), so loads are 16-bit, or 32-bit where the type's block size and
// field offsets keep 4-byte alignment (kAlign), on rows whose start has that alignment. MXFP4's
// 17-byte blocks are only byte-aligned (kAlign 1): its bytes come from the aligned words that hold
// them (bytes8_any).
//
// Speed: decoding is the kernels' bottleneck, not the bytes (a weight costs a few instructions
// where bf16 costs a shift), so quants become floats without integer-to-float conversions, which
// run at a quarter of the FP32 rate or less: the bits 0x4B000000 | u are the float 2^23 + u, and
// one exact subtraction leaves u - offset (small_to_float). Offsets within a row are 32-bit. The
// IQ types read one grid point per 8 weights from a table in device memory (quant_grids.cuh);
// IQ4_NL, IQ4_XS and MXFP4 look their 4-bit codes up in registers, four at a time, by byte
// permutation (codebook4).
#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/quant_grids.h"
#include "operators/cuda/kernels/quant_grids.cuh"

namespace switchyard::cuda {

__device__ inline float half_at(const std::uint8_t* p) {
  return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
}

// The little-endian 16-bit and 32-bit words at p (2-byte aligned).
__device__ inline unsigned u16_at(const std::uint8_t* p) { return __ldg(reinterpret_cast<const unsigned short*>(p)); }
__device__ inline unsigned word_at(const std::uint8_t* p) { return u16_at(p) | u16_at(p + 2) << 16; }

// 8 bytes at p (2-byte aligned, or 4-byte when kAlign4) as two little-endian words.
template <bool kAlign4>
__device__ inline uint2 bytes8_at(const std::uint8_t* p) {
  if constexpr (kAlign4) {
    const auto* w = reinterpret_cast<const unsigned*>(p);
    return make_uint2(__ldg(w), __ldg(w + 1));
  } else {
    const auto* h = reinterpret_cast<const unsigned short*>(p);
    return make_uint2(__ldg(h) | static_cast<unsigned>(__ldg(h + 1)) << 16,
                      __ldg(h + 2) | static_cast<unsigned>(__ldg(h + 3)) << 16);
  }
}

// 8 bytes at any address as two little-endian words, funnel-shifted from the aligned words that
// hold them. No word holding none of the 8 bytes is read, so the last block of a buffer is safe.
__device__ inline uint2 bytes8_any(const std::uint8_t* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  const auto* words = reinterpret_cast<const unsigned*>(address & ~std::uintptr_t{3});
  const auto shift = static_cast<unsigned>(8 * (address & 3));
  const unsigned w0 = __ldg(words), w1 = __ldg(words + 1), w2 = shift != 0 ? __ldg(words + 2) : 0u;
  return make_uint2(__funnelshift_r(w0, w1, shift), __funnelshift_r(w1, w2, shift));
}

// Byte i in [0, 8) of two words.
__device__ inline unsigned byte_of(const uint2& v, int i) { return ((i < 4 ? v.x : v.y) >> (8 * (i % 4))) & 0xffu; }

// u - offset as a float, exactly, for 0 <= u < 2^22 and 0 <= offset < 2^22 (the same value as
// static_cast<float>(int(u) - offset): both are exact small integers).
template <int kOffset = 0>
__device__ inline float small_to_float(unsigned u) {
  return __fsub_rn(__uint_as_float(0x4B000000u | u), 8388608.0f + static_cast<float>(kOffset));
}
// A signed byte's value as a float, exactly: (b ^ 0x80) = b + 128 in [0, 256).
__device__ inline float signed_byte_to_float(unsigned byte) { return small_to_float<128>((byte & 0xffu) ^ 0x80u); }

// a * q - m, each rounded on its own (the CPU reference's order).
__device__ inline float scaled_minus(float a, float q, float m) { return __fsub_rn(__fmul_rn(a, q), m); }
__device__ inline float scaled_plus(float q, float d, float m) { return __fadd_rn(__fmul_rn(q, d), m); }

template <DType D>
struct QuantRow;

// Q8_0: [d][32 x int8]. value = q * d.
template <>
struct QuantRow<DType::q8_0> {
  static constexpr int kElements = 32, kBytes = 34, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const uint2 q = bytes8_at<false>(b + 2 + e);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = __fmul_rn(signed_byte_to_float(byte_of(q, i)), d);
  }
};

// Q4_0: [d][16 nibble bytes]. value = (q - 8) * d; weight j < 16 low nibble of qs[j], j >= 16 high of qs[j - 16].
template <>
struct QuantRow<DType::q4_0> {
  static constexpr int kElements = 32, kBytes = 18, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const uint2 q = bytes8_at<false>(b + 2 + e % 16);
    const int shift = e >= 16 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = __fmul_rn(small_to_float<8>((byte_of(q, i) >> shift) & 15u), d);
  }
};

// Q4_1: [d][m][16 nibble bytes]. value = q * d + m.
template <>
struct QuantRow<DType::q4_1> {
  static constexpr int kElements = 32, kBytes = 20, kAlign = 4;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b), m = half_at(b + 2);
    const uint2 q = bytes8_at<true>(b + 4 + e % 16);
    const int shift = e >= 16 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = scaled_plus(small_to_float((byte_of(q, i) >> shift) & 15u), d, m);
  }
};

// Q5_0: [d][qh 4][16 nibble bytes]. value = (q - 16) * d.
template <>
struct QuantRow<DType::q5_0> {
  static constexpr int kElements = 32, kBytes = 22, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const unsigned qh = word_at(b + 2);
    const uint2 q = bytes8_at<false>(b + 6 + e % 16);
    const int shift = e >= 16 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const unsigned quant = ((byte_of(q, i) >> shift) & 15u) | ((qh >> (e + i)) & 1u) << 4;
      w[i] = __fmul_rn(small_to_float<16>(quant), d);
    }
  }
};

// Q5_1: [d][m][qh 4][16 nibble bytes]. value = q * d + m.
template <>
struct QuantRow<DType::q5_1> {
  static constexpr int kElements = 32, kBytes = 24, kAlign = 4;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b), m = half_at(b + 2);
    const unsigned qh = word_at(b + 4);
    const uint2 q = bytes8_at<true>(b + 8 + e % 16);
    const int shift = e >= 16 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const unsigned quant = ((byte_of(q, i) >> shift) & 15u) | ((qh >> (e + i)) & 1u) << 4;
      w[i] = scaled_plus(small_to_float(quant), d, m);
    }
  }
};

// Q2_K: [scales 16][qs 64][d][dmin]. Weight e: half h = e / 128, r = e % 128; bits 2 (r / 32) of
// qs[32 h + r % 32]; sub-block e / 16's scale byte (low nibble scale, high nibble min).
template <>
struct QuantRow<DType::q2_k> {
  static constexpr int kElements = 256, kBytes = 84, kAlign = 4;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b + 80), dmin = half_at(b + 82);
    const unsigned sc = __ldg(b + e / 16);
    const float dl = __fmul_rn(d, small_to_float(sc & 15u)), ml = __fmul_rn(dmin, small_to_float(sc >> 4));
    const int r = e % 128, shift = 2 * (r / 32);
    const uint2 q = bytes8_at<true>(b + 16 + 32 * (e / 128) + r % 32);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = scaled_minus(dl, small_to_float((byte_of(q, i) >> shift) & 3u), ml);
  }
};

// Q3_K: [hmask 32][qs 64][scales 12][d]. Low two bits as Q2_K's; the high bit is bit e / 32 of
// hmask[e % 32] (clear: minus 4); six-bit scales biased by 32 (core/quant_blocks.h).
template <>
struct QuantRow<DType::q3_k> {
  static constexpr int kElements = 256, kBytes = 110, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b + 108);
    const int s = e / 16;
    const unsigned low4 = s < 8 ? __ldg(b + 96 + s) & 15u : __ldg(b + 96 + s - 8) >> 4;
    const unsigned high2 = (__ldg(b + 96 + 8 + s % 4) >> (2 * (s / 4))) & 3u;
    const float dl = __fmul_rn(d, small_to_float<32>(low4 | high2 << 4));
    const int r = e % 128, shift = 2 * (r / 32), l = r % 32, bit = e / 32;
    const uint2 q = bytes8_at<false>(b + 32 + 32 * (e / 128) + l);
    const uint2 h = bytes8_at<false>(b + l);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      // low two bits, minus 4 where the high bit is clear: (low + 4 * high) - 4.
      const unsigned biased = ((byte_of(q, i) >> shift) & 3u) | ((byte_of(h, i) >> bit) & 1u) << 2;
      w[i] = __fmul_rn(dl, small_to_float<4>(biased));
    }
  }
};

// Q4_K's and Q5_K's six-bit (scale, min) of sub-block s from the 12 bytes at p (core/quant_blocks.h).
__device__ inline void k4_scale_min_at(const std::uint8_t* p, int s, unsigned& scale, unsigned& min) {
  if (s < 4) {
    scale = __ldg(p + s) & 63u;
    min = __ldg(p + s + 4) & 63u;
  } else {
    const unsigned packed = __ldg(p + s + 4);
    scale = (packed & 15u) | (__ldg(p + s - 4) >> 6) << 4;
    min = (packed >> 4) | (__ldg(p + s) >> 6) << 4;
  }
}

// Q4_K: [d][dmin][scales 12][qs 128]. Weight e: 64-weight chunk c = e / 64 shares qs[32 c, 32 c + 32),
// low nibbles for e % 64 < 32, high for the rest; sub-block s = e / 32.
template <>
struct QuantRow<DType::q4_k> {
  static constexpr int kElements = 256, kBytes = 144, kAlign = 4;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const int s = e / 32;
    unsigned scale, min;
    k4_scale_min_at(b + 4, s, scale, min);
    const float dl = __fmul_rn(d, small_to_float(scale)), ml = __fmul_rn(dmin, small_to_float(min));
    const uint2 q = bytes8_at<true>(b + 16 + 32 * (e / 64) + e % 32);
    const int shift = s % 2 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = scaled_minus(dl, small_to_float((byte_of(q, i) >> shift) & 15u), ml);
  }
};

// Q5_K: [d][dmin][scales 12][qh 32][qs 128]: Q4_K plus bit s of qh[e % 32] as the fifth.
template <>
struct QuantRow<DType::q5_k> {
  static constexpr int kElements = 256, kBytes = 176, kAlign = 4;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const int s = e / 32;
    unsigned scale, min;
    k4_scale_min_at(b + 4, s, scale, min);
    const float dl = __fmul_rn(d, small_to_float(scale)), ml = __fmul_rn(dmin, small_to_float(min));
    const uint2 q = bytes8_at<true>(b + 48 + 32 * (e / 64) + e % 32);
    const uint2 h = bytes8_at<true>(b + 16 + e % 32);
    const int shift = s % 2 ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const unsigned quant = ((byte_of(q, i) >> shift) & 15u) | ((byte_of(h, i) >> s) & 1u) << 4;
      w[i] = scaled_minus(dl, small_to_float(quant), ml);
    }
  }
};

// Q6_K: [ql 128][qh 64][scales 16 x int8][d]. Weight e: h = e / 128, r = e % 128, p = r / 32,
// l = r % 32: low four bits from ql[64 h + 32 (p % 2) + l] (low nibble for p < 2), high two bits
// 2 p of qh[32 h + l]; value = (d * scales[e / 16]) * (q - 32).
template <>
struct QuantRow<DType::q6_k> {
  static constexpr int kElements = 256, kBytes = 210, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b + 208);
    const float dl = __fmul_rn(d, signed_byte_to_float(__ldg(b + 192 + e / 16)));
    const int h = e / 128, r = e % 128, p = r / 32, l = r % 32;
    const uint2 low = bytes8_at<false>(b + 64 * h + 32 * (p % 2) + l);
    const uint2 high = bytes8_at<false>(b + 128 + 32 * h + l);
    const int shift = p < 2 ? 0 : 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const unsigned quant = ((byte_of(low, i) >> shift) & 15u) | ((byte_of(high, i) >> (2 * p)) & 3u) << 4;
      w[i] = __fmul_rn(dl, small_to_float<32>(quant));
    }
  }
};

// ---- The IQ types and MXFP4 -------------------------------------------------------------------
// Weight e of a 256-weight super-block is in group g = e / 8 (eight weights from one grid point),
// sub-block s = e / 32, and l = g % 4 is the group's place in its sub-block.

// core/quant_grids.h's iq2_signs: the eight sign bits of a 7-bit index, bit 7 making the number of
// minus signs even.
__device__ inline unsigned iq2_signs(unsigned index) {
  index &= 127u;
  return index | (__popc(index) & 1u) << 7;
}

// Eight weights db * magnitude (byte i of `point`), negated where bit i of `signs` is set. The
// reference multiplies the rounded product by -1, which flips the sign bit and nothing else.
__device__ inline void signed_points8(float db, const uint2& point, unsigned signs, float (&w)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float magnitude = __fmul_rn(db, small_to_float(byte_of(point, i)));
    w[i] = __uint_as_float(__float_as_uint(magnitude) ^ ((signs >> i) & 1u) << 31);
  }
}

// The IQ2 and IQ3_XXS sub-block scale (d * (0.5 + scale)) * factor, scale a 4-bit integer.
__device__ inline float iq_scale(float d, unsigned scale, float factor) {
  return __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, small_to_float(scale))), factor);
}

// IQ2_XXS: [d][qs 32 x u16]. Sub-block s: grid indices bytes 8 s .. 8 s + 3 of qs (one a group),
// then the word of the four groups' 7-bit sign indices (bits 7 l ..) and the 4-bit scale (>> 28).
template <>
struct QuantRow<DType::iq2_xxs> {
  static constexpr int kElements = 256, kBytes = 66, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const int s = e / 32, l = e / 8 % 4;
    const unsigned index = __ldg(b + 2 + 8 * s + l), word = word_at(b + 2 + 8 * s + 4);
    signed_points8(iq_scale(d, word >> 28, 0.25f), grid_point(kIq2xxsGrid, index), iq2_signs(word >> (7 * l)), w);
  }
};

// IQ2_XS: [d][qs 32 x u16][scales 8]. Group g: q = qs[g], grid index q & 511, sign index q >> 9;
// the 4-bit scale of weights [16 h, 16 h + 16) is nibble h % 2 of scales[h / 2].
template <>
struct QuantRow<DType::iq2_xs> {
  static constexpr int kElements = 256, kBytes = 74, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const unsigned q = u16_at(b + 2 + 2 * (e / 8));
    const int h = e / 16;
    const unsigned scale = (__ldg(b + 66 + h / 2) >> (4 * (h % 2))) & 15u;
    signed_points8(iq_scale(d, scale, 0.25f), grid_point(kIq2xsGrid, q & 511u), iq2_signs(q >> 9), w);
  }
};

// IQ2_S: [d][qs 32][signs 32][qh 8][scales 8]. Group g: grid index qs[g] | bits 2 l, 2 l + 1 of
// qh[s] as bits 8-9, sign bits signs[g]; scales as IQ2_XS's.
template <>
struct QuantRow<DType::iq2_s> {
  static constexpr int kElements = 256, kBytes = 82, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const int g = e / 8, s = e / 32, h = e / 16;
    const unsigned index = __ldg(b + 2 + g) | ((__ldg(b + 66 + s) >> (2 * (g % 4))) & 3u) << 8;
    const unsigned scale = (__ldg(b + 74 + s) >> (4 * (h % 2))) & 15u;
    signed_points8(iq_scale(d, scale, 0.25f), grid_point(kIq2sGrid, index), __ldg(b + 34 + g), w);
  }
};

// IQ3_XXS: [d][grid indices 64][words 8 x u32]. Group g: the 4-weight points qs[2 g], qs[2 g + 1];
// sub-block s's word (byte 66 + 4 s): sign indices and scale as IQ2_XXS's, factor 0.5.
template <>
struct QuantRow<DType::iq3_xxs> {
  static constexpr int kElements = 256, kBytes = 98, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const int g = e / 8, s = e / 32;
    const unsigned pair = u16_at(b + 2 + 2 * g), word = word_at(b + 66 + 4 * s);
    signed_points8(iq_scale(d, word >> 28, 0.5f), grid_points(kIq3xxsGrid, pair & 255u, pair >> 8),
                   iq2_signs(word >> (7 * (g % 4))), w);
  }
};

// IQ3_S: [d][qs 64][qh 8][signs 32][scales 4]. Group g: the 4-weight points qs[2 g] and qs[2 g + 1],
// their ninth bits bits 2 l and 2 l + 1 of qh[s]; sign bits signs[g]; the scale is nibble s % 2 of
// scales[s / 2]: db = d * (1 + 2 scale).
template <>
struct QuantRow<DType::iq3_s> {
  static constexpr int kElements = 256, kBytes = 110, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const int g = e / 8, s = e / 32;
    const unsigned pair = u16_at(b + 2 + 2 * g), high = __ldg(b + 66 + s) >> (2 * (g % 4));
    const unsigned first = (pair & 255u) | (high & 1u) << 8, second = (pair >> 8) | (high & 2u) << 7;
    const unsigned scale = (__ldg(b + 106 + s / 2) >> (4 * (s % 2))) & 15u;
    signed_points8(__fmul_rn(d, small_to_float(1u + 2u * scale)), grid_points(kIq3sGrid, first, second),
                   __ldg(b + 74 + g), w);
  }
};

// Eight IQ1 weights dl * (signed byte i of `point` + delta): the sum of -1, 0 or 1 and +-1/8 is exact.
__device__ inline void shifted_points8(float dl, const uint2& point, float delta, float (&w)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) w[i] = __fmul_rn(dl, __fadd_rn(signed_byte_to_float(byte_of(point, i)), delta));
}

// IQ1_S: [d][qs 32][qh 8 x u16]. Sub-block s's word h = qh[s]: group g's point
// qs[g] | ((h >> 3 l) & 7) << 8; dl = d * (2 ((h >> 12) & 7) + 1); bit 15 of h makes delta negative.
template <>
struct QuantRow<DType::iq1_s> {
  static constexpr int kElements = 256, kBytes = 50, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const int g = e / 8, s = e / 32;
    const unsigned h = u16_at(b + 34 + 2 * s);
    const unsigned index = __ldg(b + 2 + g) | ((h >> (3 * (g % 4))) & 7u) << 8;
    const float dl = __fmul_rn(d, small_to_float(2u * ((h >> 12) & 7u) + 1u));
    shifted_points8(dl, grid_point(kIq1sGrid, index), h & 0x8000u ? -quant::kIq1Delta : quant::kIq1Delta, w);
  }
};

// IQ1_M: [qs 32][qh 16][scales 8], no d field. h = e / 16: nibble n = nibble g % 2 of qh[h]; group
// g's point qs[g] | (n & 7) << 8, n's bit 3 makes delta negative. The scales are four 16-bit words
// sc: d's half-float bits are their top nibbles (sc[0]'s lowest), the 3-bit scale of weights
// [16 h, 16 h + 16) is bits 3 (h % 4) .. of sc[h / 4]; dl = d * (2 scale + 1).
template <>
struct QuantRow<DType::iq1_m> {
  static constexpr int kElements = 256, kBytes = 56, kAlign = 4;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const uint2 sc = bytes8_at<true>(b + 48);  // sc[0] | sc[1] << 16, sc[2] | sc[3] << 16
    const unsigned d_bits = ((sc.x >> 12) & 0xFu) | ((sc.x >> 24) & 0xF0u) | ((sc.y >> 4) & 0xF00u) |
                            ((sc.y >> 16) & 0xF000u);
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(d_bits)));
    const int g = e / 8, h = e / 16;
    const unsigned scale = ((h < 8 ? sc.x : sc.y) >> (16 * (h / 4 % 2) + 3 * (h % 4))) & 7u;
    const unsigned nibble = (__ldg(b + 32 + h) >> (4 * (g % 2))) & 15u;
    const unsigned index = __ldg(b + g) | (nibble & 7u) << 8;
    const float dl = __fmul_rn(d, small_to_float(2u * scale + 1u));
    shifted_points8(dl, grid_point(kIq1sGrid, index), nibble & 8u ? -quant::kIq1Delta : quant::kIq1Delta, w);
  }
};

// A 4-bit codebook (core/quant_grids.h) as four words of four signed-byte values each: entries
// 4 i .. 4 i + 3 in word i, lowest byte first.
constexpr unsigned codebook_word(const std::int8_t (&values)[16], int i) {
  unsigned word = 0;
  for (int j = 0; j < 4; ++j) word |= (static_cast<unsigned>(values[4 * i + j]) & 0xFFu) << (8 * j);
  return word;
}
template <const std::int8_t (&kValues)[16]>
struct Codebook {
  static constexpr unsigned k0 = codebook_word(kValues, 0), k1 = codebook_word(kValues, 1),
                            k2 = codebook_word(kValues, 2), k3 = codebook_word(kValues, 3);
};
using Iq4Codebook = Codebook<quant::kIq4Values>;
using Mxfp4Codebook = Codebook<quant::kMxfp4Values>;

// The values of four 4-bit codes (the bytes of `codes`, each below 16) as four signed bytes. A byte
// permutation picks each code's value among entries 0-7 and among 8-15 (the selector's low three
// bits), a third keeps the one its bit 3 names.
template <typename Book>
__device__ inline unsigned codebook4(unsigned codes) {
  const unsigned paired = codes | codes >> 4;                   // bytes 0, 2: codes 0 | 1 << 4, 2 | 3 << 4
  const unsigned selectors = __byte_perm(paired, 0u, 0x4420u);  // the four codes as the low four nibbles
  const unsigned low = __byte_perm(Book::k0, Book::k1, selectors & 0x7777u);
  const unsigned high = __byte_perm(Book::k2, Book::k3, selectors & 0x7777u);
  return __byte_perm(low, high, 0x3210u | (selectors & 0x8888u) >> 1);
}

// Eight weights scale * value[code], the codes the nibbles at `shift` of the bytes of q.
template <typename Book>
__device__ inline void codebook8(float scale, const uint2& q, int shift, float (&w)[8]) {
  const uint2 values = make_uint2(codebook4<Book>((q.x >> shift) & 0x0F0F0F0Fu), codebook4<Book>((q.y >> shift) & 0x0F0F0F0Fu));
#pragma unroll
  for (int i = 0; i < 8; ++i) w[i] = __fmul_rn(scale, signed_byte_to_float(byte_of(values, i)));
}

// IQ4_NL: [d][16 nibble bytes] as Q4_0's; value = d * kIq4Values[q].
template <>
struct QuantRow<DType::iq4_nl> {
  static constexpr int kElements = 32, kBytes = 18, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    codebook8<Iq4Codebook>(half_at(b), bytes8_at<false>(b + 2 + e % 16), e >= 16 ? 4 : 0, w);
  }
};

// IQ4_XS: [d][scales_h u16][scales_l 4][qs 128]. Sub-block s: six-bit scale nibble s % 2 of
// scales_l[s / 2] | bits 2 s, 2 s + 1 of scales_h << 4; its weights nibbles of qs[16 s ..] as Q4_0's:
// value = (d * (scale - 32)) * kIq4Values[q].
template <>
struct QuantRow<DType::iq4_xs> {
  static constexpr int kElements = 256, kBytes = 136, kAlign = 4;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const int s = e / 32;
    const unsigned scale = ((__ldg(b + 4 + s / 2) >> (4 * (s % 2))) & 15u) | ((u16_at(b + 2) >> (2 * s)) & 3u) << 4;
    const float dl = __fmul_rn(d, small_to_float<32>(scale));
    codebook8<Iq4Codebook>(dl, bytes8_at<true>(b + 8 + 16 * s + e % 16), e % 32 >= 16 ? 4 : 0, w);
  }
};

// core/quant_grids.h's e8m0_half: 2^(e - 128) as a float, subnormal for e < 2.
__device__ inline float e8m0_half(unsigned e) { return __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1u) << 23); }

// MXFP4: [e][16 nibble bytes] as Q4_0's, 17 bytes; value = e8m0_half(e) * kMxfp4Values[q].
template <>
struct QuantRow<DType::mxfp4> {
  static constexpr int kElements = 32, kBytes = 17, kAlign = 1;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    codebook8<Mxfp4Codebook>(e8m0_half(__ldg(b)), bytes8_any(b + 1 + e % 16), e >= 16 ? 4 : 0, w);
  }
};

// Weights [k, k + 8) of a row of blocks (k a multiple of 8, below 2^31).
template <DType D>
__device__ inline void load8_blocks(const std::uint8_t* row, int k, float (&w)[8]) {
  using Q = QuantRow<D>;
  const auto block = static_cast<unsigned>(k) / Q::kElements;
  QuantRow<D>::load8(row + block * Q::kBytes, static_cast<int>(static_cast<unsigned>(k) % Q::kElements), w);
}

// Calls f.template operator()<D>() for the block type `dtype` (ggml's Q, K and IQ types and MXFP4:
// every block type of core/dtype.h); returns false for any other dtype.
template <typename F>
bool visit_block_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::q8_0: f.template operator()<DType::q8_0>(); return true;
    case DType::q4_0: f.template operator()<DType::q4_0>(); return true;
    case DType::q4_1: f.template operator()<DType::q4_1>(); return true;
    case DType::q5_0: f.template operator()<DType::q5_0>(); return true;
    case DType::q5_1: f.template operator()<DType::q5_1>(); return true;
    case DType::q2_k: f.template operator()<DType::q2_k>(); return true;
    case DType::q3_k: f.template operator()<DType::q3_k>(); return true;
    case DType::q4_k: f.template operator()<DType::q4_k>(); return true;
    case DType::q5_k: f.template operator()<DType::q5_k>(); return true;
    case DType::q6_k: f.template operator()<DType::q6_k>(); return true;
    case DType::iq2_xxs: f.template operator()<DType::iq2_xxs>(); return true;
    case DType::iq2_xs: f.template operator()<DType::iq2_xs>(); return true;
    case DType::iq2_s: f.template operator()<DType::iq2_s>(); return true;
    case DType::iq3_xxs: f.template operator()<DType::iq3_xxs>(); return true;
    case DType::iq3_s: f.template operator()<DType::iq3_s>(); return true;
    case DType::iq1_s: f.template operator()<DType::iq1_s>(); return true;
    case DType::iq1_m: f.template operator()<DType::iq1_m>(); return true;
    case DType::iq4_nl: f.template operator()<DType::iq4_nl>(); return true;
    case DType::iq4_xs: f.template operator()<DType::iq4_xs>(); return true;
    case DType::mxfp4: f.template operator()<DType::mxfp4>(); return true;
    default: return false;
  }
}

}  // namespace switchyard::cuda
