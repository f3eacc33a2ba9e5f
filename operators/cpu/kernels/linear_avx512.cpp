// linear(): the AVX-512 variant (compiled with -mavx512f -mavx512bw -mavx512vl; called only after
// isa_supported(Isa::avx512)). Sixteen f32 lanes; bf16 widens by a 16-bit shift, f16 by
// vcvtph2ps; the input-dimension tail uses masked loads, which never touch memory past the end.
// A 4-row x 4-token tile keeps 16 accumulators plus 4 weight vectors in the 32 zmm registers.
// GCC 12 warns inside its own AVX-512 headers: _mm512_undefined_* initialise a variable from itself.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "operators/cpu/kernels/linear_tiling.h"

namespace switchyard::cpu::detail {
namespace {

inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const Bf16Bits* p, __mmask16 m) {
  const __m256i bits = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
inline __m512 load16(const F16Bits* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const Bf16Bits* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
inline __m512 load16(const F16Bits* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

struct Avx512Kernel {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;

  // panel[r * panel_stride + k] = w[r * w_stride + k] as f32.
  template <class W>
  static void widen(const W* w, std::int64_t w_stride, int rows, std::int64_t count, float* panel,
                    std::int64_t panel_stride) {
    for (int r = 0; r < rows; ++r) {
      const W* from = w + r * w_stride;
      float* to = panel + r * panel_stride;
      std::int64_t k = 0;
      for (; k + 16 <= count; k += 16) _mm512_storeu_ps(to + k, load16(from + k));
      if (k < count) {
        const auto mask = static_cast<__mmask16>((1u << (count - k)) - 1u);
        _mm512_mask_storeu_ps(to + k, mask, load16(from + k, mask));
      }
    }
  }

  template <int Rows, int Tokens, class W, class Load>
  static inline void step(const TileArgs<W>& a, std::int64_t k, __m512 (&acc)[Rows][Tokens], Load load) {
    __m512 w[Rows];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) w[r] = load(a.w + r * a.w_stride + k);
#pragma GCC unroll 8
    for (int t = 0; t < Tokens; ++t) {
      const __m512 x = load(a.x + t * a.x_stride + k);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) acc[r][t] = _mm512_fmadd_ps(w[r], x, acc[r][t]);
    }
  }

  template <int Rows, int Tokens, class W>
  static void tile(const TileArgs<W>& a) {
    __m512 acc[Rows][Tokens];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < Tokens; ++t) acc[r][t] = _mm512_setzero_ps();
    std::int64_t k = 0;
    for (; k + 16 <= a.input_count; k += 16) step<Rows, Tokens>(a, k, acc, [](const auto* p) { return load16(p); });
    if (k < a.input_count) {
      const auto mask = static_cast<__mmask16>((1u << (a.input_count - k)) - 1u);
      step<Rows, Tokens>(a, k, acc, [mask](const auto* p) { return load16(p, mask); });
    }
#pragma GCC unroll 8
    for (int t = 0; t < Tokens; ++t)
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const float sum = _mm512_reduce_add_ps(acc[r][t]);
        float& out = a.y[t * a.y_stride + r];
        out = a.accumulate ? out + sum : sum;
      }
  }
};

// 16 floats rounded to bf16 as f32_to_bf16 rounds them (to nearest, ties to even, in integer
// arithmetic, so denormals and MXCSR's modes change nothing; a NaN keeps its sign and top payload
// bits and turns quiet), each in the low half of its 32-bit lane.
inline __m512i round_to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i upper = _mm512_srli_epi32(bits, 16);
  const __m512i to_even = _mm512_add_epi32(_mm512_and_si512(upper, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, to_even), 16);
  const __m512i quiet = _mm512_or_si512(upper, _mm512_set1_epi32(0x40));
  return _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, quiet);
}

// rows[i][j] <- rows[j][i] for 16 rows of 16 32-bit words: pairs of rows interleaved by word, then
// by word pair (within 128-bit lanes), then the lanes gathered.
inline void transpose16(__m512i (&rows)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + j] lane L: rows i..i+3, word 4 L + j
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i even_low = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), odd_low = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
    const __m512i even_high = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i odd_high = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
    rows[j] = _mm512_shuffle_i32x4(even_low, even_high, 0x88);
    rows[4 + j] = _mm512_shuffle_i32x4(odd_low, odd_high, 0x88);
    rows[8 + j] = _mm512_shuffle_i32x4(even_low, even_high, 0xdd);
    rows[12 + j] = _mm512_shuffle_i32x4(odd_low, odd_high, 0xdd);
  }
}

}  // namespace

void linear_block_avx512(const LinearProblem& problem, const LinearBlock& block) {
  linear_block_any<Avx512Kernel>(problem, block);
}

void write_x_tile_chunks_avx512(const float* x, std::int64_t x_stride, std::int64_t tokens, std::int64_t in,
                                std::int64_t tile, std::int64_t chunk_begin, std::int64_t chunk_end,
                                std::uint32_t* tiles) {
  const std::int64_t chunks = (in + 31) / 32, first = tile * 16;
  const std::int64_t here = tokens - first < 16 ? tokens - first : 16;
  for (std::int64_t c = chunk_begin; c < chunk_end; ++c) {
    // Token t's 32 inputs of the chunk as 16 words (a pair each, the lower input in the low half),
    // masked past `in` (zeros), then 16 tokens' words transposed to [pair][token].
    const std::int64_t left = in - 32 * c;
    const auto low = static_cast<__mmask16>(left >= 16 ? 0xffffu : (1u << left) - 1u);
    const auto high = static_cast<__mmask16>(left >= 32 ? 0xffffu : left <= 16 ? 0u : (1u << (left - 16)) - 1u);
    __m512i words[16];
    for (std::int64_t t = 0; t < 16; ++t) {
      if (t >= here) {
        words[t] = _mm512_setzero_si512();
        continue;
      }
      const float* row = x + (first + t) * x_stride + 32 * (c - chunk_begin);
      const __m256i a = _mm512_cvtepi32_epi16(round_to_bf16(_mm512_maskz_loadu_ps(low, row)));
      const __m256i b = _mm512_cvtepi32_epi16(round_to_bf16(_mm512_maskz_loadu_ps(high, row + 16)));
      words[t] = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
    }
    transpose16(words);
    std::uint32_t* out = tiles + (tile * chunks + c) * 256;  // 64-byte aligned: whole 1 KiB tiles
    for (int p = 0; p < 16; ++p) _mm512_store_si512(out + 16 * p, words[p]);
  }
}

void write_x_tile_avx512(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t tile,
                         std::uint32_t* tiles) {
  write_x_tile_chunks_avx512(x, in, tokens, in, tile, 0, (in + 31) / 32, tiles);
}

void store_c_tile_avx512(const float* c, std::int64_t rows, std::int64_t tokens, float* y, std::int64_t y_stride) {
  __m512i words[16];
  for (int r = 0; r < 16; ++r) words[r] = _mm512_load_si512(c + 16 * r);
  transpose16(words);  // words[t]: token t's 16 rows
  const auto row_mask = static_cast<__mmask16>(rows >= 16 ? 0xffffu : (1u << rows) - 1u);
  for (std::int64_t t = 0; t < tokens; ++t) _mm512_mask_storeu_epi32(y + t * y_stride, row_mask, words[t]);
}

}  // namespace switchyard::cpu::detail
