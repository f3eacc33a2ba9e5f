#pragma once
// Fidelity fixtures: tiny models saved by transformers 5 with their reference logits
// (tests/fidelity/make_fixtures.py), and loading them through a profile.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "core/model_description.h"
#include "core/safetensors.h"
#include "operators/model/causal_lm.h"
#include "operators/cpu/kernels/sampling.h"
#include "placement/validate.h"
#include "tests/test_support.h"

namespace switchyard::testing {

struct Reference {
  std::vector<std::int32_t> prompt, generated;
  std::vector<float> prompt_logits, step_logits;  // [prompt, vocab], [steps, vocab]
};

inline std::vector<float> read_f32(const SafetensorsHeader& header, const MappedFile& file, const std::string& name) {
  for (const SafetensorsTensor& t : header.tensors)
    if (t.name == name) {
      REQUIRE(t.dtype == DType::f32);
      std::vector<float> out((t.end - t.begin) / sizeof(float));
      std::memcpy(out.data(), file.data() + header.data_offset + t.begin, t.end - t.begin);
      return out;
    }
  FAIL("reference tensor " << name << " missing");
  return {};
}

inline Reference load_reference(const std::filesystem::path& dir) {
  Reference r;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "reference.json"));
  r.prompt = j["prompt_ids"].get<std::vector<std::int32_t>>();
  r.generated = j["generated_ids"].get<std::vector<std::int32_t>>();
  const SafetensorsHeader header = read_safetensors_header(dir / "reference.safetensors");
  const MappedFile file = MappedFile::open(dir / "reference.safetensors");
  r.prompt_logits = read_f32(header, file, "prompt_logits");
  r.step_logits = read_f32(header, file, "step_logits");
  return r;
}

// The GPU runs' bound on relative_error against transformers: 2^-8, bf16's unit roundoff (f32
// kernels land near 1e-6; the bound absorbs summation order).
constexpr double kBf16Tolerance = 1.0 / 256;

// max |a - b| / max |b|: the error relative to the logits' scale.
inline double relative_error(const float* a, const float* b, std::size_t n) {
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

struct Loaded {
  CheckResult check;
  std::unique_ptr<Checkpoint> weights;
  std::unique_ptr<CausalLM> model;
};

// The fixture placed by optimize_rules/`profile`, or by `profile_text` when given, with a KV cache
// of 128 tokens in `kv_cache_dtype` (nullopt: the checkpoint's, f32 for these fixtures); check's
// estimate is for the same cache.
inline Loaded load(const std::string& fixture, const std::string& profile, const std::string& profile_text = "",
                   CausalLMOptions model_options = {}, Tracer* tracer = nullptr,
                   BuiltImplementations* built = nullptr,
                   std::optional<DType> kv_cache_dtype = std::nullopt) {
  Loaded l;
  CheckOptions options;
  options.model.model_path = source_path("tests/fixtures/fidelity/" + fixture);
  options.profile = profile_text.empty() ? source_path("optimize_rules/" + profile) : profile;
  if (!profile_text.empty()) options.profile_text = profile_text;
  options.budget.max_context = 128;
  options.budget.kv_cache_dtype = kv_cache_dtype;
  l.check = run_check(options);
  for (const Diagnostic& d : l.check.diagnostics.items()) INFO(format_diagnostic(d));
  REQUIRE_FALSE(l.check.diagnostics.has_errors());
  l.weights = std::make_unique<Checkpoint>(open_model_weights(options.model, l.check.tree->config()));
  BuildContext context{*l.check.tree, l.check.plan, *l.weights, options.budget.max_context, tracer};
  context.kv_cache_dtype = kv_cache_dtype;
  context.built = built;
  l.model = std::make_unique<CausalLM>(context, model_options);
  return l;
}

// The reference's prompt (every position's logits), then a greedy continuation through the cache
// as long as the reference's, each step's logits compared with transformers'.
struct FidelityRun {
  double prompt_error = 0, step_error = 0;  // relative to the logits' scale (relative_error)
  std::vector<double> step_errors;          // each step's (run_teacher_forced)
  std::vector<std::int32_t> generated;
};

inline FidelityRun run_greedy(CausalLM& model, const Reference& ref) {
  FidelityRun run;
  const std::int64_t vocab = model.vocab_size();
  const std::vector<float> logits = model.forward(ref.prompt, 0, /*all_logits=*/true);
  REQUIRE(logits.size() == ref.prompt_logits.size());
  run.prompt_error = relative_error(logits.data(), ref.prompt_logits.data(), logits.size());
  std::int32_t next =
      static_cast<std::int32_t>(std::max_element(logits.end() - vocab, logits.end()) - (logits.end() - vocab));
  run.generated = {next};
  run.step_error = relative_error(logits.data() + logits.size() - static_cast<std::size_t>(vocab),
                                  ref.step_logits.data(), static_cast<std::size_t>(vocab));
  auto position = static_cast<std::int64_t>(ref.prompt.size());
  while (run.generated.size() < ref.generated.size()) {
    const std::vector<float> step = model.forward(std::span(&next, 1), position++);
    run.step_error = std::max(run.step_error, relative_error(step.data(), ref.step_logits.data() + run.generated.size() * vocab,
                                                             static_cast<std::size_t>(vocab)));
    next = static_cast<std::int32_t>(std::max_element(step.begin(), step.end()) - step.begin());
    run.generated.push_back(next);
  }
  return run;
}

// The reference's prompt, then its own continuation fed back token by token (teacher forcing), each
// step's logits compared with transformers'. Where a run may choose other tokens than transformers
// (a bf16 KV cache), this still compares every step on the same context.
inline FidelityRun run_teacher_forced(CausalLM& model, const Reference& ref) {
  FidelityRun run;
  const std::int64_t vocab = model.vocab_size();
  const std::vector<float> logits = model.forward(ref.prompt, 0, /*all_logits=*/true);
  REQUIRE(logits.size() == ref.prompt_logits.size());
  REQUIRE(ref.step_logits.size() == ref.generated.size() * static_cast<std::size_t>(vocab));
  run.prompt_error = relative_error(logits.data(), ref.prompt_logits.data(), logits.size());
  run.step_errors = {relative_error(logits.data() + logits.size() - static_cast<std::size_t>(vocab),
                                    ref.step_logits.data(), static_cast<std::size_t>(vocab))};
  run.generated = {cpu::argmax(logits.data() + logits.size() - static_cast<std::size_t>(vocab), vocab)};
  auto position = static_cast<std::int64_t>(ref.prompt.size());
  for (std::size_t i = 1; i < ref.generated.size(); ++i) {
    const std::vector<float> step = model.forward(std::span(&ref.generated[i - 1], 1), position++);
    run.step_errors.push_back(
        relative_error(step.data(), ref.step_logits.data() + i * vocab, static_cast<std::size_t>(vocab)));
    run.generated.push_back(cpu::argmax(step.data(), vocab));
  }
  run.step_error = *std::max_element(run.step_errors.begin(), run.step_errors.end());
  return run;
}

// --kv_cache_dtype bf16 on these f32 checkpoints: every cached key, value (or latent and rope key)
// rounded to bf16, the rest f32, run teacher-forced (run_teacher_forced: the logits are compared on
// transformers' context even where a near tie would turn the greedy choice). Tolerance
// kBf16CacheTolerance relative to the logits' scale: a cached value moves by at most 2^-9
// relative, which moves an attention output by at most ~2^-9 (1 + 2S) of its magnitude
// (tests/operators/cpu/kernels/test_attention.cpp); through the layers of these tiny models the logits move by 1e-3
// to 2e-2 of their scale (measured on the CPU; median 2e-3 to 5e-3). Routing is not continuous:
// where the rounding moves a router score across the top-k boundary other experts run, and that
// step's logits jump (seen: one step of DeepSeek-V3's 32 at 0.26), the cache rows of that step
// carrying the difference on. So up to kBf16CacheJumps steps may exceed the tolerance, none
// kBf16CacheJumpLimit.
constexpr double kBf16CacheTolerance = 1.0 / 32;
constexpr int kBf16CacheJumps = 2;
constexpr double kBf16CacheJumpLimit = 0.5;

inline void check_bf16_cache_run(const FidelityRun& run, const Reference& ref, const std::string& name) {
  std::size_t same = 0;
  for (std::size_t i = 0; i < run.generated.size(); ++i) same += run.generated[i] == ref.generated[i];
  const auto jumps = std::count_if(run.step_errors.begin(), run.step_errors.end(),
                                   [](double e) { return e > kBf16CacheTolerance; });
  std::vector<double> sorted = run.step_errors;
  std::sort(sorted.begin(), sorted.end());
  REQUIRE_FALSE(sorted.empty());
  MESSAGE(name << ": relative error of prompt logits " << run.prompt_error << ", of decode logits: median "
               << sorted[sorted.size() / 2] << ", largest " << run.step_error << " (" << jumps << " steps past "
               << kBf16CacheTolerance << "); greedy choices equal to transformers' at " << same << " of "
               << run.generated.size() << " steps");
  CHECK(run.prompt_error <= kBf16CacheTolerance);
  CHECK(jumps <= kBf16CacheJumps);
  CHECK(run.step_error <= kBf16CacheJumpLimit);
  CHECK(sorted.front() > 0);  // the cache is rounded: an exact match would mean it is not
}

// forward_greedy chooses what cpu::argmax chooses from forward's logits: the prompt, then `steps`
// decode steps, each run twice at its position (once for the logits, once for the choice; the
// cache row is written with the same values both times).
inline void check_greedy_choices(CausalLM& model, const Reference& ref, int steps) {
  const std::vector<float> prompt_logits = model.forward(ref.prompt, 0);
  std::int32_t next = model.forward_greedy(ref.prompt, 0);
  REQUIRE(next == cpu::argmax(prompt_logits.data(), model.vocab_size()));
  auto position = static_cast<std::int64_t>(ref.prompt.size());
  for (int i = 0; i < steps; ++i, ++position) {
    const std::vector<float> logits = model.forward(std::span(&next, 1), position);
    const std::int32_t chosen = model.forward_greedy(std::span(&next, 1), position);
    INFO("step " << i);
    REQUIRE(chosen == cpu::argmax(logits.data(), model.vocab_size()));
    next = chosen;
  }
}

}  // namespace switchyard::testing
