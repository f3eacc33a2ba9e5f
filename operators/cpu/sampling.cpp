#include "operators/cpu/sampling.h"

#include <algorithm>
#include <cmath>

namespace switchyard::cpu {
namespace {

bool is_greedy(const SamplingParams& params) { return params.temperature <= 0.0f || params.top_k == 1; }

// A uniform double in [0, 1) from the top 53 bits of one draw.
double uniform(std::mt19937_64& random) { return static_cast<double>(random() >> 11) * 0x1.0p-53; }

}  // namespace

std::int32_t argmax(const float* logits, std::int64_t vocab) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<std::int32_t>(best);
}

std::vector<TokenProbability> sampling_distribution(const float* logits, std::int64_t vocab,
                                                    const SamplingParams& params) {
  if (vocab <= 0) return {};
  if (is_greedy(params)) return {{argmax(logits, vocab), 1.0}};

  // Softmax of logits / temperature in double, most likely first.
  std::vector<TokenProbability> tokens(vocab);
  for (std::int64_t i = 0; i < vocab; ++i) tokens[i] = {static_cast<std::int32_t>(i), logits[i]};
  auto more_likely = [](const TokenProbability& a, const TokenProbability& b) {
    return a.probability > b.probability || (a.probability == b.probability && a.token < b.token);
  };
  if (params.top_k > 0 && params.top_k < vocab) {
    // As transformers' TopKLogitsWarper: keep every token not below the k-th largest logit.
    std::nth_element(tokens.begin(), tokens.begin() + (params.top_k - 1), tokens.end(), more_likely);
    const double threshold = tokens[params.top_k - 1].probability;
    const auto end = std::partition(tokens.begin() + params.top_k, tokens.end(),
                                    [threshold](const TokenProbability& t) { return t.probability >= threshold; });
    tokens.erase(end, tokens.end());
  }
  std::sort(tokens.begin(), tokens.end(), more_likely);

  const double max_logit = tokens.front().probability;
  double sum = 0;
  for (TokenProbability& t : tokens) {
    t.probability = std::exp((t.probability - max_logit) / params.temperature);
    sum += t.probability;
  }
  // Top-p counts mass over the whole vocabulary after top-k: the kept tokens are the whole of it.
  if (params.top_p < 1.0f) {
    const double limit = params.top_p * sum;
    double before = 0;
    std::size_t n = 0;
    while (n < tokens.size() && (n == 0 || before < limit)) before += tokens[n++].probability;
    tokens.resize(n);
    sum = before;
  }
  for (TokenProbability& t : tokens) t.probability /= sum;
  return tokens;
}

std::int32_t Sampler::sample(const float* logits, std::int64_t vocab, const SamplingParams& params) {
  if (is_greedy(params)) return argmax(logits, vocab);
  const bool truncated = (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0f;
  if (!truncated) {  // no ranking needed: walk the vocabulary in index order
    const float max_logit = logits[argmax(logits, vocab)];
    weights_.resize(vocab);
    double sum = 0;
    for (std::int64_t i = 0; i < vocab; ++i) sum += weights_[i] = std::exp((logits[i] - max_logit) / params.temperature);
    const double target = uniform(random_) * sum;
    double cumulative = 0;
    for (std::int64_t i = 0; i < vocab; ++i) {
      cumulative += weights_[i];
      if (target < cumulative) return static_cast<std::int32_t>(i);
    }
    return static_cast<std::int32_t>(vocab - 1);
  }
  const std::vector<TokenProbability> tokens = sampling_distribution(logits, vocab, params);
  const double u = uniform(random_);
  double cumulative = 0;
  for (const TokenProbability& t : tokens) {
    cumulative += t.probability;
    if (u < cumulative) return t.token;
  }
  return tokens.back().token;  // u within rounding of 1
}

}  // namespace switchyard::cpu
