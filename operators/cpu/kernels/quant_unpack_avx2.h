#pragma once
// Internal to the quantised kernels: quant_block_unpack.h's unsigned weights with AVX2, for the
// AVX2 and AVX-512 translation units (each includes it and gets its own copy). A 32-weight block
// unpacks into one register; a K super-block into 256 bytes of L1, which every token of a call then
// reads. Values and order are exactly unpack_scalar's.
#include <immintrin.h>

#include "operators/cpu/kernels/quant_block_unpack.h"

namespace switchyard::cpu::detail {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store256(std::uint8_t* p, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
inline __m256i shift_right_16(__m256i v, int bits) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(bits)); }
// 0xFF in each byte of v that has bit `bit` set, else 0.
inline __m256i bit_set(__m256i v, int bit) {
  const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << bit));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, mask), mask);
}

// Weights j and j + 16 of a 32-weight block from the nibbles of qs[j].
inline __m256i nibbles32(const std::uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), low = _mm_set1_epi8(0xF);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low), _mm_and_si128(bytes, low));
}
// 16 in byte j where bit j of qh is set.
inline __m256i fifth_bits32(std::uint32_t qh) {
  const __m256i spread = _mm256_shuffle_epi8(  // byte j <- byte j / 8 of qh (each lane holds all four)
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);  // byte j: bit j % 8
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}

inline __m256i unpack32(const BlockQ4_0& b) { return nibbles32(b.qs); }
inline __m256i unpack32(const BlockQ4_1& b) { return nibbles32(b.qs); }
inline __m256i unpack32(const BlockQ5_0& b) { return _mm256_or_si256(nibbles32(b.qs), fifth_bits32(high_bits(b.qh))); }
inline __m256i unpack32(const BlockQ5_1& b) { return _mm256_or_si256(nibbles32(b.qs), fifth_bits32(high_bits(b.qh))); }
// Q8_0's signed bytes as they are (the callers apply their own offset).
inline __m256i unpack32(const BlockQ8_0& b) { return load256(b.qs); }

inline void unpack_simd(const BlockQ2_K& b, std::uint8_t* u) {
  for (int n = 0; n < 2; ++n) {
    const __m256i q = load256(b.qs + 32 * n);
    for (int s = 0; s < 4; ++s) store256(u + 128 * n + 32 * s, _mm256_and_si256(shift_right_16(q, 2 * s), _mm256_set1_epi8(3)));
  }
}
inline void unpack_simd(const BlockQ3_K& b, std::uint8_t* u) {
  const __m256i h = load256(b.hmask);
  for (int n = 0; n < 2; ++n) {
    const __m256i q = load256(b.qs + 32 * n);
    for (int s = 0; s < 4; ++s) {
      const __m256i low = _mm256_and_si256(shift_right_16(q, 2 * s), _mm256_set1_epi8(3));
      const __m256i high = _mm256_and_si256(bit_set(h, 4 * n + s), _mm256_set1_epi8(4));
      store256(u + 128 * n + 32 * s, _mm256_or_si256(low, high));
    }
  }
}
inline void unpack_simd(const BlockQ4_K& b, std::uint8_t* u) {
  const __m256i low = _mm256_set1_epi8(0xF);
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load256(b.qs + 32 * c);
    store256(u + 64 * c, _mm256_and_si256(q, low));
    store256(u + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), low));
  }
}
inline void unpack_simd(const BlockQ5_K& b, std::uint8_t* u) {
  const __m256i low = _mm256_set1_epi8(0xF), sixteen = _mm256_set1_epi8(16);
  const __m256i h = load256(b.qh);
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load256(b.qs + 32 * c);
    store256(u + 64 * c, _mm256_or_si256(_mm256_and_si256(q, low), _mm256_and_si256(bit_set(h, 2 * c), sixteen)));
    store256(u + 64 * c + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low),
                                              _mm256_and_si256(bit_set(h, 2 * c + 1), sixteen)));
  }
}
inline void unpack_simd(const BlockQ6_K& b, std::uint8_t* u) {
  const __m256i low = _mm256_set1_epi8(0xF);
  for (int n = 0; n < 2; ++n) {
    const __m256i a = load256(b.ql + 64 * n), c = load256(b.ql + 64 * n + 32), h = load256(b.qh + 32 * n);
    // Two high bits at bits 4-5 of each byte: shifts of masked bytes never cross into a neighbour.
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(0x03)), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(0x0C)), 2);
    const __m256i h2 = _mm256_and_si256(h, _mm256_set1_epi8(0x30));
    const __m256i h3 = _mm256_srli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(static_cast<char>(0xC0))), 2);
    std::uint8_t* out = u + 128 * n;
    store256(out, _mm256_or_si256(_mm256_and_si256(a, low), h0));
    store256(out + 32, _mm256_or_si256(_mm256_and_si256(c, low), h1));
    store256(out + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low), h2));
    store256(out + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), low), h3));
  }
}

// A K super-block's scales in registers, as scales_of gives them (16 int16 lanes each): built from
// 32-bit words, since 16 scalar stores read back as one vector would miss store forwarding.
struct ScalesKVector {
  float a, b;
  __m256i scale, min;
};

inline std::uint32_t word_at(const std::uint8_t* p) {
  std::uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}
// Bytes 0-7 and 8-15 of a 16-byte vector from four little-endian words.
inline __m128i words4(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2, std::uint32_t w3) {
  return _mm_setr_epi32(static_cast<int>(w0), static_cast<int>(w1), static_cast<int>(w2), static_cast<int>(w3));
}

template <class Block>
ScalesKVector scales_k4_vector(const Block& b) {
  // scale_min_k4 for all eight sub-blocks at once, four bytes a word.
  const std::uint32_t w0 = word_at(b.scales), w1 = word_at(b.scales + 4), w2 = word_at(b.scales + 8);
  const std::uint32_t scales_low = w0 & 0x3f3f3f3fu, mins_low = w1 & 0x3f3f3f3fu;
  const std::uint32_t scales_high = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
  const std::uint32_t mins_high = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
  const __m128i bytes = words4(scales_low, scales_high, mins_low, mins_high);  // 8 scales, 8 minimums
  // Each sub-block's value twice (two 16-weight groups), widened to int16.
  const __m256i scale = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(bytes, bytes));
  const __m256i min = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(bytes, bytes));
  return {half_to_float(b.d), half_to_float(b.dmin), scale, min};
}
inline ScalesKVector scales_vector(const BlockQ4_K& b) { return scales_k4_vector(b); }
inline ScalesKVector scales_vector(const BlockQ5_K& b) { return scales_k4_vector(b); }
inline ScalesKVector scales_vector(const BlockQ2_K& b) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), low = _mm_set1_epi8(0xF);
  return {half_to_float(b.d), half_to_float(b.dmin), _mm256_cvtepu8_epi16(_mm_and_si128(bytes, low)),
          _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(bytes, 4), low))};
}
inline ScalesKVector scales_vector(const BlockQ3_K& b) {
  // scales_of's unpacking, four scales a word.
  const std::uint32_t w0 = word_at(b.scales), w1 = word_at(b.scales + 4), w2 = word_at(b.scales + 8);
  const std::uint32_t low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
  const __m128i bytes = words4((w0 & low4) | ((w2 & low2) << 4), (w1 & low4) | (((w2 >> 2) & low2) << 4),
                               ((w0 >> 4) & low4) | (((w2 >> 4) & low2) << 4), ((w1 >> 4) & low4) | (((w2 >> 6) & low2) << 4));
  const __m256i scale = _mm256_sub_epi16(_mm256_cvtepu8_epi16(bytes), _mm256_set1_epi16(32));
  const float d = half_to_float(b.d);
  return {d, d, scale, _mm256_slli_epi16(scale, 2)};
}
inline ScalesKVector scales_vector(const BlockQ6_K& b) {
  const __m256i scale = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const float d = half_to_float(b.d);
  return {d, d, scale, _mm256_slli_epi16(scale, 5)};
}

// `count` rows of `in` weights to f32 (out [count, in]), as dequantize_rows_scalar computes them
// (up to the fused multiply-add's single rounding).
template <class Block>
void dequantize_blocks_avx2(const Block* blocks, std::int64_t count, float* out) {
  for (std::int64_t i = 0; i < count; ++i, out += kElements<Block>) {
    const auto s = scales_of(blocks[i]);
    alignas(32) std::uint8_t u[kElements<Block>];
    if constexpr (kIsK<Block>) {
      unpack_simd(blocks[i], u);
      for (int g = 0; g < 16; ++g) {
        const __m256 scale = _mm256_set1_ps(s.a * static_cast<float>(s.scale[g]));
        const __m256 min = _mm256_set1_ps(s.b * static_cast<float>(s.min[g]));
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 16 * g));
        const __m256 v0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        const __m256 v1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
        _mm256_storeu_ps(out + 16 * g, _mm256_fmsub_ps(scale, v0, min));
        _mm256_storeu_ps(out + 16 * g + 8, _mm256_fmsub_ps(scale, v1, min));
      }
    } else {
      __m256i v = unpack32(blocks[i]);
      if constexpr (std::is_same_v<Block, BlockQ8_0>) v = _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
      store256(u, v);
      const __m256 d = _mm256_set1_ps(s.d), m = _mm256_set1_ps(s.m);
      const __m256i offset = _mm256_set1_epi32(s.offset);
      for (int k = 0; k < quant::kBlock; k += 8) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + k));
        const __m256 w = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), offset));
        _mm256_storeu_ps(out + k, _mm256_fmadd_ps(d, w, m));
      }
    }
  }
}

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace switchyard::cpu::detail
