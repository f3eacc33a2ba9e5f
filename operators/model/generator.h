#pragma once
// Generation: prefill the prompt, then decode one token at a time through the KV cache, sampling
// each next token; timings as ktransformers and ollama users know them.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/trace.h"
#include "operators/model/causal_lm.h"
#include "operators/model/generation_stats.h"
#include "operators/cpu/kernels/sampling.h"

namespace switchyard {

// What the model's KV cache holds from the generations before: the ids at positions [0, size()).
// A generation given one runs only the prompt past its longest common prefix with these ids (and
// at least the prompt's last token, whose logits start the answer), then leaves the cache's new
// contents here: a chat's next turn, or a server's next request with the same system prompt,
// prefills only what is new. Empty: nothing reusable (a new model, or after a failed run). It is
// right only while every forward pass on the model goes through generations that share it.
struct KvPrefix {
  std::vector<std::int32_t> ids;
  // What the last generation's prompt gave at its last token: its logits, or for a greedy run the
  // id alone (on a GPU only the id comes back). The same prompt again takes this instead of running
  // that token alone, which could differ in its last bits from the prompt's run: a prefill's many
  // tokens and one token may multiply differently (cpu::linear_rounds_x), and a sampled choice near
  // a boundary follows such bits. prompt_size 0: nothing kept.
  std::size_t prompt_size = 0;
  std::vector<float> logits;
  std::int32_t greedy_id = -1;
};

struct GenerationOptions {
  Tracer* tracer = nullptr;  // prefill / decode_step ranges and profile steps
  KvPrefix* reuse = nullptr;  // the model's cache between generations; nullptr: prefill the whole prompt
  int max_new_tokens = 32;
  cpu::SamplingParams sampling;  // temperature <= 0: greedy
  std::uint64_t seed = 0;
  std::vector<std::int32_t> stop_tokens;  // generation ends after emitting one of these
};

// Why a generation ended: max_new_tokens reached, a stop id emitted (kept as the last token), or
// the caller's on_token said stop (a stop string, a client gone).
enum class FinishReason { length, stop_token, caller };

struct GenerationResult {
  std::vector<std::int32_t> tokens;  // generated ids, prompt excluded
  GenerationStats stats;
  FinishReason finish = FinishReason::length;
};

// The ranges of the generation options, named by their command-line flags; outside them an
// InputError (exit 2), which needs no model, so a command checks them before any work:
//   --max_new_tokens 1 to 2^31 - 1 (the context bounds it further, in check_generation);
//   --temperature a finite number >= 0 (0: greedy); --top_k >= 0 (0: all tokens);
//   --top_p from 0 to 1 (1: all tokens). NaN and infinities are refused by name.
void check_generation_options(const GenerationOptions& options);

// Throws InputError when generate would refuse the request (check_generation_options, an empty
// prompt, an id outside the vocabulary, prompt + max_new_tokens past the model's context), before
// any work: callers that print a header before the tokens check first.
void check_generation(const CausalLM& model, std::span<const std::int32_t> prompt, const GenerationOptions& options);

// check_generation, then the run. `on_token` sees each generated id as soon as it is chosen and
// returns whether to go on; the step that may already run on the device when it says stop is
// discarded.
GenerationResult generate(CausalLM& model, std::span<const std::int32_t> prompt, const GenerationOptions& options,
                          const std::function<bool(std::int32_t)>& on_token = {});

}  // namespace switchyard
