// linear(): the AVX2 + FMA + F16C variant (compiled with -mavx2 -mfma -mf16c; called only after
// isa_supported(Isa::avx2)). Eight f32 lanes; bf16 widens by a 16-bit shift, f16 by vcvtph2ps.
// A 4-row x 2-token tile keeps 8 accumulators plus 4 weight vectors in the 16 ymm registers.
#include <immintrin.h>

#include "operators/cpu/kernels/linear_tiling.h"

namespace switchyard::cpu::detail {
namespace {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const Bf16Bits* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
inline __m256 load8(const F16Bits* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

inline float to_f32(float w) { return w; }
inline float to_f32(Bf16Bits w) {
  return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(std::uint32_t{w.bits} << 16))));
}
inline float to_f32(F16Bits w) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(w.bits))); }

inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct Avx2Kernel {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;

  // panel[r * panel_stride + k] = w[r * w_stride + k] as f32.
  template <class W>
  static void widen(const W* w, std::int64_t w_stride, int rows, std::int64_t count, float* panel,
                    std::int64_t panel_stride) {
    for (int r = 0; r < rows; ++r) {
      const W* from = w + r * w_stride;
      float* to = panel + r * panel_stride;
      std::int64_t k = 0;
      for (; k + 8 <= count; k += 8) _mm256_storeu_ps(to + k, load8(from + k));
      for (; k < count; ++k) to[k] = to_f32(from[k]);
    }
  }

  template <int Rows, int Tokens, class W>
  static void tile(const TileArgs<W>& a) {
    __m256 acc[Rows][Tokens];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < Tokens; ++t) acc[r][t] = _mm256_setzero_ps();
    std::int64_t k = 0;
    for (; k + 8 <= a.input_count; k += 8) {
      __m256 w[Rows];
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) w[r] = load8(a.w + r * a.w_stride + k);
#pragma GCC unroll 8
      for (int t = 0; t < Tokens; ++t) {
        const __m256 x = _mm256_loadu_ps(a.x + t * a.x_stride + k);
#pragma GCC unroll 8
        for (int r = 0; r < Rows; ++r) acc[r][t] = _mm256_fmadd_ps(w[r], x, acc[r][t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < Tokens; ++t)
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        float sum = sum8(acc[r][t]);
        for (std::int64_t j = k; j < a.input_count; ++j)
          sum += to_f32(a.w[r * a.w_stride + j]) * a.x[t * a.x_stride + j];
        float& out = a.y[t * a.y_stride + r];
        out = a.accumulate ? out + sum : sum;
      }
  }
};

}  // namespace

void linear_block_avx2(const LinearProblem& problem, const LinearBlock& block) {
  linear_block_any<Avx2Kernel>(problem, block);
}

}  // namespace switchyard::cpu::detail
