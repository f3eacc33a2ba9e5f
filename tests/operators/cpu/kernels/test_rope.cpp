// Rotary embeddings (operators/cpu/kernels/rope.h) against references written from the formulas in double:
// plain RoPE and YaRN frequencies, cos/sin tables, and the three layouts.
//
// Tolerances (u = 2^-24):
//   inv_freq, default:  relative (3 + ln theta) * 2u: the f32 exponent 2i/d rounds (ln theta times
//                       that in the power), the power and the reciprocal round once each.
//   inv_freq, YaRN:     relative (6 + ln theta) * 2u for three more roundings in the blend, plus
//                       the ramp r's f32 error dr (4u, and 2u (i + low) / (high - low) for f32
//                       ramp ends when not truncated) times its leverage on the blend
//                       E (1 - r (1 - 1/factor)): (1 - 1/factor) / (1 - r (1 - 1/factor)), up to
//                       `factor` where r nears 1. transformers' f32 blend rounds the same way.
//   cos/sin:            attention_factor * (|angle| * (delta + u) + 4u): delta is inv_freq's bound
//                       above, u the f32 product position * inv_freq; 4u covers rounding cos/sin,
//                       the attention factor and their product. As in transformers, angles are
//                       f32, so large positions lose absolute precision.
//   applied:            (|a| + |b|) times the cos/sin bound with 6u: two products, one sum more.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <vector>

#include "tests/operators/cpu/kernels/reference.h"
#include "operators/cpu/kernels/rope.h"
#include "tests/test_seed.h"

using switchyard::testing::test_seed;

namespace cpu = switchyard::cpu;

namespace {

constexpr double kUnit = 0x1.0p-24;

double default_bound(double theta) { return (3 + std::log(theta)) * 2 * kUnit; }
// Per pair index: the YaRN relative bound described at the top.
std::vector<double> yarn_bounds(const switchyard::YarnConfig& c) {
  const cpu::reference::YarnRamp ramp = cpu::reference::yarn_ramp(c);
  const double blend = 1 - 1 / c.factor;
  std::vector<double> bounds(c.rope_dim / 2);
  for (int i = 0; i < c.rope_dim / 2; ++i) {
    const double ramp_error = 4 * kUnit + 2 * kUnit * (i + ramp.low) / (ramp.high - ramp.low);
    bounds[i] = (6 + std::log(c.theta)) * 2 * kUnit + ramp_error * blend / (1 - ramp.at(i) * blend);
  }
  return bounds;
}

void check_frequencies(const switchyard::RopeFrequencies& got, const std::vector<double>& expected,
                       const std::vector<double>& relative) {
  REQUIRE(got.inv_freq.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("i " << i << ": " << got.inv_freq[i] << " vs " << expected[i]);
    CHECK(std::fabs(got.inv_freq[i] - expected[i]) <= relative[i] * expected[i]);
  }
}

switchyard::YarnConfig random_yarn(std::mt19937& random) {
  switchyard::YarnConfig c;
  c.rope_dim = 2 * std::uniform_int_distribution<int>(4, 64)(random);
  c.theta = std::exp(std::uniform_real_distribution<double>(std::log(500.0), std::log(2e6))(random));
  c.factor = std::uniform_real_distribution<double>(1.5, 64)(random);
  c.original_max_position_embeddings = std::uniform_int_distribution<int>(512, 32768)(random);
  c.beta_fast = std::uniform_real_distribution<double>(8, 64)(random);
  c.beta_slow = std::uniform_real_distribution<double>(0.5, 2)(random);
  c.truncate = std::bernoulli_distribution(0.7)(random);
  switch (std::uniform_int_distribution<int>(0, 2)(random)) {
    case 0: break;  // no mscale: attention factor 0.1 ln(factor) + 1
    case 1: c.mscale = c.mscale_all_dim = std::uniform_real_distribution<double>(0.5, 1.5)(random); break;
    case 2: c.mscale = 1.0, c.mscale_all_dim = 0.8; break;
  }
  return c;
}

}  // namespace

TEST_CASE("cpu kernels: rope frequencies, default and YaRN, match the formulas") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  for (const double theta : {10000.0, 1e6, 5e6, 500000.0}) {
    for (const int dim : {64, 128, 96, 10}) {
      INFO("theta " << theta << ", rope_dim " << dim);
      const switchyard::RopeFrequencies f = switchyard::rope_frequencies_default(dim, theta);
      check_frequencies(f, cpu::reference::rope_inv_freq_default(dim, theta),
                        std::vector<double>(dim / 2, default_bound(theta)));
      CHECK(f.attention_factor == 1.0f);
      CHECK(f.rope_dim() == dim);
    }
  }
  for (int round = 0; round < 200; ++round) {
    const switchyard::YarnConfig c = random_yarn(random);
    INFO("rope_dim " << c.rope_dim << ", theta " << c.theta << ", factor " << c.factor << ", original context "
                     << c.original_max_position_embeddings << ", beta_fast " << c.beta_fast << ", beta_slow "
                     << c.beta_slow << ", truncate " << c.truncate << ", mscale " << c.mscale << "/"
                     << c.mscale_all_dim);
    const switchyard::RopeFrequencies f = switchyard::rope_frequencies_yarn(c);
    check_frequencies(f, cpu::reference::rope_inv_freq_yarn(c), yarn_bounds(c));
    CHECK(f.attention_factor == doctest::Approx(cpu::reference::yarn_attention_factor(c)).epsilon(1e-7));
  }
  CHECK_THROWS_AS(switchyard::rope_frequencies_default(7, 10000), std::invalid_argument);
}

TEST_CASE("cpu kernels: DeepSeek-V3's YaRN keeps fast dimensions, divides slow ones by 40, scales by 1") {
  // config.json of DeepSeek-V3: qk_rope_head_dim 64, rope_theta 10000, rope_scaling {type yarn,
  // factor 40, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, mscale 1,
  // mscale_all_dim 1}. Correction range: floor(10.47) = 10 to ceil(22.5) = 23.
  switchyard::YarnConfig c;
  c.rope_dim = 64, c.theta = 10000, c.factor = 40, c.original_max_position_embeddings = 4096;
  c.beta_fast = 32, c.beta_slow = 1, c.mscale = 1, c.mscale_all_dim = 1;
  const switchyard::RopeFrequencies yarn = switchyard::rope_frequencies_yarn(c);
  const switchyard::RopeFrequencies plain = switchyard::rope_frequencies_default(64, 10000);
  CHECK(yarn.attention_factor == 1.0f);
  for (int i = 0; i <= 10; ++i) CHECK(yarn.inv_freq[i] == plain.inv_freq[i]);
  for (int i = 11; i < 23; ++i) {
    CHECK(yarn.inv_freq[i] < plain.inv_freq[i]);
    CHECK(yarn.inv_freq[i] > plain.inv_freq[i] / 40);
  }
  for (int i = 23; i < 32; ++i) CHECK(yarn.inv_freq[i] == doctest::Approx(plain.inv_freq[i] / 40).epsilon(2e-7));
  // The softmax scale of DeepSeek's attention: head_dim^-0.5 * yarn_get_mscale(40, 1)^2.
  CHECK(switchyard::yarn_get_mscale(40, 1) == doctest::Approx(1.0 + 0.1 * std::log(40.0)));
  CHECK(switchyard::yarn_get_mscale(1, 1) == 1.0);
  CHECK(switchyard::yarn_get_mscale(0.5, 0.7) == 1.0);
}

TEST_CASE("cpu kernels: rope cos/sin tables match the formulas near and far") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  for (int round = 0; round < 40; ++round) {
    const bool yarn = round % 2;
    const switchyard::YarnConfig c = random_yarn(random);
    const switchyard::RopeFrequencies f =
        yarn ? switchyard::rope_frequencies_yarn(c) : switchyard::rope_frequencies_default(c.rope_dim, c.theta);
    const std::vector<double> inv_freq =
        yarn ? cpu::reference::rope_inv_freq_yarn(c) : cpu::reference::rope_inv_freq_default(c.rope_dim, c.theta);
    const double factor = yarn ? cpu::reference::yarn_attention_factor(c) : 1.0;
    const std::vector<double> delta =
        yarn ? yarn_bounds(c) : std::vector<double>(c.rope_dim / 2, default_bound(c.theta));
    const std::int64_t first = round % 4 == 3 ? 163000 : std::uniform_int_distribution<std::int64_t>(0, 5000)(random);
    const std::int64_t positions = 17;
    const int half = c.rope_dim / 2;
    std::vector<float> cos(positions * half), sin(positions * half);
    switchyard::rope_cos_sin(f, first, positions, cos.data(), sin.data());
    INFO("yarn " << yarn << ", rope_dim " << c.rope_dim << ", theta " << c.theta << ", first position " << first);
    for (std::int64_t p = 0; p < positions; ++p)
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(first + p) * inv_freq[i];
        const double bound = factor * (std::fabs(angle) * (delta[i] + kUnit) + 4 * kUnit);
        INFO("position " << first + p << ", i " << i << ", angle " << angle);
        CHECK(std::fabs(cos[p * half + i] - std::cos(angle) * factor) <= bound);
        CHECK(std::fabs(sin[p * half + i] - std::sin(angle) * factor) <= bound);
      }
  }
}

TEST_CASE("cpu kernels: apply_rope matches the formulas in all three layouts, with strides") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(-2, 2);
  const switchyard::RopeLayout layouts[] = {switchyard::RopeLayout::half_split, switchyard::RopeLayout::interleaved_to_half_split,
                                     switchyard::RopeLayout::interleaved};
  for (int round = 0; round < 30; ++round) {
    const switchyard::YarnConfig c = random_yarn(random);
    const bool yarn = round % 2;
    const switchyard::RopeFrequencies f =
        yarn ? switchyard::rope_frequencies_yarn(c) : switchyard::rope_frequencies_default(c.rope_dim, c.theta);
    const std::vector<double> inv_freq =
        yarn ? cpu::reference::rope_inv_freq_yarn(c) : cpu::reference::rope_inv_freq_default(c.rope_dim, c.theta);
    const double factor = yarn ? cpu::reference::yarn_attention_factor(c) : 1.0;
    const std::vector<double> delta =
        yarn ? yarn_bounds(c) : std::vector<double>(c.rope_dim / 2, default_bound(c.theta));
    const int dim = c.rope_dim, half = dim / 2;
    const std::int64_t tokens = std::uniform_int_distribution<std::int64_t>(1, 5)(random);
    const std::int64_t heads = std::uniform_int_distribution<std::int64_t>(1, 4)(random);
    const std::int64_t nope = std::uniform_int_distribution<std::int64_t>(0, 9)(random);
    const std::int64_t first = std::uniform_int_distribution<std::int64_t>(0, 3000)(random);
    std::vector<float> cos(tokens * half), sin(tokens * half);
    switchyard::rope_cos_sin(f, first, tokens, cos.data(), sin.data());
    std::vector<std::int64_t> positions(tokens);
    for (std::int64_t t = 0; t < tokens; ++t) positions[t] = first + t;

    // q: [tokens, heads, nope + rope], as in MLA; the rope part is rotated, the rest untouched.
    const std::int64_t head_stride = nope + dim, token_stride = heads * head_stride;
    std::vector<float> q(tokens * token_stride), rope_part(tokens * heads * dim);
    for (float& v : q) v = value(random);
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h)
        std::copy_n(&q[t * token_stride + h * head_stride + nope], dim, &rope_part[(t * heads + h) * dim]);

    std::vector<std::vector<float>> rotated;
    for (switchyard::RopeLayout layout : layouts) {
      INFO("layout " << static_cast<int>(layout) << ", yarn " << yarn << ", rope_dim " << dim << ", tokens " << tokens
                     << ", heads " << heads << ", nope " << nope);
      std::vector<float> x = q;
      cpu::apply_rope(x.data() + nope, tokens, heads, token_stride, head_stride, dim, cos.data(), sin.data(), layout);
      std::vector<double> expected(tokens * heads * dim);
      cpu::reference::apply_rope(rope_part.data(), tokens, heads, dim, inv_freq, factor, positions.data(), layout,
                                 expected.data());
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t h = 0; h < heads; ++h) {
          const float* got = &x[t * token_stride + h * head_stride];
          const float* before = &q[t * token_stride + h * head_stride];
          CHECK(std::equal(got, got + nope, before));
          for (int j = 0; j < half; ++j) {
            const bool pairs_in = layout != switchyard::RopeLayout::half_split;
            const double a = before[nope + (pairs_in ? 2 * j : j)],
                         b = before[nope + (pairs_in ? 2 * j + 1 : j + half)];
            const double angle = static_cast<double>(positions[t]) * inv_freq[j];
            const double bound =
                (std::fabs(a) + std::fabs(b)) * factor * (std::fabs(angle) * (delta[j] + kUnit) + 6 * kUnit);
            for (int i = 0; i < dim; ++i) {
              const bool in_pair = layout == switchyard::RopeLayout::interleaved ? i / 2 == j : i % half == j;
              if (!in_pair) continue;
              INFO("token " << t << ", head " << h << ", element " << i);
              CHECK(std::fabs(got[nope + i] - expected[(t * heads + h) * dim + i]) <= bound);
            }
          }
        }
      rotated.push_back(x);
    }
    // Same pairs, same rounding: interleaved output is the half-split output re-interleaved.
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h)
        for (int j = 0; j < half; ++j) {
          const std::int64_t base = t * token_stride + h * head_stride + nope;
          CHECK(rotated[2][base + 2 * j] == rotated[1][base + j]);
          CHECK(rotated[2][base + 2 * j + 1] == rotated[1][base + j + half]);
        }
  }
  float x[4] = {1, 2, 3, 4};
  CHECK_THROWS_AS(cpu::apply_rope(x, 1, 1, 4, 4, 3, x, x, switchyard::RopeLayout::half_split), std::invalid_argument);
}
