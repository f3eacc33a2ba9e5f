#pragma once
// Internal to the quantised kernels: quant_block_unpack.h's weights with AVX2, for the AVX2 and
// AVX-512 translation units (each includes it and gets its own copy). A 32-weight block unpacks
// into one register; a 256-weight super-block into 256 bytes of L1 (unsigned for the K types,
// signed for the IQ types), which every token of a call then reads. Values and order are exactly
// unpack_scalar's.
#include <immintrin.h>

#include "operators/cpu/kernels/quant_block_unpack.h"

namespace switchyard::cpu::detail {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store256(void* p, __m256i v) { _mm256_store_si256(static_cast<__m256i*>(p), v); }
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

// 16 signed bytes repeated in both 128-bit lanes, for vpshufb lookups.
inline __m256i table16(const std::int8_t (&values)[16]) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
}

inline __m256i unpack32(const BlockQ4_0& b) { return nibbles32(b.qs); }
inline __m256i unpack32(const BlockQ4_1& b) { return nibbles32(b.qs); }
inline __m256i unpack32(const BlockQ5_0& b) { return _mm256_or_si256(nibbles32(b.qs), fifth_bits32(high_bits(b.qh))); }
inline __m256i unpack32(const BlockQ5_1& b) { return _mm256_or_si256(nibbles32(b.qs), fifth_bits32(high_bits(b.qh))); }
// The signed types' values as signed bytes (the callers apply their own offset): Q8_0's quants,
// IQ4_NL's and MXFP4's codebook values.
inline __m256i unpack32(const BlockQ8_0& b) { return load256(b.qs); }
inline __m256i unpack32(const BlockIQ4_NL& b) { return _mm256_shuffle_epi8(table16(quant::kIq4Values), nibbles32(b.qs)); }
inline __m256i unpack32(const BlockMXFP4& b) { return _mm256_shuffle_epi8(table16(quant::kMxfp4Values), nibbles32(b.qs)); }

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

// ---- The 256-weight IQ types: signed values (quant_block_unpack.h), also for the AVX-512 unit ----

// Bit 7 set in byte n (n < 16) where n has an odd number of set bits, in both 128-bit lanes.
inline __m256i odd_parity_bit7() {
  const char o = static_cast<char>(0x80);
  return _mm256_setr_epi8(0, o, o, 0, o, 0, 0, o, o, 0, 0, o, 0, o, o, 0, 0, o, o, 0, o, 0, 0, o, o, 0, 0, o, 0, o, o, 0);
}
// quant::iq2_signs of 32 seven-bit sign indices, a byte each (bit 7 clear): bit 7 becomes the
// parity of bits 0-6, so that every pattern negates an even number of weights.
inline __m256i iq2_signs32(__m256i indices) {
  const __m256i low = _mm256_set1_epi8(0xF), parity = odd_parity_bit7();
  const __m256i high_nibbles = _mm256_and_si256(_mm256_srli_epi16(indices, 4), low);
  return _mm256_or_si256(indices, _mm256_xor_si256(_mm256_shuffle_epi8(parity, _mm256_and_si256(indices, low)),
                                                    _mm256_shuffle_epi8(parity, high_nibbles)));
}
// The four seven-bit fields of each 32-bit word (bits 7 l .. 7 l + 6, l < 4) as its four bytes.
inline __m256i seven_bit_fields(__m256i words) {
  const __m256i f0 = _mm256_and_si256(words, _mm256_set1_epi32(0x7F));
  const __m256i f1 = _mm256_and_si256(_mm256_slli_epi32(words, 1), _mm256_set1_epi32(0x7F00));
  const __m256i f2 = _mm256_and_si256(_mm256_slli_epi32(words, 2), _mm256_set1_epi32(0x7F0000));
  const __m256i f3 = _mm256_and_si256(_mm256_slli_epi32(words, 3), _mm256_set1_epi32(0x7F000000));
  return _mm256_or_si256(_mm256_or_si256(f0, f1), _mm256_or_si256(f2, f3));
}
// 2 s + 1 for the scale s in bits 28-31 of each of eight sub-block words, as 16 int16 lanes (each
// sub-block's twice: its two 16-weight groups). (w >> 27) | 1 is 2 s + 1 whatever bit 27 holds.
inline __m256i odd_scales_of_words(__m256i words) {
  const __m256i scale = _mm256_or_si256(_mm256_srli_epi32(words, 27), _mm256_set1_epi32(1));
  return _mm256_or_si256(scale, _mm256_slli_epi32(scale, 16));
}
// 2 n + 1 for the 16 nibbles of `bytes` (nibble h % 2, low first, of byte h / 2), as int16 lanes.
inline __m256i odd_scales_of_nibbles(std::uint64_t bytes) {
  const __m128i b = _mm_cvtsi64_si128(static_cast<long long>(bytes)), low = _mm_set1_epi8(0xF);
  const __m128i nibbles = _mm_unpacklo_epi8(_mm_and_si128(b, low), _mm_and_si128(_mm_srli_epi16(b, 4), low));
  return _mm256_or_si256(_mm256_slli_epi16(_mm256_cvtepu8_epi16(nibbles), 1), _mm256_set1_epi16(1));
}
inline std::uint64_t load_u64(const void* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
// The eight int16 lanes of `scales` (one per 32 weights) each twice, as 16 lanes.
inline __m256i twice(__m128i scales) {
  return _mm256_set_m128i(_mm_unpackhi_epi16(scales, scales), _mm_unpacklo_epi16(scales, scales));
}

// IQ2_XXS's 64 bytes of qs as the eight sub-blocks' grid-index words (32 index bytes, group g's at
// byte g) and their sign-and-scale words.
inline void iq2_xxs_words(const BlockIQ2_XXS& b, __m256i& indices, __m256i& words) {
  const __m256i odd_first = _mm256_setr_epi32(1, 3, 5, 7, 0, 2, 4, 6);
  const __m256i first = _mm256_permutevar8x32_epi32(load256(b.qs), odd_first);  // w0..w3 | a0..a3
  const __m256i second = _mm256_permutevar8x32_epi32(load256(b.qs + 16), odd_first);
  words = _mm256_permute2x128_si256(first, second, 0x20);
  indices = _mm256_permute2x128_si256(first, second, 0x31);
}
// IQ2_XS's 32 sign indices (bits 9-15 of each qs word) as bytes, group order.
inline __m256i iq2_xs_sign_indices(const BlockIQ2_XS& b) {
  const __m256i packed = _mm256_packus_epi16(_mm256_srli_epi16(load256(b.qs), 9), _mm256_srli_epi16(load256(b.qs + 16), 9));
  return _mm256_permute4x64_epi64(packed, 0xD8);  // packus interleaves the 128-bit lanes
}

// The 32 sign bytes of each type (byte g: the signs of group g's eight weights, bit j weight j).
inline __m256i sign_bytes(const BlockIQ2_XXS& b) {
  __m256i indices, words;
  iq2_xxs_words(b, indices, words);
  return iq2_signs32(seven_bit_fields(words));
}
inline __m256i sign_bytes(const BlockIQ2_XS& b) { return iq2_signs32(iq2_xs_sign_indices(b)); }
inline __m256i sign_bytes(const BlockIQ2_S& b) { return load256(b.qs + 32); }
inline __m256i sign_bytes(const BlockIQ3_XXS& b) { return iq2_signs32(seven_bit_fields(load256(b.qs + 64))); }
inline __m256i sign_bytes(const BlockIQ3_S& b) { return load256(b.signs); }

// 0xFF in byte k of 32 where bit k % 8 of byte k / 8 of `signs` is set.
inline __m256i sign_mask32(std::uint32_t signs) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(signs)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}
// 32 magnitudes negated where `mask` is 0xFF: (m ^ mask) - mask.
inline __m256i with_signs(__m256i magnitudes, __m256i mask) {
  return _mm256_sub_epi8(_mm256_xor_si256(magnitudes, mask), mask);
}
// Group g's grid point: its eight magnitudes (IQ2, IQ3) or -1/0/1 values (IQ1), a byte each. The
// indices are read from the block as scalars: a point costs two loads and no vector work.
[[gnu::always_inline]] inline std::uint64_t grid_point(const BlockIQ2_XXS& b, int g) {
  return quant::kIq2xxsGrid[reinterpret_cast<const std::uint8_t*>(b.qs)[8 * (g / 4) + g % 4]];
}
[[gnu::always_inline]] inline std::uint64_t grid_point(const BlockIQ2_XS& b, int g) { return quant::kIq2xsGrid[b.qs[g] & 511]; }
[[gnu::always_inline]] inline std::uint64_t grid_point(const BlockIQ2_S& b, int g) {
  return quant::kIq2sGrid[b.qs[g] | ((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8];
}
[[gnu::always_inline]] inline std::uint64_t grid_point(const BlockIQ3_XXS& b, int g) { return point_pair(quant::kIq3xxsGrid, b.qs[2 * g], b.qs[2 * g + 1]); }
[[gnu::always_inline]] inline std::uint64_t grid_point(const BlockIQ3_S& b, int g) {
  const int high = b.qh[g / 4] >> (2 * (g % 4));  // bit k % 8 of qh[k / 8] for points k = 2 g, 2 g + 1
  return point_pair(quant::kIq3sGrid, b.qs[2 * g] | (high & 1) << 8, b.qs[2 * g + 1] | (high & 2) << 7);
}
[[gnu::always_inline]] inline std::uint64_t grid_point(const BlockIQ1_S& b, int g) {
  return quant::kIq1sGrid[b.qs[g] | ((b.qh[g / 4] >> (3 * (g % 4))) & 7) << 8];
}
[[gnu::always_inline]] inline std::uint64_t grid_point(const BlockIQ1_M& b, int g) {
  return quant::kIq1sGrid[b.qs[g] | ((b.qh[g / 2] >> (4 * (g % 2))) & 7) << 8];
}
// Groups first .. first + 3's points as 32 bytes.
template <class Block>
[[gnu::always_inline]] inline __m256i points4(const Block& b, int first) {
  return _mm256_set_epi64x(static_cast<long long>(grid_point(b, first + 3)), static_cast<long long>(grid_point(b, first + 2)),
                           static_cast<long long>(grid_point(b, first + 1)), static_cast<long long>(grid_point(b, first)));
}

// An IQ2/IQ3 type's 256 weights: its grid points with sign_bytes applied.
template <class Block>
void unpack_simd(const Block& b, std::int8_t* v) {
  alignas(32) std::uint8_t signs[32];
  store256(signs, sign_bytes(b));
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) store256(v + 32 * s, with_signs(points4(b, 4 * s), sign_mask32(load_word(signs + 4 * s))));
}
// IQ1: 8 point + delta from four grid points of -1/0/1 bytes (shifted in 16-bit lanes, the bits
// that cross into the next byte masked off) and the deltas (1 or -1 a byte).
inline __m256i iq1_values32(__m256i points, __m256i delta) {
  const __m256i eight = _mm256_and_si256(_mm256_slli_epi16(points, 3), _mm256_set1_epi8(static_cast<char>(0xF8)));
  return _mm256_add_epi8(eight, delta);
}
inline void unpack_simd(const BlockIQ1_S& b, std::int8_t* v) {
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s)
    store256(v + 32 * s, iq1_values32(points4(b, 4 * s), _mm256_set1_epi8(b.qh[s] & 0x8000u ? -1 : 1)));
}
inline void unpack_simd(const BlockIQ1_M& b, std::int8_t* v) {
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    const unsigned n = b.qh[2 * s] | unsigned{b.qh[2 * s + 1]} << 8;  // group 4 s + l's nibble at bits 4 l
    auto delta = [&](int l) { return static_cast<long long>((n >> (4 * l + 3)) & 1u ? ~0ull : 0x0101010101010101ull); };
    store256(v + 32 * s, iq1_values32(points4(b, 4 * s), _mm256_set_epi64x(delta(3), delta(2), delta(1), delta(0))));
  }
}
inline void unpack_simd(const BlockIQ4_XS& b, std::int8_t* v) {
  const __m256i table = table16(quant::kIq4Values);
  for (int s = 0; s < 8; ++s) store256(v + 32 * s, _mm256_shuffle_epi8(table, nibbles32(b.qs + 16 * s)));
}

// The signed types' scales as scales_of gives them: b and min unused (zero).
inline ScalesKVector signed_scales(float a, __m256i scale) { return {a, 0.0f, scale, _mm256_setzero_si256()}; }
inline ScalesKVector scales_vector(const BlockIQ2_XXS& b) {
  __m256i indices, words;
  iq2_xxs_words(b, indices, words);
  return signed_scales(half_to_float(b.d) * 0.125f, odd_scales_of_words(words));
}
inline ScalesKVector scales_vector(const BlockIQ2_XS& b) {
  return signed_scales(half_to_float(b.d) * 0.125f, odd_scales_of_nibbles(load_u64(b.scales)));
}
inline ScalesKVector scales_vector(const BlockIQ2_S& b) {
  return signed_scales(half_to_float(b.d) * 0.125f, odd_scales_of_nibbles(load_u64(b.scales)));
}
inline ScalesKVector scales_vector(const BlockIQ3_XXS& b) {
  return signed_scales(half_to_float(b.d) * 0.25f, odd_scales_of_words(load256(b.qs + 64)));
}
inline ScalesKVector scales_vector(const BlockIQ3_S& b) {
  // Eight nibbles, one a sub-block: each twice, as odd_scales_of_nibbles spreads 16.
  const std::uint64_t nibbles = load_word(b.scales);
  std::uint64_t doubled = 0;
  for (int s = 0; s < 8; ++s) doubled |= ((nibbles >> (4 * s)) & 0xF) * 0x11u << (8 * s);
  return signed_scales(half_to_float(b.d), odd_scales_of_nibbles(doubled));
}
inline ScalesKVector scales_vector(const BlockIQ1_S& b) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
  const __m128i scale = _mm_and_si128(_mm_srli_epi16(h, 12), _mm_set1_epi16(7));
  return signed_scales(half_to_float(b.d) * 0.125f, twice(_mm_or_si128(_mm_slli_epi16(scale, 1), _mm_set1_epi16(1))));
}
inline ScalesKVector scales_vector(const BlockIQ1_M& b) {
  // Lane h: bits 3 (h % 4) .. 3 (h % 4) + 2 of word h / 4, moved to the top by a multiply and back
  // down by a logical shift (AVX2 has no per-lane 16-bit shift).
  const __m256i words = _mm256_cvtepu16_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales)));
  const __m256i spread = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(words, 0), 0);  // word h / 4 in lane h
  const __m256i up = _mm256_mullo_epi16(spread, _mm256_set1_epi64x(0x0010008004002000));  // << 13, 10, 7, 4
  const __m256i scale = _mm256_srli_epi16(up, 13);
  std::uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  const auto d_bits = static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                                 (sc[3] & 0xF000));
  return signed_scales(half_to_float(d_bits) * 0.125f, _mm256_or_si256(_mm256_slli_epi16(scale, 1), _mm256_set1_epi16(1)));
}
inline ScalesKVector scales_vector(const BlockIQ4_XS& b) {
  // Sub-block s: the low nibble of lane s from scales_l, bits 4-5 from bits 2 s of scales_h (moved
  // to the top of the lane by a multiply, then down), minus 32.
  const __m128i low4 = _mm_set1_epi8(0xF), l = _mm_cvtsi32_si128(static_cast<int>(load_word(b.scales_l)));
  const __m128i low = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(l, low4), _mm_and_si128(_mm_srli_epi16(l, 4), low4)));
  const __m128i up = _mm_mullo_epi16(_mm_set1_epi16(static_cast<short>(b.scales_h)),
                                     _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1));
  const __m128i scale = _mm_sub_epi16(_mm_or_si128(low, _mm_slli_epi16(_mm_srli_epi16(up, 14), 4)), _mm_set1_epi16(32));
  return signed_scales(half_to_float(b.d), twice(scale));
}

// `count` rows of `in` weights to f32 (out [count, in]), as dequantize_rows_scalar computes them
// (up to the fused multiply-add's single rounding).
template <class Block>
void dequantize_blocks_avx2(const Block* blocks, std::int64_t count, float* out) {
  for (std::int64_t i = 0; i < count; ++i, out += kElements<Block>) {
    const auto s = scales_of(blocks[i]);
    alignas(32) Unpacked<Block> u[kElements<Block>];
    if constexpr (kSignedK<Block>) {
      unpack_simd(blocks[i], u);
      for (int g = 0; g < 16; ++g) {
        const __m256 scale = _mm256_set1_ps(s.a * static_cast<float>(s.scale[g]));
        const __m128i bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(u + 16 * g));
        _mm256_storeu_ps(out + 16 * g, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes))));
        _mm256_storeu_ps(out + 16 * g + 8,
                         _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)))));
      }
    } else if constexpr (kIsK<Block>) {
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
      if constexpr (kSigned32<Block>) v = _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));  // v + 128
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
