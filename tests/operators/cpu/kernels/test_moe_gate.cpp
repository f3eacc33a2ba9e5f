// MoE routing (operators/cpu/kernels/moe_gate.h): every preset against the sorting reference on random
// logits, the group-limited schemes' promise never to route outside the kept groups, and the one
// case where transformers' 0.0 fill does.
//
// Inputs are redrawn until rounding cannot reorder a token's routing values: for softmax gates
// (monotonic in the logits, groups by max) every two logits differ by at least 1e-4, far above the
// relative error of an f32 softmax (~1e-6); for sigmoid gates every two choices and every two group
// scores differ by at least 1e-5, far above f32 rounding (~1e-7). So the kernel (f32) and the
// reference (double) must make the same decisions. Then expert ids must be identical, in order, and
// |w - w_ref| <= 2e-6 * |w_ref| + 1e-7 (a few f32 roundings in softmax/sigmoid and the sums).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "operators/cpu/kernels/moe_gate.h"
#include "tests/operators/cpu/kernels/reference.h"
#include "tests/gate_presets.h"
#include "tests/gate_test_support.h"
#include "tests/test_seed.h"

using switchyard::testing::test_seed;

namespace cpu = switchyard::cpu;
namespace presets = switchyard::gate_presets;

namespace {

using switchyard::gate_testing::separated;
using switchyard::gate_testing::well_separated;

std::vector<float> random_logits(const switchyard::MoeGateConfig& c, std::int64_t tokens, std::mt19937& random) {
  std::normal_distribution<float> logit(0, 2);
  std::vector<float> logits(tokens * c.n_experts);
  for (std::int64_t t = 0; t < tokens; ++t) {
    float* row = logits.data() + t * c.n_experts;
    for (int attempt = 0;; ++attempt) {
      // Redraw until rounding cannot reorder the choices; a config where that never happens is a bug.
      REQUIRE_MESSAGE(attempt < 10000, "no well-separated logits after 10000 draws");
      for (int e = 0; e < c.n_experts; ++e) row[e] = logit(random);
      if (well_separated(c, row)) break;
    }
  }
  return logits;
}

void check_against_reference(const switchyard::MoeGateConfig& c, std::int64_t tokens, std::mt19937& random) {
  const std::vector<float> logits = random_logits(c, tokens, random);
  std::vector<std::int32_t> ids(tokens * c.top_k);
  std::vector<float> weights(tokens * c.top_k);
  cpu::moe_gate(c, logits.data(), tokens, ids.data(), weights.data());
  std::vector<std::int32_t> expected_ids;
  std::vector<double> expected_weights;
  cpu::reference::moe_gate(c, logits.data(), tokens, expected_ids, expected_weights);
  CHECK(ids == expected_ids);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    INFO("token " << i / c.top_k << ", slot " << i % c.top_k);
    CHECK(std::fabs(weights[i] - expected_weights[i]) <= 2e-6 * std::fabs(expected_weights[i]) + 1e-7);
  }
}

std::vector<float> random_bias(int n, float low, float high, std::mt19937& random) {
  std::uniform_real_distribution<float> value(low, high);
  std::vector<float> bias(n);
  for (float& b : bias) b = value(random);
  return bias;
}

}  // namespace

TEST_CASE("cpu kernels: moe_gate presets match the reference for DeepSeek-V3, V2, Qwen3-MoE and Mixtral") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::vector<float> bias256 = random_bias(256, -0.1f, 0.1f, random);
  const std::vector<float> bias64 = random_bias(64, -0.3f, 0.3f, random);
  SUBCASE("DeepSeek-V3 noaux_tc: 256 experts, 8 groups, 4 kept, top-8, normalised, scaled 2.5") {
    check_against_reference(presets::deepseek_v3_gate(256, 8, 8, 4, bias256.data(), true, 2.5f), 9, random);
  }
  SUBCASE("DeepSeek-V3 noaux_tc without normalisation, small") {
    check_against_reference(presets::deepseek_v3_gate(64, 6, 4, 2, bias64.data(), false, 1.5f), 9, random);
  }
  SUBCASE("DeepSeek-V2 greedy: 64 experts, top-6, scaled 16") {
    check_against_reference(presets::deepseek_v2_gate(64, 6, 0, 0, 16.0f), 9, random);
  }
  SUBCASE("DeepSeek-V2 group_limited_greedy: 160 experts, 8 groups, 3 kept, top-6") {
    check_against_reference(presets::deepseek_v2_gate(160, 6, 8, 3, 16.0f), 9, random);
  }
  SUBCASE("DeepSeek-V2 remote code: normalised instead of scaled") {
    switchyard::MoeGateConfig c = presets::deepseek_v2_gate(64, 6, 0, 0, 16.0f);
    c.normalize = true, c.normalize_epsilon = 1e-20f, c.scale_when_normalized = false;
    check_against_reference(c, 9, random);
  }
  SUBCASE("Qwen3-MoE: 128 experts, top-8, with and without norm_topk_prob") {
    check_against_reference(presets::qwen3_moe_gate(128, 8, true), 9, random);
    check_against_reference(presets::qwen3_moe_gate(128, 8, false), 9, random);
  }
  SUBCASE("Mixtral: 8 experts, top-2") { check_against_reference(presets::mixtral_gate(8, 2), 30, random); }
}

TEST_CASE("cpu kernels: moe_gate weights follow each model's rule") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::int64_t tokens = 20;
  const std::vector<float> bias = random_bias(256, -0.1f, 0.1f, random);
  const switchyard::MoeGateConfig v3 = presets::deepseek_v3_gate(256, 8, 8, 4, bias.data(), true, 2.5f);
  const std::vector<float> logits = random_logits(v3, tokens, random);
  std::vector<std::int32_t> ids(tokens * 8);
  std::vector<float> weights(tokens * 8);
  cpu::moe_gate(v3, logits.data(), tokens, ids.data(), weights.data());
  for (std::int64_t t = 0; t < tokens; ++t) {
    double sum = 0, score_sum = 0;
    for (int i = 0; i < 8; ++i) {
      sum += weights[t * 8 + i];
      score_sum += 1 / (1 + std::exp(-static_cast<double>(logits[t * 256 + ids[t * 8 + i]])));
    }
    CHECK(sum == doctest::Approx(2.5).epsilon(1e-6));  // normalised, then scaled
    // Weights are the sigmoid scores without the bias: their ratios are the scores' ratios.
    for (int i = 0; i < 8; ++i) {
      const double score = 1 / (1 + std::exp(-static_cast<double>(logits[t * 256 + ids[t * 8 + i]])));
      CHECK(weights[t * 8 + i] == doctest::Approx(2.5 * score / score_sum).epsilon(1e-6));
    }
  }
}

TEST_CASE("cpu kernels: group-limited routing never picks experts outside the kept groups") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::int64_t tokens = 500;
  // -inf fill (DeepSeek's inference code): for any choices, even all negative ones. 0.0 fill
  // (transformers): whenever choices are positive, which softmax scores and DeepSeek-V3's released
  // biases give. Kept groups come from the reference's own group ranking.
  struct Case {
    switchyard::MoeGateConfig config;
    std::vector<float> bias;
  };
  std::vector<Case> cases;
  for (const float fill : {-INFINITY, 0.0f}) {
    Case v3{switchyard::MoeGateConfig{}, random_bias(256, fill == 0.0f ? 0.0f : -2.0f, fill == 0.0f ? 0.2f : -0.5f, random)};
    v3.config = presets::deepseek_v3_gate(256, 8, 8, 4, nullptr, true, 2.5f);
    v3.config.masked_choice = fill;
    cases.push_back(v3);
    Case v2{presets::deepseek_v2_gate(160, 6, 8, 3, 16.0f), {}};
    v2.config.masked_choice = fill;
    cases.push_back(v2);
    Case tight{presets::deepseek_v3_gate(16, 4, 8, 2, nullptr, true, 1.0f), random_bias(16, -1.5f, -1.0f, random)};
    tight.config.masked_choice = -INFINITY;  // the kept groups hold exactly top_k experts
    cases.push_back(tight);
  }
  for (Case& c : cases) {
    if (!c.bias.empty()) c.config.score_correction_bias = c.bias.data();
    INFO("experts " << c.config.n_experts << ", groups " << c.config.n_group << ", kept " << c.config.topk_group
                    << ", fill " << c.config.masked_choice);
    const std::vector<float> logits = random_logits(c.config, tokens, random);
    std::vector<std::int32_t> ids(tokens * c.config.top_k), expected_ids;
    std::vector<float> weights(tokens * c.config.top_k);
    std::vector<double> expected_weights;
    std::vector<bool> kept;
    cpu::moe_gate(c.config, logits.data(), tokens, ids.data(), weights.data());
    cpu::reference::moe_gate(c.config, logits.data(), tokens, expected_ids, expected_weights, &kept);
    const int group_size = c.config.n_experts / c.config.n_group;
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::set<std::int32_t> distinct;
      for (int i = 0; i < c.config.top_k; ++i) {
        const std::int32_t id = ids[t * c.config.top_k + i];
        distinct.insert(id);
        REQUIRE(kept[t * c.config.n_group + id / group_size]);
      }
      CHECK(distinct.size() == static_cast<std::size_t>(c.config.top_k));
    }
  }
}

TEST_CASE("cpu kernels: with transformers' 0.0 fill, negative choices route outside the kept groups") {
  // 4 groups of 2. Sigmoid(0) = 0.5 everywhere; biases make every choice negative, group 0 least so
  // (-0.1 each), so group 0 is the one kept. Its choices (-0.1) lose to the masked experts' 0.0:
  // transformers picks experts 2 and 3 (lowest indices among the tied 0.0s). With -inf, 0 and 1.
  const std::vector<float> logits(8, 0.0f);
  const std::vector<float> bias = {-0.6f, -0.6f, -1.0f, -1.0f, -1.1f, -1.1f, -1.2f, -1.2f};
  switchyard::MoeGateConfig c = presets::deepseek_v3_gate(8, 2, 4, 1, bias.data(), false, 1.0f);
  std::int32_t ids[2];
  float weights[2];
  cpu::moe_gate(c, logits.data(), 1, ids, weights);
  CHECK(ids[0] == 2);
  CHECK(ids[1] == 3);
  CHECK(weights[0] == 0.5f);  // V3 gathers the unbiased, unmasked scores
  c.masked_choice = -INFINITY;
  cpu::moe_gate(c, logits.data(), 1, ids, weights);
  CHECK(ids[0] == 0);
  CHECK(ids[1] == 1);
}

TEST_CASE("cpu kernels: moe_gate ties go to the lower index") {
  const std::vector<float> logits = {1, 3, 3, 2, 3, 0};
  std::int32_t ids[2];
  float weights[2];
  cpu::moe_gate(presets::qwen3_moe_gate(6, 2, false), logits.data(), 1, ids, weights);
  CHECK(ids[0] == 1);
  CHECK(ids[1] == 2);
  CHECK(weights[0] == weights[1]);
}

TEST_CASE("cpu kernels: moe_gate refuses inconsistent configurations") {
  std::vector<float> logits(16, 0.5f);
  std::int32_t ids[16];
  float weights[16];
  CHECK_THROWS_AS(cpu::moe_gate(presets::mixtral_gate(8, 9), logits.data(), 1, ids, weights), std::invalid_argument);
  CHECK_THROWS_AS(cpu::moe_gate(presets::deepseek_v2_gate(16, 2, 3, 1, 1.0f), logits.data(), 1, ids, weights),
                  std::invalid_argument);  // 3 groups do not divide 16 experts
  CHECK_THROWS_AS(
      cpu::moe_gate(presets::deepseek_v3_gate(16, 2, 16, 4, nullptr, true, 1.0f), logits.data(), 1, ids, weights),
      std::invalid_argument);  // one expert per group has no top-2
  CHECK_THROWS_AS(
      cpu::moe_gate(presets::deepseek_v3_gate(16, 8, 8, 2, nullptr, true, 1.0f), logits.data(), 1, ids, weights),
      std::invalid_argument);  // 2 kept groups of 2 cannot supply 8 experts
}
