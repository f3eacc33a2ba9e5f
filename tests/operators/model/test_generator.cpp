// generate() (operators/model/generator.h) on the deepseek_v3 fidelity fixture: the greedy continuation is
// transformers' (the fixture's reference), every token reaches on_token in order as it is chosen,
// and generation ends after a stop token (which it keeps) or at max_new_tokens. On the CPU, and on a
// GPU with the hybrid profile, where greedy decode steps follow each other on the device
// (CausalLM::decode_greedy queues a step ahead of the token it waits for).
#include "tests/fidelity_support.h"

#include <algorithm>

#include "operators/model/generator.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "tests/cuda_test_support.h"
#endif

using namespace switchyard;
using namespace switchyard::testing;

namespace {

GenerationResult generate_seen(CausalLM& model, const Reference& ref, const GenerationOptions& options) {
  std::vector<std::int32_t> seen;
  GenerationResult result = generate(model, ref.prompt, options, [&](std::int32_t id) {
    seen.push_back(id);
    return true;
  });
  CHECK(seen == result.tokens);
  CHECK(result.stats.prompt_tokens == static_cast<std::int64_t>(ref.prompt.size()));
  CHECK(result.stats.generated_tokens == static_cast<std::int64_t>(result.tokens.size()) - 1);
  return result;
}

void check_generate(CausalLM& model, const Reference& ref) {
  const auto n = static_cast<int>(ref.generated.size());
  REQUIRE(n >= 8);
  GenerationOptions options;
  options.sampling.temperature = 0;  // greedy
  options.max_new_tokens = n;
  const GenerationResult all = generate_seen(model, ref, options);
  CHECK(all.tokens == ref.generated);
  CHECK(all.finish == FinishReason::length);

  // The caller says stop at its 5th token: five tokens, the caller's reason, whichever way the steps run.
  int calls = 0;
  const GenerationResult told = generate(model, ref.prompt, options, [&](std::int32_t) { return ++calls < 5; });
  CHECK(told.tokens == std::vector<std::int32_t>(ref.generated.begin(), ref.generated.begin() + 5));
  CHECK(told.finish == FinishReason::caller);
  CHECK(calls == 5);

  // A stop token first chosen at step k >= 3: the tokens up to it, and no more.
  int k = 3;
  auto seen_before = [&](int i) {
    return std::find(ref.generated.begin(), ref.generated.begin() + i, ref.generated[i]) != ref.generated.begin() + i;
  };
  while (k < n - 1 && seen_before(k)) ++k;
  REQUIRE(!seen_before(k));
  options.stop_tokens = {ref.generated[k]};
  INFO("stop token " << ref.generated[k] << " at step " << k);
  const GenerationResult stopped = generate_seen(model, ref, options);
  CHECK(stopped.tokens == std::vector<std::int32_t>(ref.generated.begin(), ref.generated.begin() + k + 1));
  CHECK(stopped.finish == FinishReason::stop_token);

  // The prompt's own choice as the stop token, then a limit of one token: the prefill's token only.
  options.stop_tokens = {ref.generated[0]};
  CHECK(generate_seen(model, ref, options).tokens == std::vector<std::int32_t>{ref.generated[0]});
  options.stop_tokens.clear();
  options.max_new_tokens = 1;
  CHECK(generate_seen(model, ref, options).tokens == std::vector<std::int32_t>{ref.generated[0]});
}

// KvPrefix: a second generation whose prompt extends the first's context prefills only the new
// part and continues exactly as the fixture's greedy continuation; a prompt that leaves the
// cached ids early reuses only the common start, and answers as a run without reuse does.
void check_reuse(CausalLM& model, const Reference& ref) {
  const auto n = static_cast<int>(ref.generated.size());
  GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = n;
  KvPrefix cache;
  options.reuse = &cache;
  const GenerationResult first = generate(model, ref.prompt, options);
  CHECK(first.stats.cached_tokens == 0);
  CHECK(first.tokens == ref.generated);
  std::vector<std::int32_t> held(ref.prompt.begin(), ref.prompt.end());
  held.insert(held.end(), ref.generated.begin(), ref.generated.end() - 1);
  CHECK(cache.ids == held);
  // The next turn: the prompt and the first m tokens of the answer.
  const int m = n / 2;
  std::vector<std::int32_t> turn(ref.prompt.begin(), ref.prompt.end());
  turn.insert(turn.end(), ref.generated.begin(), ref.generated.begin() + m);
  options.max_new_tokens = n - m;
  const GenerationResult next = generate(model, turn, options);
  CHECK(next.stats.cached_tokens == static_cast<std::int64_t>(turn.size()) - 1);  // the last token runs
  CHECK(next.tokens == std::vector<std::int32_t>(ref.generated.begin() + m, ref.generated.end()));
  // Leaving the cached ids after 3 tokens: 3 reused, and the answer of a run that reuses nothing.
  std::vector<std::int32_t> other(ref.prompt.begin(), ref.prompt.begin() + 3);
  for (std::size_t i = 3; i < ref.prompt.size(); ++i) other.push_back((ref.prompt[i] * 7 + 11) % static_cast<std::int32_t>(model.vocab_size()));
  REQUIRE(other[3] != turn[3]);
  options.max_new_tokens = 6;
  const GenerationResult reused = generate(model, other, options);
  CHECK(reused.stats.cached_tokens == 3);
  GenerationOptions plain = options;
  plain.reuse = nullptr;
  const GenerationResult fresh = generate(model, other, plain);
  CHECK(fresh.stats.cached_tokens == 0);
  CHECK(reused.tokens == fresh.tokens);
  // The same prompt again: the whole prompt from the cache, its last token's choice too (the run
  // without reuse left the same ids there, but the cache cannot know: it still holds what `reused`
  // left).
  const GenerationResult again = generate(model, other, options);
  CHECK(again.stats.cached_tokens == static_cast<std::int64_t>(other.size()));
  CHECK(again.tokens == fresh.tokens);
  // Sampled with a seed: the same request twice answers the same, the second from the first's
  // logits; a prompt one token shorter runs its last token.
  GenerationOptions sampled = options;
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.top_p = 0.95f;
  sampled.seed = 11;
  sampled.max_new_tokens = 8;
  const GenerationResult s1 = generate(model, other, sampled);
  CHECK(s1.stats.cached_tokens == static_cast<std::int64_t>(other.size()) - 1);  // a greedy run left only an id
  const GenerationResult s2 = generate(model, other, sampled);
  CHECK(s2.stats.cached_tokens == static_cast<std::int64_t>(other.size()));
  CHECK(s2.tokens == s1.tokens);
  const std::vector<std::int32_t> shorter(other.begin(), other.end() - 1);
  const GenerationResult s3 = generate(model, shorter, sampled);
  CHECK(s3.stats.cached_tokens == static_cast<std::int64_t>(shorter.size()) - 1);
  CHECK(cache.prompt_size == shorter.size());
  CHECK(cache.greedy_id == -1);
  CHECK(cache.logits.size() == static_cast<std::size_t>(model.vocab_size()));
}

}  // namespace

TEST_CASE("generate: a KV prefix from the generation before is reused, and only it (CPU)") {
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  Loaded l = load("deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml");
  check_reuse(*l.model, ref);
}

TEST_CASE("generate: a repetition penalty changes the greedy choice exactly as a plain loop over the logits does (CPU)") {
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  Loaded l = load("deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml");
  CausalLM& model = *l.model;
  for (const float penalty : {1.8f, 0.6f}) {
    INFO("penalty " << penalty);
    GenerationOptions options;
    options.sampling.temperature = 0;
    options.sampling.repetition_penalty = penalty;
    options.max_new_tokens = 12;
    const std::vector<std::int32_t> got = generate(model, ref.prompt, options).tokens;
    // The reference: the model's logits, transformers' penalty over the prompt and the output so far, argmax.
    std::vector<std::int32_t> seen(ref.prompt.begin(), ref.prompt.end()), expected;
    std::vector<float> logits = model.forward(ref.prompt, 0);
    auto position = static_cast<std::int64_t>(ref.prompt.size());
    for (int i = 0; i < options.max_new_tokens; ++i) {
      std::vector<std::int32_t> distinct = seen;
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      for (std::int32_t id : distinct) logits[id] = logits[id] < 0 ? logits[id] * penalty : logits[id] / penalty;
      const std::int32_t next = cpu::argmax(logits.data(), model.vocab_size());
      expected.push_back(next);
      seen.push_back(next);
      if (i + 1 < options.max_new_tokens) logits = model.forward(std::span(&next, 1), position++);
    }
    CHECK(got == expected);
    // Penalised, the continuation leaves transformers' plain greedy one (the fixture's).
    const std::size_t n = std::min(ref.generated.size(), got.size());
    if (penalty > 1) CHECK(std::vector<std::int32_t>(got.begin(), got.begin() + n) != std::vector<std::int32_t>(ref.generated.begin(), ref.generated.begin() + n));
  }
}

TEST_CASE("generate: the greedy continuation, each token as it comes, stop tokens and the token limit (CPU)") {
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  Loaded l = load("deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml");
  CHECK_FALSE(l.model->chains_decode_steps());
  check_generate(*l.model, ref);
}

#if SWITCHYARD_HAVE_CUDA
TEST_CASE("generate: the same with greedy decode steps chained on a GPU (hybrid profile)") {
  if (no_gpu()) return;
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  Loaded l = load("deepseek_v3", "DeepSeek-V3-Chat.yaml");
  REQUIRE(l.model->chains_decode_steps());
  check_generate(*l.model, ref);
  check_reuse(*l.model, ref);
}
#endif
