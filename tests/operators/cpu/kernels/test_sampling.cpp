// Sampling (operators/cpu/kernels/sampling.h): greedy is argmax, top-k = 1 is greedy, seeds repeat, the
// sampled set is transformers' (literal warpers in the reference), top-p draws stay in the
// nucleus, and draw frequencies fit the distribution by a chi-square test.
//
// Chi-square: N draws, cells with expected count < 5 pooled; the statistic must stay below the
// Wilson-Hilferty approximation of the chi-square quantile with z = 5 (false alarm ~3e-7 per
// check). Probabilities from the kernel and the reference agree to 1e-9 relative (double).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "tests/operators/cpu/kernels/reference.h"
#include "operators/cpu/kernels/sampling.h"
#include "tests/test_seed.h"

using switchyard::testing::test_seed;

namespace cpu = switchyard::cpu;

namespace {

std::vector<float> random_logits(std::int64_t vocab, float spread, std::mt19937& random) {
  std::normal_distribution<float> logit(0, spread);
  std::vector<float> logits(vocab);
  for (float& v : logits) v = logit(random);
  return logits;
}

// Upper quantile of chi-square with `df` degrees of freedom at normal deviate z (Wilson-Hilferty).
double chi_square_quantile(int df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Draws `n` tokens and tests their counts against `probabilities` ([vocab]).
void check_frequencies(cpu::Sampler& sampler, const std::vector<float>& logits, const cpu::SamplingParams& params,
                       const std::vector<double>& probabilities, int n) {
  std::vector<double> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    const std::int32_t token = sampler.sample(logits.data(), static_cast<std::int64_t>(logits.size()), params);
    REQUIRE(token >= 0);
    REQUIRE(static_cast<std::size_t>(token) < logits.size());
    REQUIRE_MESSAGE(probabilities[token] > 0, "sampled token " << token << " has probability 0");
    counts[token] += 1;
  }
  // Pool the rarest cells until each pooled cell expects at least 5 draws.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < probabilities.size(); ++i)
    if (probabilities[i] > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return probabilities[a] < probabilities[b]; });
  double statistic = 0, pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (std::size_t i : order) {
    pooled_expected += n * probabilities[i];
    pooled_observed += counts[i];
    if (pooled_expected < 5) continue;
    statistic += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    pooled_expected = pooled_observed = 0;
    ++cells;
  }
  if (cells < 2) return;  // (a leftover pool under 5 expected is dropped; its draws are few)
  const double limit = chi_square_quantile(cells - 1, 5.0);
  INFO("chi-square " << statistic << " over " << cells << " cells, limit " << limit);
  CHECK(statistic < limit);
}

}  // namespace

TEST_CASE("cpu kernels: greedy sampling is argmax, lowest index among equals; top-k 1 is greedy") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  cpu::Sampler sampler(random());
  for (int round = 0; round < 50; ++round) {
    std::vector<float> logits = random_logits(std::uniform_int_distribution<int>(1, 5000)(random), 3, random);
    if (round % 2 && logits.size() > 3) logits[logits.size() / 2] = logits.back() = 50.0f;  // a tie for the top
    const auto expected = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const auto vocab = static_cast<std::int64_t>(logits.size());
    CHECK(cpu::argmax(logits.data(), vocab) == expected);
    CHECK(sampler.sample(logits.data(), vocab, {0.0f, 0, 1.0f}) == expected);
    CHECK(sampler.sample(logits.data(), vocab, {1.5f, 1, 1.0f}) == expected);
    CHECK(sampler.sample(logits.data(), vocab, {0.7f, 1, 0.5f}) == expected);
  }
}

TEST_CASE("cpu kernels: a sampler's draws repeat for its seed") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::vector<float> logits = random_logits(1000, 1, random);
  const std::uint64_t sampler_seed = random();
  const cpu::SamplingParams settings[] = {{1.0f, 0, 1.0f}, {0.8f, 50, 1.0f}, {1.2f, 0, 0.9f}};
  for (const cpu::SamplingParams& params : settings) {
    cpu::Sampler first(sampler_seed), second(sampler_seed);
    std::vector<std::int32_t> a, b;
    for (int i = 0; i < 200; ++i) {
      a.push_back(first.sample(logits.data(), 1000, params));
      b.push_back(second.sample(logits.data(), 1000, params));
    }
    CHECK(a == b);
    CHECK(std::count(a.begin(), a.end(), a.front()) < 200);  // it does sample
  }
}

TEST_CASE("cpu kernels: the sampled set and its probabilities are transformers' warpers") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> temperature(0.3f, 2.0f), top_p(0.05f, 0.99f);
  for (int round = 0; round < 60; ++round) {
    // Every tenth round a wide, flat vocabulary: nuclei of thousands of tokens.
    const bool flat = round % 10 == 9;
    const std::int64_t vocab = flat ? 20000 : std::uniform_int_distribution<std::int64_t>(2, 3000)(random);
    const std::vector<float> logits = random_logits(vocab, flat ? 0.3f : 2.5f, random);
    cpu::SamplingParams params{temperature(random), 0, 1.0f};
    if (round % 3 != 1) params.top_p = top_p(random);
    if (round % 3 != 0) params.top_k = std::uniform_int_distribution<int>(2, 100)(random);
    INFO("vocab " << vocab << ", temperature " << params.temperature << ", top_k " << params.top_k << ", top_p "
                  << params.top_p);
    const std::vector<double> expected = cpu::reference::sampling_probabilities(logits.data(), vocab, params);
    const std::vector<cpu::TokenProbability> got = cpu::sampling_distribution(logits.data(), vocab, params);
    CHECK(got.size() ==
          static_cast<std::size_t>(std::count_if(expected.begin(), expected.end(), [](double p) { return p > 0; })));
    double previous = 1;
    for (const cpu::TokenProbability& t : got) {
      INFO("token " << t.token);
      CHECK(t.probability == doctest::Approx(expected[t.token]).epsilon(1e-9));
      CHECK(t.probability <= previous);  // most likely first
      previous = t.probability;
    }
    // Top-p: every draw lies in the nucleus.
    cpu::Sampler sampler(random());
    for (int i = 0; i < 300; ++i) REQUIRE(expected[sampler.sample(logits.data(), vocab, params)] > 0);
  }
}

TEST_CASE("cpu kernels: sampling frequencies fit the distribution (chi-square)") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const cpu::SamplingParams settings[] = {
      {0.7f, 0, 1.0f}, {1.3f, 10, 1.0f}, {1.0f, 0, 0.8f}, {0.9f, 12, 0.9f}, {1.0f, 0, 1.0f}};
  for (const cpu::SamplingParams& params : settings) {
    INFO("temperature " << params.temperature << ", top_k " << params.top_k << ", top_p " << params.top_p);
    const std::vector<float> logits = random_logits(24, 1.5, random);
    const std::vector<double> probabilities = cpu::reference::sampling_probabilities(logits.data(), 24, params);
    cpu::Sampler sampler(random());
    check_frequencies(sampler, logits, params, probabilities, 100000);
  }
}

TEST_CASE("cpu kernels: min-p keeps the tokens within min_p of the most likely, after top-k and top-p") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> temperature(0.3f, 2.0f), top_p(0.3f, 0.99f), min_p(0.001f, 0.5f);
  for (int round = 0; round < 40; ++round) {
    const std::int64_t vocab = std::uniform_int_distribution<std::int64_t>(2, 3000)(random);
    const std::vector<float> logits = random_logits(vocab, 2.5f, random);
    cpu::SamplingParams params{temperature(random), 0, 1.0f};
    params.min_p = min_p(random);
    if (round % 2) params.top_p = top_p(random);
    if (round % 3 == 0) params.top_k = std::uniform_int_distribution<int>(2, 100)(random);
    INFO("vocab " << vocab << ", temperature " << params.temperature << ", top_k " << params.top_k << ", top_p "
                  << params.top_p << ", min_p " << params.min_p);
    const std::vector<double> expected = cpu::reference::sampling_probabilities(logits.data(), vocab, params);
    const std::vector<cpu::TokenProbability> got = cpu::sampling_distribution(logits.data(), vocab, params);
    CHECK(got.size() ==
          static_cast<std::size_t>(std::count_if(expected.begin(), expected.end(), [](double p) { return p > 0; })));
    for (const cpu::TokenProbability& t : got) CHECK(t.probability == doctest::Approx(expected[t.token]).epsilon(1e-9));
    // min_p alone narrows the set: every kept token is at least min_p of the best.
    for (const cpu::TokenProbability& t : got) CHECK(t.probability >= params.min_p * got.front().probability * (1 - 1e-12));
    cpu::Sampler sampler(random());
    for (int i = 0; i < 200; ++i) REQUIRE(expected[sampler.sample(logits.data(), vocab, params)] > 0);
  }
}

TEST_CASE("cpu kernels: the repetition penalty divides seen positive logits and multiplies negative ones, once each") {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -4.0f};
  const std::vector<std::int32_t> seen = {0, 1, 1, 4, 4, 4, 99, -3};  // repeats count once; out of range ignored
  cpu::RepetitionPenalty penalty(5, 2.0f);
  penalty.see(seen);
  penalty.see(std::vector<std::int32_t>{1, 4});  // seen again, in a later step: still once
  penalty.apply(logits.data());
  CHECK(logits == std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f, -8.0f});
  std::vector<float> same = {1.0f, -1.0f};
  cpu::RepetitionPenalty none(2, 1.0f);
  none.see(std::vector<std::int32_t>{0, 1});
  none.apply(same.data());
  CHECK(same == std::vector<float>{1.0f, -1.0f});
}
