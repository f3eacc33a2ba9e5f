// The quantised kernels with AVX-512 VNNI (compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni and AVX2's flags; called only after has_avx512_vnni()). 256-weight types: 64 weight
// bytes a step, vpmaddubsw pairs then vpdpwssd by the scales into 16 int32 lanes (the IQ types'
// signed weights as |w| times x negated under a mask). 32-weight types: two blocks a step,
// vpdpbusd (unsigned weight bytes times signed activation bytes, four products a lane, no
// saturation).
// GCC 12 warns inside its own AVX-512 headers: _mm512_undefined_* initialise a variable from itself.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "operators/cpu/kernels/kernel_options.h"
#include "operators/cpu/kernels/quant_dot.h"
#include "operators/cpu/kernels/quant_unpack_avx2.h"

namespace switchyard::cpu::detail {
namespace {

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// [a in lanes 0-7 | b in lanes 8-15] (insertf64x4: AVX512F has no 32-bit-lane insert of 8).
inline __m512 halves(float a, float b) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_set1_ps(a))),
                                             _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

// Two consecutive 32-weight blocks' weights in one register, block b's in the lower 256 bits and
// b + 1's in the upper, as unpack32 gives each. The nibble types broadcast each block's 16 bytes
// to two 128-bit lanes and shift the second by four (weights j and j + 16 share qs[j]); the fifth
// bits of Q5_0/Q5_1 become a 64-bit mask that adds 16.
inline __m512i nibbles_pair(const std::uint8_t* qs0, const std::uint8_t* qs1) {
  const __m512i a = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0)));
  const __m512i b = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)));
  const __m512i both = _mm512_mask_blend_epi64(0xF0, a, b);  // [qs0, qs0 | qs1, qs1]
  constexpr __mmask32 kSecondLanes = 0xFF00FF00u;            // the 16-bit lanes of 128-bit lanes 1 and 3
  return _mm512_and_si512(_mm512_mask_srli_epi16(both, kSecondLanes, both, 4), _mm512_set1_epi8(0xF));
}
template <class Block>
__m512i fifth_bits_pair(const Block* b, __m512i u) {
  const auto bits = static_cast<__mmask64>(high_bits(b[0].qh) | std::uint64_t{high_bits(b[1].qh)} << 32);
  return _mm512_mask_add_epi8(u, bits, u, _mm512_set1_epi8(16));
}
inline __m512i unpack_pair(const BlockQ4_0* b) { return nibbles_pair(b[0].qs, b[1].qs); }
inline __m512i unpack_pair(const BlockQ4_1* b) { return nibbles_pair(b[0].qs, b[1].qs); }
inline __m512i unpack_pair(const BlockQ5_0* b) { return fifth_bits_pair(b, nibbles_pair(b[0].qs, b[1].qs)); }
inline __m512i unpack_pair(const BlockQ5_1* b) { return fifth_bits_pair(b, nibbles_pair(b[0].qs, b[1].qs)); }
inline __m512i unpack_pair(const BlockQ8_0* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(b[0].qs)), load256(b[1].qs), 1);
}
inline __m512i unpack_pair(const BlockIQ4_NL* b) {
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm256_castsi256_si128(table16(quant::kIq4Values))),
                             nibbles_pair(b[0].qs, b[1].qs));
}
inline __m512i unpack_pair(const BlockMXFP4* b) {
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm256_castsi256_si128(table16(quant::kMxfp4Values))),
                             nibbles_pair(b[0].qs, b[1].qs));
}

// Blocks b and b + 1's d (and m) as [d0, d1, m0, m1] (zeros for a missing block b + 1): the half
// floats in one conversion; MXFP4's exponents as their powers of two.
template <class Block>
__m128 pair_scales(const Block* row, std::int64_t b, bool pair) {
  if constexpr (std::is_same_v<Block, BlockMXFP4>) {
    return _mm_setr_ps(e8m0_half_scale(row[b].e), pair ? e8m0_half_scale(row[b + 1].e) : 0.0f, 0.0f, 0.0f);
  } else {
    std::uint64_t half_bits = row[b].d | (pair ? std::uint64_t{row[b + 1].d} << 16 : 0);
    if constexpr (kHasMin<Block>) half_bits |= std::uint64_t{row[b].m} << 32 | (pair ? std::uint64_t{row[b + 1].m} << 48 : 0);
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(half_bits)));
  }
}

// Rows [row_begin, row_end) for tokens [t0, t0 + Tokens) of a 32-weight type, two blocks a register
// (an odd last block alone, zeros above it), the tokens' sums in registers. The weights' offset
// and minimum go with the token's block sum as a float term, (m - offset d) * d_x * sum(q); the
// signed weights (kSigned32) instead multiply as |w| times x with w's sign.
template <class Block, int Tokens>
void rows32(const LinearProblem& p, std::int64_t row_begin, std::int64_t row_end, std::int64_t t0, int prefetch) {
  const auto* weight = static_cast<const Block*>(p.weight);
  const std::int64_t blocks = p.in / quant::kBlock;
  const ActivationBlock32* xs[Tokens];
  for (int t = 0; t < Tokens; ++t)
    xs[t] = reinterpret_cast<const ActivationBlock32*>(p.x_quantized + (t0 + t) * p.x_quantized_stride);
  constexpr bool q8 = kSigned32<Block>;
  constexpr int offset = q8 ? 0 : kOffset<Block>;
  constexpr bool block_sums = offset != 0 || kHasMin<Block>;
  const __m512i first_or_second = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const Block* row = weight + r * blocks;
    __m512 acc[Tokens];
    float extra[Tokens];  // the sum-of-x terms
#pragma GCC unroll 8
    for (int t = 0; t < Tokens; ++t) {
      acc[t] = _mm512_setzero_ps();
      extra[t] = 0.0f;
    }
    for (std::int64_t b = 0; b < blocks; b += 2) {
      const bool pair = b + 1 < blocks;
      if (prefetch > 0) {  // a pair is 36 to 68 bytes: one line, or two
        const char* ahead = reinterpret_cast<const char*>(row + b) + prefetch;
        _mm_prefetch(ahead, _MM_HINT_T0);
        if constexpr (2 * sizeof(Block) > 64) _mm_prefetch(ahead + 64, _MM_HINT_T0);
      }
      const __m128 scales = pair_scales(row, b, pair);
      const float d0 = _mm_cvtss_f32(scales), d1 = _mm_cvtss_f32(_mm_movehdup_ps(scales));
      float c0 = -offset * d0, c1 = -offset * d1;
      if constexpr (kHasMin<Block>) {
        const __m128 m = _mm_movehl_ps(scales, scales);
        c0 += _mm_cvtss_f32(m);
        c1 += _mm_cvtss_f32(_mm_movehdup_ps(m));
      }
      __m512i u = pair ? unpack_pair(row + b) : _mm512_zextsi256_si512(unpack32(row[b]));
      __mmask64 negative = 0;
      if constexpr (q8) {
        negative = _mm512_movepi8_mask(u);
        u = _mm512_abs_epi8(u);  // -128 -> 0x80, read as 128
      }
      const __m512 dw = _mm512_permutexvar_ps(first_or_second, _mm512_castps128_ps512(scales));  // [d0 x 8 | d1 x 8]
#pragma GCC unroll 8
      for (int t = 0; t < Tokens; ++t) {
        const ActivationBlock32& x0 = xs[t][b];
        __m512i q = _mm512_zextsi256_si512(load256(x0.qs));
        float d_x1 = 0.0f, d_sum1 = 0.0f;
        if (pair) {
          const ActivationBlock32& x1 = xs[t][b + 1];
          q = _mm512_inserti64x4(q, load256(x1.qs), 1);
          d_x1 = x1.d;
          d_sum1 = x1.d_sum;
        }
        if constexpr (q8) q = _mm512_mask_sub_epi8(q, negative, _mm512_setzero_si512(), q);
        const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, q);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, halves(x0.d, d_x1)), acc[t]);
        if constexpr (block_sums) extra[t] += c0 * x0.d_sum + c1 * d_sum1;
      }
    }
    for (int t = 0; t < Tokens; ++t) p.y[(t0 + t) * p.out + r] = _mm512_reduce_add_ps(acc[t]) + extra[t];
  }
}

// The 32-weight types, eight tokens at a time (the rows of the block stay in L2 between groups).
template <class Block>
void rows32_all(const LinearProblem& p, const LinearBlock& block) {
  const int prefetch = kernel_options().prefetch_bytes;
  for (std::int64_t t = block.token_begin; t < block.token_end; t += 8) {
    const std::int64_t r0 = block.row_begin, r1 = block.row_end;
    switch (block.token_end - t) {
      case 1: rows32<Block, 1>(p, r0, r1, t, prefetch); break;
      case 2: rows32<Block, 2>(p, r0, r1, t, prefetch); break;
      case 3: rows32<Block, 3>(p, r0, r1, t, prefetch); break;
      case 4: rows32<Block, 4>(p, r0, r1, t, prefetch); break;
      case 5: rows32<Block, 5>(p, r0, r1, t, prefetch); break;
      case 6: rows32<Block, 6>(p, r0, r1, t, prefetch); break;
      case 7: rows32<Block, 7>(p, r0, r1, t, prefetch); break;
      default: rows32<Block, 8>(p, r0, r1, t, prefetch); break;
    }
  }
}

// A K super-block's 256 unsigned weights as four registers, u[c] = weights 64c .. 64c + 63 in
// order (the layout of BlockQ8_K's qs, so that chunk c meets x's bytes 64c .. 64c + 63).
// Q4_K, Q5_K and Q6_K unpack in registers: each 32 bytes of nibbles are broadcast to both halves
// of a register and the upper half shifted by four, so a chunk costs a load and two or three
// operations. Q2_K and Q3_K go through 256 bytes of L1 (unpack_simd), read back by halves (a
// 64-byte load of two 32-byte stores would miss store forwarding).
constexpr __mmask32 kUpperWords = 0xFFFF0000u;  // the 16-bit lanes of a register's upper 256 bits

inline __m512i broadcast256(const std::uint8_t* p) { return _mm512_broadcast_i64x4(load256(p)); }
// Bytes `low` in the lower 256 bits, `high` in the upper.
inline __m512i halves_epi8(char low, char high) {
  return _mm512_inserti64x4(_mm512_set1_epi8(low), _mm256_set1_epi8(high), 1);
}

// Q4_K: qs[32c + l] holds weight 64c + l (low nibble) and 64c + 32 + l (high nibble).
inline void unpack_chunks(const BlockQ4_K& b, __m512i u[4]) {
  const __m512i low = _mm512_set1_epi8(0xF);
  for (int c = 0; c < 4; ++c) {
    const __m512i q = broadcast256(b.qs + 32 * c);
    u[c] = _mm512_and_si512(_mm512_mask_srli_epi16(q, kUpperWords, q, 4), low);
  }
}
// Q5_K: Q4_K's nibbles plus 16 where bit s of qh[l] is set, for weight 32s + l (s = 2c, 2c + 1).
inline void unpack_chunks(const BlockQ5_K& b, __m512i u[4]) {
  const __m512i low = _mm512_set1_epi8(0xF), sixteen = _mm512_set1_epi8(16);
  const __m512i h = broadcast256(b.qh);
  for (int c = 0; c < 4; ++c) {
    const __m512i q = broadcast256(b.qs + 32 * c);
    const __m512i nibbles = _mm512_and_si512(_mm512_mask_srli_epi16(q, kUpperWords, q, 4), low);
    const __mmask64 fifth = _mm512_test_epi8_mask(h, halves_epi8(static_cast<char>(1 << (2 * c)), static_cast<char>(1 << (2 * c + 1))));
    u[c] = _mm512_mask_add_epi8(nibbles, fifth, nibbles, sixteen);
  }
}
// Q6_K: for each 128 weights (n), with ql = ql + 64n and qh = qh + 32n, weights 128n + l (l < 64)
// have the low nibbles of ql[l] and weights 128n + 64 + l the high ones; the two high bits of
// weight 128n + 32k + l are bits 2k, 2k + 1 of qh[l].
inline void unpack_chunks(const BlockQ6_K& b, __m512i u[4]) {
  const __m512i low = _mm512_set1_epi8(0xF);
  // Bits 4-5 of each byte from the masked qh bits (shifts of masked bytes never cross a byte).
  const __m512i first_mask = halves_epi8(0x03, 0x0C), second_mask = halves_epi8(0x30, static_cast<char>(0xC0));
  const __m512i first_shift = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);  // left
  const __m512i second_shift = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);  // right
  for (int n = 0; n < 2; ++n) {
    const __m512i l = load512(b.ql + 64 * n), h = broadcast256(b.qh + 32 * n);
    const __m512i high0 = _mm512_sllv_epi16(_mm512_and_si512(h, first_mask), first_shift);
    const __m512i high1 = _mm512_srlv_epi16(_mm512_and_si512(h, second_mask), second_shift);
    u[2 * n] = _mm512_ternarylogic_epi32(l, low, high0, 0xEA);                           // (l & low) | high0
    u[2 * n + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), low, high1, 0xEA);  // (l >> 4 & low) | high1
  }
}
template <class Block>
[[gnu::always_inline]] inline void unpack_chunks(const Block& b, __m512i u[4]) {
  alignas(64) std::uint8_t unpacked[quant::kSuperBlock];
  unpack_simd(b, unpacked);
  for (int c = 0; c < 4; ++c)
    u[c] = _mm512_inserti64x4(_mm512_castsi256_si512(load256(unpacked + 64 * c)), load256(unpacked + 64 * c + 32), 1);
}

// ---- The 256-weight IQ types: |v| in four registers and the masks of the negative weights ------
// u[c] and negative[c] cover weights 64c .. 64c + 63 (groups 8c .. 8c + 7); the grid points of a
// chunk come in one gather (eight 64-bit points, or sixteen 32-bit IQ3 points), the signs as the
// 64 bits of the chunk's eight sign bytes (sign_bytes). IQ1_M computes signed values and takes
// them apart with vpabsb and vpmovb2m, IQ1_S keeps its points' signs, IQ4_XS looks both up. (Intel's AVX-512 cores run the gathers
// faster than scalar loads of the points; AMD's Zen 4 prefers the scalar loads, as AVX2's points4
// does them.)

// The chunks' masks from the 32 sign bytes of a block.
inline void negative_masks(__m256i signs, __mmask64 negative[4]) {
  alignas(32) std::uint64_t words[4];
  store256(words, signs);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) negative[c] = _cvtu64_mask64(words[c]);
}
// Eight consecutive index bytes at p as 32-bit lanes.
inline __m256i indices8(const std::uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
// 8 point + delta for 64 IQ1 weights (points' bytes -1, 0 or 1), as unpack_chunks wants them.
[[gnu::always_inline]] inline void iq1_chunk(__m512i points, __m512i delta, __m512i& u, __mmask64& negative) {
  const __m512i eight = _mm512_and_si512(_mm512_slli_epi16(points, 3), _mm512_set1_epi8(static_cast<char>(0xF8)));
  const __m512i v = _mm512_add_epi8(eight, delta);
  u = _mm512_abs_epi8(v);
  negative = _mm512_movepi8_mask(v);
}

[[gnu::always_inline]] inline void unpack_chunks(const BlockIQ2_XXS& b, __m512i u[4], __mmask64 negative[4]) {
  __m256i indices, words;
  iq2_xxs_words(b, indices, words);
  negative_masks(iq2_signs32(seven_bit_fields(words)), negative);
  alignas(32) std::uint8_t index[32];
  store256(index, indices);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) u[c] = _mm512_i32gather_epi64(indices8(index + 8 * c), quant::kIq2xxsGrid, 8);
}
[[gnu::always_inline]] inline void unpack_chunks(const BlockIQ2_XS& b, __m512i u[4], __mmask64 negative[4]) {
  negative_masks(sign_bytes(b), negative);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256i q = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 8 * c)));
    u[c] = _mm512_i32gather_epi64(_mm256_and_si256(q, _mm256_set1_epi32(511)), quant::kIq2xsGrid, 8);
  }
}
[[gnu::always_inline]] inline void unpack_chunks(const BlockIQ2_S& b, __m512i u[4], __mmask64 negative[4]) {
  negative_masks(sign_bytes(b), negative);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    // Group 8c + i's bits 8-9: bits 2 i, 2 i + 1 of qh[2c] | qh[2c + 1] << 8.
    const int h = b.qh[2 * c] | b.qh[2 * c + 1] << 8;
    const __m256i high = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                          _mm256_set1_epi32(3));
    u[c] = _mm512_i32gather_epi64(_mm256_or_si256(indices8(b.qs + 8 * c), _mm256_slli_epi32(high, 8)), quant::kIq2sGrid, 8);
  }
}
[[gnu::always_inline]] inline void unpack_chunks(const BlockIQ3_XXS& b, __m512i u[4], __mmask64 negative[4]) {
  negative_masks(sign_bytes(b), negative);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c)
    u[c] = _mm512_i32gather_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * c))),
                                  quant::kIq3xxsGrid, 4);
}
[[gnu::always_inline]] inline void unpack_chunks(const BlockIQ3_S& b, __m512i u[4], __mmask64 negative[4]) {
  negative_masks(sign_bytes(b), negative);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    // Point 16c + i's bit 8: bit i of qh[2c] | qh[2c + 1] << 8.
    const auto high = static_cast<__mmask16>(b.qh[2 * c] | b.qh[2 * c + 1] << 8);
    const __m512i low = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * c)));
    u[c] = _mm512_i32gather_epi32(_mm512_mask_or_epi32(low, high, low, _mm512_set1_epi32(256)), quant::kIq3sGrid, 4);
  }
}
// IQ1_S: the points' -1/0/1 alone, as |p| and the mask of p < 0; w = d/8 (2s + 1) (8 p + delta)
// with one delta per 32 weights, so delta's part goes with x's sums of 16 (iq1_s_shifts) and the
// points' with the scales times 8 (rows_k).
[[gnu::always_inline]] inline void unpack_chunks(const BlockIQ1_S& b, __m512i u[4], __mmask64 negative[4]) {
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    // Group 8c + i's bits 8-10: bits 3 (i % 4) of qh[2c + i / 4].
    const std::uint32_t h = b.qh[2 * c] | std::uint32_t{b.qh[2 * c + 1]} << 16;
    const __m256i high = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(h)), _mm256_setr_epi32(0, 3, 6, 9, 16, 19, 22, 25)),
        _mm256_set1_epi32(7));
    const __m512i points =
        _mm512_i32gather_epi64(_mm256_or_si256(indices8(b.qs + 8 * c), _mm256_slli_epi32(high, 8)), quant::kIq1sGrid, 8);
    u[c] = _mm512_and_si512(points, _mm512_set1_epi8(1));
    negative[c] = _mm512_movepi8_mask(points);
  }
}
// delta (2s + 1) for the 16 groups, from the odd scales (scales_vector's): negated where bit 15
// of the sub-block's qh word is set.
inline __m256i iq1_s_shifts(const BlockIQ1_S& b, __m256i odd_scales) {
  const __m256i minus = twice(_mm_srai_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)), 15));
  return _mm256_sub_epi16(_mm256_xor_si256(odd_scales, minus), minus);
}
[[gnu::always_inline]] inline void unpack_chunks(const BlockIQ1_M& b, __m512i u[4], __mmask64 negative[4]) {
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    // Group 8c + i's nibble: nibble i of the word qh[4c .. 4c + 3]; bits 0-2 are its bits 8-10,
    // bit 3 makes its delta -1.
    const __m256i nibbles = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(load_word(b.qh + 4 * c))),
                                              _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i high = _mm256_and_si256(nibbles, _mm256_set1_epi32(7));
    const __m512i points =
        _mm512_i32gather_epi64(_mm256_or_si256(indices8(b.qs + 8 * c), _mm256_slli_epi32(high, 8)), quant::kIq1sGrid, 8);
    const __mmask8 minus = _mm256_test_epi32_mask(nibbles, _mm256_set1_epi32(8));
    iq1_chunk(points, _mm512_mask_blend_epi64(minus, _mm512_set1_epi8(1), _mm512_set1_epi8(-1)), u[c], negative[c]);
  }
}
// IQ4_XS: chunk c is sub-blocks 2c and 2c + 1, nibbles as two Q4_0 blocks; the codebook's first
// eight values are the negative ones.
constexpr std::int8_t kIq4Magnitudes[16] = {127, 104, 83, 65, 49, 35, 22, 10, 1, 13, 25, 38, 53, 69, 89, 113};
[[gnu::always_inline]] inline void unpack_chunks(const BlockIQ4_XS& b, __m512i u[4], __mmask64 negative[4]) {
  const __m512i magnitudes = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Magnitudes)));
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i nibbles = nibbles_pair(b.qs + 32 * c, b.qs + 32 * c + 16);
    u[c] = _mm512_shuffle_epi8(magnitudes, nibbles);
    negative[c] = _mm512_testn_epi8_mask(nibbles, _mm512_set1_epi8(8));
  }
}

// Rows [row_begin, row_end) for tokens [t0, t0 + Tokens) of a 256-weight type: each super-block
// unpacked once for the tokens into four registers (unpack_chunks; the IQ types' signs as four
// masks that negate x), its scales spread per 64-weight chunk; the tokens' sums in registers
// (4 + 4 + Tokens of the 32 zmm).
template <class Block, int Tokens>
void rows_k(const LinearProblem& p, std::int64_t row_begin, std::int64_t row_end, std::int64_t t0, int prefetch) {
  const auto* weight = static_cast<const Block*>(p.weight);
  const std::int64_t blocks = p.in / kElements<Block>;
  const quant::BlockQ8_K* xs[Tokens];
  for (int t = 0; t < Tokens; ++t)
    xs[t] = reinterpret_cast<const quant::BlockQ8_K*>(p.x_quantized + (t0 + t) * p.x_quantized_stride);
  // Q3_K and Q6_K scale both terms by d: their minimums' sums are taken off in int32.
  constexpr bool one_scale = std::is_same_v<Block, BlockQ3_K> || std::is_same_v<Block, BlockQ6_K>;
  // Lane i of chunk c's scales reads scale 4c + i / 8.
  const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11,
                                        10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i group_of_lane = _mm512_srli_epi16(lane, 3);
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    __m512 acc[Tokens];
#pragma GCC unroll 8
    for (int t = 0; t < Tokens; ++t) acc[t] = _mm512_setzero_ps();
    for (std::int64_t b = 0; b < blocks; ++b) {
      const Block& w = weight[r * blocks + b];
      if (prefetch > 0) {  // rows are consecutive: past the row's end is the next row's start
        const char* ahead = reinterpret_cast<const char*>(&w) + prefetch;
        for (std::size_t at = 0; at < sizeof(Block); at += 64) _mm_prefetch(ahead + at, _MM_HINT_T0);
      }
      __m512i u[4];
      [[maybe_unused]] __mmask64 negative[4];
      if constexpr (kSignedK<Block>) unpack_chunks(w, u, negative);
      else unpack_chunks(w, u);
      const ScalesKVector s = scales_vector(w);
      // IQ1_S: the points' scales are 8 (2s + 1); the shifts' terms are summed with x's block sums.
      constexpr bool kIq1s = std::is_same_v<Block, BlockIQ1_S>;
      [[maybe_unused]] __m256i shifts;
      if constexpr (kIq1s) shifts = iq1_s_shifts(w, s.scale);
      const __m512i scales = _mm512_castsi256_si512(kIq1s ? _mm256_slli_epi16(s.scale, 3) : s.scale);
      __m512i scale_of_chunk[4];  // chunk c (64 weights): scale 4c + i in lanes 8i..8i+7
      for (int c = 0; c < 4; ++c)
        scale_of_chunk[c] =
            _mm512_permutexvar_epi16(_mm512_add_epi16(group_of_lane, _mm512_set1_epi16(static_cast<short>(4 * c))), scales);
#pragma GCC unroll 8
      for (int t = 0; t < Tokens; ++t) {
        const quant::BlockQ8_K& xb = xs[t][b];
        __m512i sum = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
          __m512i q = load512(xb.qs + 64 * c);
          if constexpr (kSignedK<Block>) q = _mm512_mask_sub_epi8(q, negative[c], _mm512_setzero_si512(), q);
          sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(u[c], q), scale_of_chunk[c]);
        }
        if constexpr (kIq1s) sum = _mm512_add_epi32(sum, _mm512_zextsi256_si512(_mm256_madd_epi16(shifts, load256(xb.bsums))));
        if constexpr (kSignedK<Block>) {
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(s.a * xb.d), acc[t]);
          continue;
        }
        const __m512i min_sum = _mm512_zextsi256_si512(_mm256_madd_epi16(s.min, load256(xb.bsums)));
        if constexpr (one_scale) {
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, min_sum)), _mm512_set1_ps(s.a * xb.d), acc[t]);
        } else {
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(s.a * xb.d), acc[t]);
          acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_sum), _mm512_set1_ps(s.b * xb.d), acc[t]);
        }
      }
    }
    for (int t = 0; t < Tokens; ++t) p.y[(t0 + t) * p.out + r] = _mm512_reduce_add_ps(acc[t]);
  }
}

// A K type, eight tokens at a time (the block's rows stay in L2 between groups).
template <class Block>
void rows_k_all(const LinearProblem& p, const LinearBlock& block) {
  const int prefetch = kernel_options().prefetch_bytes;
  for (std::int64_t t = block.token_begin; t < block.token_end; t += 8) {
    const std::int64_t r0 = block.row_begin, r1 = block.row_end;
    switch (block.token_end - t) {
      case 1: rows_k<Block, 1>(p, r0, r1, t, prefetch); break;
      case 2: rows_k<Block, 2>(p, r0, r1, t, prefetch); break;
      case 3: rows_k<Block, 3>(p, r0, r1, t, prefetch); break;
      case 4: rows_k<Block, 4>(p, r0, r1, t, prefetch); break;
      case 5: rows_k<Block, 5>(p, r0, r1, t, prefetch); break;
      case 6: rows_k<Block, 6>(p, r0, r1, t, prefetch); break;
      case 7: rows_k<Block, 7>(p, r0, r1, t, prefetch); break;
      default: rows_k<Block, 8>(p, r0, r1, t, prefetch); break;
    }
  }
}

void dequantize_rows(DType dtype, const void* rows, std::int64_t in, std::int64_t count, float* out) {
  visit_block_type(dtype, [&](auto tag) {
    using Block = decltype(tag);
    dequantize_blocks_avx2(static_cast<const Block*>(rows), count * (in / kElements<Block>), out);
  });
}

}  // namespace

void quant_linear_block_avx512(const LinearProblem& problem, const LinearBlock& block) {
  if (problem.x_quantized == nullptr) return quant_prefill_block(problem, block, dequantize_rows, linear_block_avx512);
  visit_block_type(problem.quant_dtype, [&](auto tag) {
    using Block = decltype(tag);
    if constexpr (kIsK<Block>)
      rows_k_all<Block>(problem, block);
    else
      rows32_all<Block>(problem, block);
  });
}

}  // namespace switchyard::cpu::detail
