// RMSNorm (operators/cpu/kernels/rms_norm.h) against the double reference, with f32 and bf16 weights.
// Tolerance: |out - ref| <= 1e-6 * |ref|. The kernel rounds the variance, variance + eps, the
// inverse root and two products in f32, about 3 * 2^-24 in all; the mean itself is accumulated
// in double.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <vector>

#include "operators/cpu/kernels/half.h"
#include "tests/operators/cpu/kernels/reference.h"
#include "operators/cpu/kernels/rms_norm.h"
#include "tests/test_seed.h"

using switchyard::testing::test_seed;

namespace sy = switchyard;
namespace cpu = switchyard::cpu;

TEST_CASE("cpu kernels: rms_norm matches the reference with f32 and bf16 weights, in place too") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::int64_t> rows_of(1, 6), dim_of(1, 3000);
  std::uniform_real_distribution<float> value(-3, 3), weight_value(0.05f, 2.0f), log_scale(-6, 6);
  for (int round = 0; round < 40; ++round) {
    const std::int64_t rows = rows_of(random), dim = dim_of(random);
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    const float eps = round % 3 ? 1e-6f : 1e-5f;
    // Rows of very different scales, so eps matters for some.
    std::vector<float> x(rows * dim);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float scale = std::exp2(log_scale(random));
      for (std::int64_t i = 0; i < dim; ++i) x[r * dim + i] = value(random) * scale;
    }
    std::vector<float> weight_f32(dim);
    std::vector<std::uint16_t> weight_bf16(dim);
    for (std::int64_t i = 0; i < dim; ++i) {
      weight_bf16[i] = cpu::f32_to_bf16(weight_value(random));
      weight_f32[i] = dtype == sy::DType::bf16 ? cpu::bf16_to_f32(weight_bf16[i]) : weight_value(random);
    }
    const void* weight = dtype == sy::DType::bf16 ? static_cast<const void*>(weight_bf16.data()) : weight_f32.data();
    INFO("rows " << rows << ", dim " << dim << ", weights " << std::string(sy::dtype_name(dtype)) << ", eps " << eps);

    std::vector<double> expected(rows * dim);
    cpu::reference::rms_norm(x.data(), rows, dim, weight, dtype, eps, expected.data());
    std::vector<float> out(rows * dim);
    cpu::rms_norm(x.data(), rows, dim, weight, dtype, eps, out.data());
    cpu::rms_norm(x.data(), rows, dim, weight, dtype, eps, x.data());  // in place
    int failures = 0;
    for (std::int64_t i = 0; i < rows * dim && failures < 5; ++i) {
      const bool close = std::fabs(out[i] - expected[i]) <= 1e-6 * std::fabs(expected[i]);
      if (!close || x[i] != out[i]) {
        ++failures;
        FAIL_CHECK("out[" << i << "] = " << out[i] << " (in place " << x[i] << "), reference " << expected[i]);
      }
    }
  }
}

TEST_CASE("cpu kernels: rms_norm refuses weight dtypes it cannot read") {
  std::vector<float> x(4, 1.0f), out(4);
  std::vector<std::uint16_t> weight(4, 0x3c00);
  CHECK_THROWS_AS(cpu::rms_norm(x.data(), 1, 4, weight.data(), sy::DType::f16, 1e-6f, out.data()),
                  std::invalid_argument);
}
