// The quantised kernels with AVX2 (compiled with -mavx2 -mfma -mf16c; called only after
// isa_supported(Isa::avx2)). Integer products by vpmaddubsw (unsigned weight bytes times signed
// activation bytes, pairs summed in int16: no saturation, quant_block_unpack.h; signed weights as
// |w| times x with w's sign) then vpmaddwd (times the 256-weight types' scales, or ones),
// accumulated in int32 per block and in f32 per token.
#include <limits>

#include "operators/cpu/kernels/quant_dot.h"
#include "operators/cpu/kernels/quant_unpack_avx2.h"

namespace switchyard::cpu::detail {
namespace {

// Rows [row_begin, row_end) for tokens [t0, t0 + Tokens) of a 32-weight type, the tokens'
// accumulators in registers; each block unpacked once for the Tokens tokens.
template <class Block, int Tokens>
void rows32(const LinearProblem& p, std::int64_t row_begin, std::int64_t row_end, std::int64_t t0) {
  const auto* weight = static_cast<const Block*>(p.weight);
  const std::int64_t blocks = p.in / quant::kBlock;
  const ActivationBlock32* xs[Tokens];
  for (int t = 0; t < Tokens; ++t)
    xs[t] = reinterpret_cast<const ActivationBlock32*>(p.x_quantized + (t0 + t) * p.x_quantized_stride);
  constexpr bool q8 = kSigned32<Block>;
  constexpr int offset = q8 ? 0 : kOffset<Block>;  // signed weights take w's sign instead
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    __m256 acc[Tokens];
    float extra[Tokens];  // the _1 types' minimum times the token's block sums
    for (int t = 0; t < Tokens; ++t) {
      acc[t] = _mm256_setzero_ps();
      extra[t] = 0.0f;
    }
    for (std::int64_t b = 0; b < blocks; ++b) {
      const Block& w = weight[r * blocks + b];
      const float d = scale_d(w);
      const __m256i u = unpack32(w);
      // Signed weights: |w| times x with w's sign (vpsignb), offset 0.
      const __m256i magnitude = q8 ? _mm256_abs_epi8(u) : u;
#pragma GCC unroll 4
      for (int t = 0; t < Tokens; ++t) {
        const ActivationBlock32& xb = xs[t][b];
        const __m256i q = load256(xb.qs);
        const __m256i products = _mm256_maddubs_epi16(magnitude, q8 ? _mm256_sign_epi8(q, u) : q);
        __m256i sum = _mm256_madd_epi16(products, _mm256_set1_epi16(1));
        if constexpr (offset != 0) sum = _mm256_add_epi32(sum, _mm256_castsi128_si256(_mm_cvtsi32_si128(-offset * xb.sum)));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d * xb.d), acc[t]);
        if constexpr (kHasMin<Block>) extra[t] += half_to_float(w.m) * xb.d_sum;
      }
    }
    for (int t = 0; t < Tokens; ++t) p.y[(t0 + t) * p.out + r] = horizontal_sum(acc[t]) + extra[t];
  }
}

// The 32-weight types, four tokens at a time (the rows of the block stay in L2 between groups).
template <class Block>
void rows32_all(const LinearProblem& p, const LinearBlock& block) {
  for (std::int64_t t = block.token_begin; t < block.token_end; t += 4) {
    switch (block.token_end - t) {
      case 1: rows32<Block, 1>(p, block.row_begin, block.row_end, t); break;
      case 2: rows32<Block, 2>(p, block.row_begin, block.row_end, t); break;
      case 3: rows32<Block, 3>(p, block.row_begin, block.row_end, t); break;
      default: rows32<Block, 4>(p, block.row_begin, block.row_end, t); break;
    }
  }
}

// Rows [row_begin, row_end) for tokens [token_begin, token_end) (at most kTokenGroup) of a K type:
// each super-block unpacked once for the group, its scales spread per 32-weight chunk.
template <class Block>
void rows_k(const LinearProblem& p, const LinearBlock& block) {
  const auto* weight = static_cast<const Block*>(p.weight);
  const std::int64_t blocks = p.in / kElements<Block>, tokens = block.token_end - block.token_begin;
  const std::uint8_t* x = p.x_quantized + block.token_begin * p.x_quantized_stride;
  __m256 acc[kTokenGroup];
  // Byte pattern that spreads a 32-bit word (scales 2c, 2c + 1) over two 8-lane halves.
  const __m256i pair = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
                                        2, 3, 2, 3);
  for (std::int64_t r = block.row_begin; r < block.row_end; ++r) {
    for (std::int64_t t = 0; t < tokens; ++t) acc[t] = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < blocks; ++b) {
      const Block& w = weight[r * blocks + b];
      alignas(32) Unpacked<Block> u[quant::kSuperBlock];
      unpack_simd(w, u);
      const ScalesKVector s = scales_vector(w);
      __m256i scale_of_chunk[8];  // chunk c (32 weights): scale 2c in lanes 0-7, 2c + 1 in 8-15
      for (int c = 0; c < 8; ++c)
        scale_of_chunk[c] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(s.scale, _mm256_set1_epi32(c)), pair);
      for (std::int64_t t = 0; t < tokens; ++t) {
        const auto& xb = reinterpret_cast<const quant::BlockQ8_K*>(x + t * p.x_quantized_stride)[b];
        __m256i sum = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
          const __m256i q = load256(xb.qs + 32 * c), v = load256(u + 32 * c);
          // Signed weights: |v| times x with v's sign.
          const __m256i products = kSignedK<Block> ? _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(q, v))
                                                   : _mm256_maddubs_epi16(v, q);
          sum = _mm256_add_epi32(sum, _mm256_madd_epi16(products, scale_of_chunk[c]));
        }
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(s.a * xb.d), acc[t]);
        if constexpr (!kSignedK<Block>) {
          const __m256i min_sum = _mm256_madd_epi16(s.min, load256(xb.bsums));
          acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_sum), _mm256_set1_ps(s.b * xb.d), acc[t]);
        }
      }
    }
    for (std::int64_t t = 0; t < tokens; ++t) p.y[(block.token_begin + t) * p.out + r] = horizontal_sum(acc[t]);
  }
}

}  // namespace

void dequantize_rows_avx2(DType dtype, const void* rows, std::int64_t in, std::int64_t count, float* out) {
  visit_block_type(dtype, [&](auto tag) {
    using Block = decltype(tag);
    dequantize_blocks_avx2(static_cast<const Block*>(rows), count * (in / kElements<Block>), out);
  });
}

void quant_linear_block_avx2(const LinearProblem& problem, const LinearBlock& block) {
  if (problem.x_quantized == nullptr) return quant_prefill_block(problem, block, dequantize_rows_avx2, linear_block_avx2);
  visit_block_type(problem.quant_dtype, [&](auto tag) {
    using Block = decltype(tag);
    if constexpr (kIsK<Block>)
      for_token_groups(block, [&](const LinearBlock& group) { rows_k<Block>(problem, group); });
    else
      rows32_all<Block>(problem, block);
  });
}

}  // namespace switchyard::cpu::detail

namespace switchyard::cpu::detail {

// quantize_blocks_scalar with 8 lanes: max |x| (exact in any order), then x * (1 / d) clamped and
// rounded to nearest even (vroundps in its nearest mode, as nearbyint in the default mode).
void quantize_blocks_avx2(const float* x, std::int64_t in, int block, std::int64_t block_stride, float* d,
                          std::int8_t* qs, std::int32_t* sums16) {
  const __m256 sign = _mm256_set1_ps(-0.0f), low = _mm256_set1_ps(-127.0f), high = _mm256_set1_ps(127.0f);
  for (std::int64_t b = 0; b < in / block; ++b, x += block) {
    __m256 max_abs = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    // |x| first: vmaxps returns its second operand where either is NaN, so a NaN input is skipped,
    // as std::max skips it in the scalar code; the NaNs are flagged apart and make d NaN.
    for (int i = 0; i < block; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      max_abs = _mm256_max_ps(_mm256_andnot_ps(sign, v), max_abs);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs), _mm256_extractf128_ps(max_abs, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float scale = _mm256_movemask_ps(nan) != 0 ? std::numeric_limits<float>::quiet_NaN() : _mm_cvtss_f32(m) / 127.0f;
    const __m256 inverse = _mm256_set1_ps(scale > 0.0f ? 1.0f / scale : 0.0f);
    *reinterpret_cast<float*>(reinterpret_cast<std::byte*>(d) + b * block_stride) = scale;
    auto* out = reinterpret_cast<std::int8_t*>(reinterpret_cast<std::byte*>(qs) + b * block_stride);
    for (int i = 0; i < block; i += 32) {
      __m256i q[4];
      for (int j = 0; j < 4; ++j) {
        // max(low, v) then min(high, .): a NaN lane becomes -127, as fmin(fmax(NaN, -127), 127) does.
        const __m256 v = _mm256_min_ps(high, _mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), inverse), low));
        q[j] = _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      // int32 -> int16 -> int8 with saturation (no value saturates: |q| <= 127); packs interleave
      // 128-bit lanes, the permute restores the order.
      const __m256i words = _mm256_packs_epi32(q[0], q[1]), words2 = _mm256_packs_epi32(q[2], q[3]);
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words, words2), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
      // Sums of bytes 0-15 and 16-31: pairs (times ones), fours, then two horizontal adds per lane.
      const __m256i fours = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes), _mm256_set1_epi16(1));
      const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(fours, fours), fours);
      std::int32_t* to = sums16 + (b * block + i) / 16;
      to[0] = _mm256_extract_epi32(sums, 0);
      to[1] = _mm256_extract_epi32(sums, 4);
    }
  }
}

}  // namespace switchyard::cpu::detail
