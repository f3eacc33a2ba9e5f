#pragma once
// Choosing the next token from a row of logits: greedy, or sampling with temperature, top-k, top-p
// (nucleus) and min-p, applied in that order as transformers' generate() does
// (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper); the repetition
// penalty (RepetitionPenaltyLogitsProcessor) changes the logits before any of them. Deterministic for a seed: std::mt19937_64 is specified
// exactly by the standard, and the uniform draw is made from its bits here, not by a library
// distribution.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace switchyard::cpu {

struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy
  int top_k = 0;             // keep the top_k most likely tokens (and any tied with the last); <= 0: all
  float top_p = 1.0f;        // keep the smallest most-likely set with mass >= top_p; >= 1: all
  float min_p = 0.0f;        // then drop tokens less likely than min_p times the most likely; 0: none
  float repetition_penalty = 1.0f;  // RepetitionPenalty's factor (generate applies it); 1: none
};

// transformers' repetition penalty: every distinct id seen so far (the prompt and the tokens
// generated) has its logit divided by `penalty` where positive, multiplied where negative. Ids
// outside [0, vocab) are ignored. Keeps the distinct ids and a mask of them, so that a step costs
// the ids seen, not the vocabulary.
class RepetitionPenalty {
 public:
  RepetitionPenalty(std::int64_t vocab, float penalty);
  void see(std::span<const std::int32_t> ids);
  void apply(float* logits) const;  // logits: [vocab]

 private:
  float penalty_;
  std::vector<std::uint8_t> seen_;  // [vocab]: 1 where `distinct_` holds the id
  std::vector<std::int32_t> distinct_;
};

// Whether these parameters choose greedily (temperature <= 0 or top_k == 1): the argmax below.
bool is_greedy(const SamplingParams& params);

// The index of the largest logit; the lowest index among equals (as torch.argmax).
std::int32_t argmax(const float* logits, std::int64_t vocab);

// The tokens sampling may return, with their probabilities after temperature, top-k and top-p,
// most likely first (ties: lower index first), summing to 1. Greedy gives the argmax alone.
// top-p keeps a token while the mass of the tokens before it is below top_p, which is
// transformers' rule (drop a token when the mass of it and all less likely ones is <= 1 - top_p)
// up to rounding; at least one token is always kept.
struct TokenProbability {
  std::int32_t token;
  double probability;
};
std::vector<TokenProbability> sampling_distribution(const float* logits, std::int64_t vocab,
                                                    const SamplingParams& params);

class Sampler {
 public:
  explicit Sampler(std::uint64_t seed) : random_(seed) {}

  // logits: [vocab] f32. One token, drawn from sampling_distribution.
  std::int32_t sample(const float* logits, std::int64_t vocab, const SamplingParams& params);

 private:
  std::mt19937_64 random_;
  std::vector<double> weights_;  // [vocab] scratch for sampling without top-k or top-p
};

}  // namespace switchyard::cpu
