#pragma once
// For the tests of kernels that compute a SwiGLU row block (gemv_swiglu, router_gate's side
// blocks): the double-precision reference of h = silu(gate x) * up x.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "operators/cpu/kernels/half.h"
#include "operators/cuda/kernels/device_context.h"
#include "tests/cuda_test_support.h"

namespace switchyard::swiglu_testing {

namespace sy = switchyard;
namespace cuda = switchyard::cuda;
using testing::uniform;

using testing::Weight;


// h ([rows]) against the reference for one token's x ([in]). Tolerance: f32 sums (1e-5 of their
// scales) through silu (slope <= 1.1) and the product, plus expf.
inline void check_swiglu(const Weight& gate, const Weight& up, std::int64_t in, std::int64_t rows, const float* x,
                         const float* h) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double g = 0, u = 0, g_scale = 0, u_scale = 0;
    for (std::int64_t k = 0; k < in; ++k) {
      const double xv = x[k];
      g += xv * gate.f32[static_cast<std::size_t>(r * in + k)];
      u += xv * up.f32[static_cast<std::size_t>(r * in + k)];
      g_scale += std::fabs(xv * gate.f32[static_cast<std::size_t>(r * in + k)]);
      u_scale += std::fabs(xv * up.f32[static_cast<std::size_t>(r * in + k)]);
    }
    const double silu = g / (1 + std::exp(-g));
    const double expected = silu * u;
    const double bound = 1e-5 * (1.1 * g_scale * std::fabs(u) + std::fabs(silu) * u_scale) + 1e-6 * std::fabs(expected);
    INFO("row " << r);
    REQUIRE(std::fabs(h[r] - expected) <= bound);
  }
}

}  // namespace switchyard::swiglu_testing
