// SiLU-and-multiply and softmax (operators/cpu/kernels/silu_and_mul.h, softmax.h) against the double
// references.
// silu_and_mul: |out - ref| <= 1e-6 * |ref| + 1e-30: exp, 1 + exp, the quotient and the product
// each round once in f32 (4 * 2^-24 ~ 2.4e-7); the absolute term covers gates so negative that
// silu underflows.
// softmax: |out_i - ref_i| <= ref_i * (1e-6 + 2^-23 * (|x_i - max| + sum_j ref_j |x_j - max|)): the
// f32 difference x_i - max rounds by up to 2^-24 of itself, which exp turns into that relative
// error of e^(x_i - max), and the normalising sum inherits the weighted mean of those errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/operators/cpu/kernels/reference.h"
#include "operators/cpu/kernels/silu_and_mul.h"
#include "operators/cpu/kernels/softmax.h"
#include "tests/test_seed.h"

using switchyard::testing::test_seed;

namespace cpu = switchyard::cpu;

TEST_CASE("cpu kernels: silu_and_mul matches the reference, fused and separate, across the range") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::int64_t tokens = 3, width = 1000;
  std::uniform_real_distribution<float> gate_value(-20, 20), up_value(-4, 4);
  std::vector<float> gate_up(tokens * 2 * width);
  for (float& v : gate_up) v = gate_value(random);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t i = 0; i < width; ++i) gate_up[t * 2 * width + width + i] = up_value(random);
  // Gates where exp(-g) overflows f32 and where silu is tiny.
  gate_up[0] = -90.0f;
  gate_up[1] = -104.0f;
  gate_up[2] = 88.0f;

  std::vector<float> fused(tokens * width), separate(tokens * width);
  cpu::silu_and_mul_fused(gate_up.data(), tokens, width, fused.data());
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* row = gate_up.data() + t * 2 * width;
    std::vector<double> expected(width);
    cpu::reference::silu_and_mul(row, row + width, width, expected.data());
    cpu::silu_and_mul(row, row + width, width, separate.data() + t * width);
    for (std::int64_t i = 0; i < width; ++i) {
      INFO("token " << t << ", gate " << row[i] << ", up " << row[width + i]);
      const float out = fused[t * width + i];
      CHECK(std::fabs(out - expected[i]) <= 1e-6 * std::fabs(expected[i]) + 1e-30);
      CHECK(separate[t * width + i] == out);
    }
  }
  // Every variant this CPU runs, at every length mod 16 (the vector tail), on the same bound.
  for (cpu::Isa isa : cpu::kAllIsas) {
    if (!cpu::isa_supported(isa)) continue;
    INFO("isa " << std::string(cpu::isa_name(isa)));
    for (std::int64_t count : {1, 15, 16, 17, 1000}) {
      std::vector<double> expected(count);
      cpu::reference::silu_and_mul(gate_up.data(), gate_up.data() + width, count, expected.data());
      std::vector<float> out(count + 1, 7.0f);  // one past the end: left as it was
      cpu::silu_and_mul(isa, gate_up.data(), gate_up.data() + width, count, out.data());
      for (std::int64_t i = 0; i < count; ++i) {
        INFO("count " << count << ", gate " << gate_up[i] << ", up " << gate_up[width + i]);
        CHECK(std::fabs(out[i] - expected[i]) <= 1e-6 * std::fabs(expected[i]) + 1e-30);
      }
      CHECK(out[count] == 7.0f);
    }
    // The edges: e^-g past f32's range both ways, infinities and NaN as the scalar formula gives them.
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> gates = {-200.0f, -89.0f, 89.0f, 200.0f, inf, -inf, nan, 0.0f}, ups(gates.size(), 1.5f);
    std::vector<float> got(gates.size()), scalar(gates.size());
    cpu::silu_and_mul(isa, gates.data(), ups.data(), static_cast<std::int64_t>(gates.size()), got.data());
    cpu::silu_and_mul(cpu::Isa::scalar, gates.data(), ups.data(), static_cast<std::int64_t>(gates.size()), scalar.data());
    for (std::size_t i = 0; i < gates.size(); ++i) {
      INFO("gate " << gates[i] << ": " << got[i] << " against the scalar " << scalar[i]);
      if (std::isnan(scalar[i])) CHECK(std::isnan(got[i]));
      else CHECK((got[i] == scalar[i] || std::fabs(got[i] - scalar[i]) <= 1e-6f * std::fabs(scalar[i]) + 1e-30f));
    }
  }
}

TEST_CASE("cpu kernels: softmax matches the reference, in place too") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::int64_t> rows_of(1, 5), n_of(1, 400);
  std::uniform_real_distribution<float> spread_of(0.1f, 30.0f);
  const double unit = std::ldexp(1.0, -24);
  for (int round = 0; round < 30; ++round) {
    const std::int64_t rows = rows_of(random), n = n_of(random);
    const float spread = spread_of(random);
    std::uniform_real_distribution<float> value(-spread, spread);
    std::vector<float> x(rows * n);
    for (float& v : x) v = value(random) + 100.0f * (round % 3 == 0);  // an offset must not matter
    INFO("rows " << rows << ", n " << n << ", spread " << spread);
    std::vector<double> expected(rows * n);
    cpu::reference::softmax(x.data(), rows, n, expected.data());
    std::vector<float> out(rows * n);
    cpu::softmax(x.data(), rows, n, out.data());
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * n;
      const double max = *std::max_element(row, row + n);
      double mean_distance = 0;
      for (std::int64_t i = 0; i < n; ++i) mean_distance += expected[r * n + i] * (max - row[i]);
      for (std::int64_t i = 0; i < n; ++i) {
        const double ref = expected[r * n + i];
        const double bound = ref * (1e-6 + 2 * unit * ((max - row[i]) + mean_distance));
        INFO("row " << r << ", i " << i << ", x " << row[i] << ", out " << out[r * n + i] << ", reference " << ref);
        CHECK(std::fabs(out[r * n + i] - ref) <= bound);
      }
    }
    std::vector<float> in_place = x;
    cpu::softmax(in_place.data(), rows, n, in_place.data());
    CHECK(in_place == out);
  }
}
