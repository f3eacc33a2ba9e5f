#include "operators/model/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace switchyard {
namespace {

// A float as the user may have written it: "nan", "inf", "-0.5", "2".
std::string float_text(float value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

void check_generation_options(const GenerationOptions& options) {
  if (options.max_new_tokens < 1)
    throw InputError("--max_new_tokens " + std::to_string(options.max_new_tokens) +
                     " is not a token count; give 1 or more");
  const cpu::SamplingParams& s = options.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0)
    throw InputError("--temperature " + float_text(s.temperature) + " is not a temperature; give a finite number >= 0 (0: greedy)");
  if (s.top_k < 0)
    throw InputError("--top_k " + std::to_string(s.top_k) + " is negative; give 0 (all tokens) or the tokens to keep");
  if (!(s.top_p >= 0 && s.top_p <= 1))  // NaN fails both comparisons
    throw InputError("--top_p " + float_text(s.top_p) + " is outside 0 to 1 (the probability mass kept; 1: all tokens)");
  if (!(s.min_p >= 0 && s.min_p <= 1))
    throw InputError("--min_p " + float_text(s.min_p) + " is outside 0 to 1 (relative to the most likely token; 0: off)");
  if (!std::isfinite(s.repetition_penalty) || !(s.repetition_penalty > 0))
    throw InputError("--repetition_penalty " + float_text(s.repetition_penalty) + " is not a positive finite factor (1: off)");
}

void check_generation(const CausalLM& model, std::span<const std::int32_t> prompt, const GenerationOptions& options) {
  check_generation_options(options);
  if (prompt.empty()) throw InputError("the prompt is empty; give at least one token id");
  model.check_token_ids(prompt);
  if (static_cast<std::int64_t>(prompt.size()) + options.max_new_tokens > model.max_context())
    throw InputError("prompt (" + std::to_string(prompt.size()) + " tokens) plus --max_new_tokens " +
                     std::to_string(options.max_new_tokens) + " exceeds --max_context " +
                     std::to_string(model.max_context()));
}

GenerationResult generate(CausalLM& model, std::span<const std::int32_t> prompt, const GenerationOptions& options,
                          const std::function<bool(std::int32_t)>& on_token) {
  using Clock = std::chrono::steady_clock;
  check_generation(model, prompt, options);
  GenerationResult result;
  cpu::Sampler sampler(options.seed);
  auto is_stop = [&](std::int32_t id) {
    return std::find(options.stop_tokens.begin(), options.stop_tokens.end(), id) != options.stop_tokens.end();
  };

  // Greedy choices are made where the head runs (on a GPU only the id comes back); sampling and
  // the repetition penalty take the logits.
  const bool penalised = options.sampling.repetition_penalty != 1.0f;
  const bool greedy = cpu::is_greedy(options.sampling) && !penalised;
  cpu::RepetitionPenalty penalty(model.vocab_size(), options.sampling.repetition_penalty);
  if (penalised) penalty.see(prompt);
  // The choice from a step's logits (a copy: the prompt's are kept for a repeat).
  auto choose = [&](std::vector<float> logits, std::span<const std::int32_t> ids, std::int64_t position) {
    if (penalised) {
      if (position > 0) penalty.see(ids);
      penalty.apply(logits.data());
      if (cpu::is_greedy(options.sampling)) return cpu::argmax(logits.data(), model.vocab_size());
    }
    return sampler.sample(logits.data(), model.vocab_size(), options.sampling);
  };
  // A forward pass and its choice; `keep`, for the prompt's pass, records what it gave (KvPrefix).
  auto step = [&](std::span<const std::int32_t> ids, std::int64_t position, KvPrefix* keep = nullptr) {
    if (greedy) {
      const std::int32_t id = model.forward_greedy(ids, position);
      if (keep != nullptr) keep->greedy_id = id;
      return id;
    }
    std::vector<float> logits = model.forward(ids, position);
    if (keep != nullptr) keep->logits = logits;
    return choose(std::move(logits), ids, position);
  };
  // The prompt's part the cache already holds; at least its last token runs, unless the cache
  // holds the whole prompt and what its last token gave (KvPrefix). Until this run ends well, the
  // cache holds only that part for certain.
  std::size_t cached = 0;
  bool repeat = false;
  if (options.reuse != nullptr) {
    KvPrefix& reuse = *options.reuse;
    const std::vector<std::int32_t>& held = reuse.ids;
    const std::size_t most = std::min(held.size(), prompt.size());
    while (cached < most && held[cached] == prompt[cached]) ++cached;
    repeat = cached == prompt.size() && reuse.prompt_size == prompt.size() &&
             (greedy ? reuse.greedy_id >= 0 || !reuse.logits.empty() : !reuse.logits.empty());
    if (!repeat) cached = std::min(cached, prompt.size() - 1);
    reuse.ids.resize(cached);
  }
  auto start = Clock::now();
  std::int32_t next = 0;
  if (repeat) {
    const KvPrefix& reuse = *options.reuse;
    next = greedy && reuse.greedy_id >= 0 ? reuse.greedy_id
           : greedy                      ? cpu::argmax(reuse.logits.data(), model.vocab_size())
                                         : choose(reuse.logits, prompt, 0);
  } else {
    if (options.tracer) options.tracer->begin_step(0);
    const Tracer::Scope scope(options.tracer, Region::prefill);
    if (options.reuse != nullptr) {
      options.reuse->prompt_size = 0;  // until this run ends well
      options.reuse->logits.clear();
      options.reuse->greedy_id = -1;
    }
    next = step(prompt.subspan(cached), static_cast<std::int64_t>(cached), options.reuse);
  }
  result.stats.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  result.stats.cached_tokens = static_cast<std::int64_t>(cached);
  result.stats.prompt_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Each new token: kept, shown, and whether to go on (the caller's word first, then the stop ids).
  auto keep = [&](std::int32_t id) {
    result.tokens.push_back(id);
    const bool go_on = on_token ? on_token(id) : true;
    if (is_stop(id)) result.finish = FinishReason::stop_token;
    else if (!go_on) result.finish = FinishReason::caller;
    return result.finish == FinishReason::length;
  };
  const bool first_goes_on = keep(next);

  start = Clock::now();
  auto position = static_cast<std::int64_t>(prompt.size());
  auto take = [&](std::int32_t id) {
    ++result.stats.generated_tokens;
    return keep(id);
  };
  const int steps = first_goes_on ? options.max_new_tokens - 1 : 0;
  // Greedy decode without per-step tracing: the model may run the steps back to back on the device
  // (CausalLM::decode_greedy), each token reaching `take` while the next step runs.
  if (greedy && (options.tracer == nullptr || !options.tracer->marks_steps())) {
    model.decode_greedy(next, position, steps, take);
  } else {
    for (int i = 0; i < steps; ++i) {
      if (options.tracer) options.tracer->begin_step(static_cast<int>(result.tokens.size()));
      {
        const Tracer::Scope scope(options.tracer, Region::decode_step);
        next = step(std::span(&next, 1), position++);
      }
      if (!take(next)) break;
    }
  }
  result.stats.decode_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (options.reuse != nullptr) {
    // Every token fed to the model is in the cache now: the prompt and the generated ones but the
    // last (a step queued behind a stop may have run it too, but need not have).
    std::vector<std::int32_t>& held = options.reuse->ids;
    held.assign(prompt.begin(), prompt.end());
    held.insert(held.end(), result.tokens.begin(), result.tokens.end() - 1);
    options.reuse->prompt_size = prompt.size();
  }
  return result;
}

}  // namespace switchyard
