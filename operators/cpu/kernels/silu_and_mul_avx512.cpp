// silu_and_mul's AVX-512 variant (compiled with AVX-512 flags; called only where
// isa_supported(Isa::avx512)): 16 lanes a step, e^-g by its own exp instead of libm's scalar expf
// (a prefill's experts take 4-14 M of them a layer). Same formula, g / (1 + e^-g) * up, the
// quotient and product IEEE-rounded; only the exp differs from the scalar one, by at most a few
// ulp (tests/operators/cpu/kernels/test_activations.cpp holds both to the double reference).
// GCC 12's intrinsics headers start masked ops from _mm512_undefined_ps, which it then calls
// possibly uninitialised.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "operators/cpu/kernels/silu_and_mul.h"

namespace switchyard::cpu::detail {
namespace {

// e^x for every lane: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2 (ln2 in two parts, so
// that n ln2 is exact enough), e^r by its Taylor series to r^7 (truncation 6e-9 relative at
// |r| = ln2 / 2, below f32's half ulp), then 2^n by vscalefps, which gives +inf past f32's range
// and 0 or subnormals below it. x is clamped to [-104, 89] first: beyond those e^x is 0 or +inf
// anyway, and n stays finite (x = +-inf would make r NaN). NaN stays NaN: vmaxps/vminps return
// their second operand when one is NaN, and x is the second.
__m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2's high part: 8 bits, n * it exact
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);     // ln2 - 0.693359375
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace

void silu_and_mul_avx512(const float* gate, const float* up, std::int64_t count, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (std::int64_t i = 0; i < count; i += 16) {
    const auto mask = static_cast<__mmask16>(count - i >= 16 ? 0xffffu : (1u << (count - i)) - 1u);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(mask, up + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
  }
}

}  // namespace switchyard::cpu::detail
