#pragma once
// Fidelity fixtures: tiny models saved by transformers 5 with their reference logits
// (tests/fidelity/make_fixtures.py), and loading them through a profile.
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "core/model_description.h"
#include "core/safetensors.h"
#include "operators/causal_lm.h"
#include "operators/cpu/sampling.h"
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

// The fixture placed by optimize_rules/`profile`, or by `profile_text` when given.
inline Loaded load(const std::string& fixture, const std::string& profile, const std::string& profile_text = "",
                   CausalLMOptions model_options = {}, Tracer* tracer = nullptr,
                   BuiltImplementations* built = nullptr) {
  Loaded l;
  CheckOptions options;
  options.model.model_path = source_path("tests/fixtures/fidelity/" + fixture);
  options.profile = profile_text.empty() ? source_path("optimize_rules/" + profile) : profile;
  if (!profile_text.empty()) options.profile_text = profile_text;
  l.check = run_check(options);
  for (const Diagnostic& d : l.check.diagnostics.items()) INFO(format_diagnostic(d));
  REQUIRE_FALSE(l.check.diagnostics.has_errors());
  l.weights = std::make_unique<Checkpoint>(Checkpoint::open(options.model.model_path));
  BuildContext context{*l.check.tree, l.check.plan, *l.weights, 128, tracer};
  context.built = built;
  l.model = std::make_unique<CausalLM>(context, model_options);
  return l;
}

// The reference's prompt (every position's logits), then a greedy continuation through the cache
// as long as the reference's, each step's logits compared with transformers'.
struct FidelityRun {
  double prompt_error = 0, step_error = 0;  // relative to the logits' scale (relative_error)
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
