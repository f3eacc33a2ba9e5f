#include "operators/cpu/kernels/sampling.h"

#include <algorithm>
#include <cmath>

namespace switchyard::cpu {
namespace {

// Top-p ranks only the most likely tokens, this many at first, four times more while their mass
// falls short: a 129k vocabulary is not sorted for a nucleus of a few hundred.
constexpr std::size_t kFirstRanked = 1024;

// A uniform double in [0, 1) from the top 53 bits of one draw.
double uniform(std::mt19937_64& random) { return static_cast<double>(random() >> 11) * 0x1.0p-53; }

bool more_likely(const TokenProbability& a, const TokenProbability& b) {
  return a.probability > b.probability || (a.probability == b.probability && a.token < b.token);
}

// The tokens that top-k keeps (all when top_k is off), each with its unnormalised softmax weight
// exp((logit - max) / temperature), in no particular order. Returns the sum of the weights.
double weigh_tokens(const float* logits, std::int64_t vocab, const SamplingParams& params,
                    std::vector<TokenProbability>& tokens) {
  tokens.resize(vocab);
  for (std::int64_t i = 0; i < vocab; ++i) tokens[i] = {static_cast<std::int32_t>(i), logits[i]};  // logit, for now
  if (params.top_k > 0 && params.top_k < vocab) {
    // As transformers' TopKLogitsWarper: keep every token not below the k-th largest logit.
    std::nth_element(tokens.begin(), tokens.begin() + (params.top_k - 1), tokens.end(), more_likely);
    const double threshold = tokens[params.top_k - 1].probability;
    tokens.erase(std::partition(tokens.begin() + params.top_k, tokens.end(),
                                [threshold](const TokenProbability& t) { return t.probability >= threshold; }),
                 tokens.end());
  }
  const double max_logit = std::max_element(tokens.begin(), tokens.end(), [](const auto& a, const auto& b) {
                             return a.probability < b.probability;
                           })->probability;
  double sum = 0;
  for (TokenProbability& t : tokens) sum += t.probability = std::exp((t.probability - max_logit) / params.temperature);
  return sum;
}

// Sorts the nucleus to the front, most likely first, and drops the rest: tokens are kept while the
// weight before them is below top_p * total. Returns the kept weight.
double keep_nucleus(std::vector<TokenProbability>& tokens, double top_p, double total) {
  const double limit = top_p * total;
  for (std::size_t ranked = std::min(kFirstRanked, tokens.size());; ranked = std::min(4 * ranked, tokens.size())) {
    std::partial_sort(tokens.begin(), tokens.begin() + ranked, tokens.end(), more_likely);
    double before = 0;
    std::size_t n = 0;
    while (n < ranked && (n == 0 || before < limit)) before += tokens[n++].probability;
    if (before >= limit || ranked == tokens.size()) {
      tokens.resize(n);
      return before;
    }
  }
}

}  // namespace

bool is_greedy(const SamplingParams& params) { return params.temperature <= 0.0f || params.top_k == 1; }

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
  std::vector<TokenProbability> tokens;
  double sum = weigh_tokens(logits, vocab, params, tokens);
  // Top-p measures mass among the tokens top-k kept, as transformers' TopPLogitsWarper does.
  if (params.top_p < 1.0f)
    sum = keep_nucleus(tokens, params.top_p, sum);
  else
    std::sort(tokens.begin(), tokens.end(), more_likely);
  if (params.min_p > 0.0f) {
    // Relative to the most likely token, which top-k and top-p always keep: the ratio of weights
    // is the ratio of probabilities.
    const double floor = static_cast<double>(params.min_p) * tokens.front().probability;
    std::size_t keep = 1;
    while (keep < tokens.size() && tokens[keep].probability >= floor) ++keep;
    tokens.resize(keep);
    sum = 0;
    for (const TokenProbability& t : tokens) sum += t.probability;
  }
  for (TokenProbability& t : tokens) t.probability /= sum;
  return tokens;
}

RepetitionPenalty::RepetitionPenalty(std::int64_t vocab, float penalty)
    : penalty_(penalty), seen_(static_cast<std::size_t>(std::max<std::int64_t>(vocab, 0)), 0) {}

void RepetitionPenalty::see(std::span<const std::int32_t> ids) {
  for (const std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= seen_.size() || seen_[static_cast<std::size_t>(id)]) continue;
    seen_[static_cast<std::size_t>(id)] = 1;
    distinct_.push_back(id);
  }
}

void RepetitionPenalty::apply(float* logits) const {
  if (penalty_ == 1.0f) return;
  for (const std::int32_t id : distinct_) {
    float& v = logits[id];
    v = v < 0 ? v * penalty_ : v / penalty_;
  }
}

std::int32_t Sampler::sample(const float* logits, std::int64_t vocab, const SamplingParams& params) {
  if (is_greedy(params)) return argmax(logits, vocab);
  const bool truncated = (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0f || params.min_p > 0.0f;
  if (!truncated) {  // no ranking needed: walk the vocabulary in index order
    const float max_logit = logits[argmax(logits, vocab)];
    weights_.resize(vocab);
    double sum = 0;
    for (std::int64_t i = 0; i < vocab; ++i)
      sum += weights_[i] = std::exp((logits[i] - max_logit) / params.temperature);
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
