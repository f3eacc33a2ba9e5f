// linear(): the AVX-512 variant (compiled with -mavx512f -mavx512bw -mavx512vl; called only after
// isa_supported(Isa::avx512)). Sixteen f32 lanes; bf16 widens by a 16-bit shift, f16 by
// vcvtph2ps; the input-dimension tail uses masked loads, which never touch memory past the end.
// A 4-row x 4-token tile keeps 16 accumulators plus 4 weight vectors in the 32 zmm registers.
// GCC 12 warns inside its own AVX-512 headers: _mm512_undefined_* initialise a variable from itself.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "operators/cpu/linear_tiling.h"

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

}  // namespace

void linear_block_avx512(const LinearProblem& problem, const LinearBlock& block) {
  linear_block_any<Avx512Kernel>(problem, block);
}

}  // namespace switchyard::cpu::detail
