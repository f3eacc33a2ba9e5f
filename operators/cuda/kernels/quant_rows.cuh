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
// field offsets keep 4-byte alignment (kAlign), on rows whose start has that alignment.
//
// Speed: decoding is the kernels' bottleneck, not the bytes (a weight costs a few instructions
// where bf16 costs a shift), so quants become floats without integer-to-float conversions, which
// run at a quarter of the FP32 rate or less: the bits 0x4B000000 | u are the float 2^23 + u, and
// one exact subtraction leaves u - offset (small_to_float). Offsets within a row are 32-bit.
#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.h"

namespace switchyard::cuda {

__device__ inline float half_at(const std::uint8_t* p) {
  return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
}

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

// The fifth bits of Q5_0 / Q5_1: bit j of the little-endian word qh (2-byte aligned).
__device__ inline unsigned qh_word(const std::uint8_t* p) {
  const auto* h = reinterpret_cast<const unsigned short*>(p);
  return __ldg(h) | static_cast<unsigned>(__ldg(h + 1)) << 16;
}

// Q5_0: [d][qh 4][16 nibble bytes]. value = (q - 16) * d.
template <>
struct QuantRow<DType::q5_0> {
  static constexpr int kElements = 32, kBytes = 22, kAlign = 2;
  __device__ static void load8(const std::uint8_t* b, int e, float (&w)[8]) {
    const float d = half_at(b);
    const unsigned qh = qh_word(b + 2);
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
    const unsigned qh = qh_word(b + 4);
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

// Weights [k, k + 8) of a row of blocks (k a multiple of 8, below 2^31).
template <DType D>
__device__ inline void load8_blocks(const std::uint8_t* row, int k, float (&w)[8]) {
  using Q = QuantRow<D>;
  const auto block = static_cast<unsigned>(k) / Q::kElements;
  QuantRow<D>::load8(row + block * Q::kBytes, static_cast<int>(static_cast<unsigned>(k) % Q::kElements), w);
}

// Calls f.template operator()<D>() for the block type `dtype` (one of the ten); returns false for
// any other dtype.
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
    default: return false;
  }
}

}  // namespace switchyard::cuda
