// Fidelity to transformers: tiny random models saved by transformers 5 (tests/fidelity/
// make_fixtures.py) run through the shipped CPU profiles must give the same f32 logits (max
// relative error 1e-4) and the same 32-token greedy continuation, token by token with the cache.
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "core/model_description.h"
#include "core/safetensors.h"
#include "operators/causal_lm.h"
#include "placement/validate.h"
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;

namespace {

struct Reference {
  std::vector<std::int32_t> prompt, generated;
  std::vector<float> prompt_logits, step_logits;  // [prompt, vocab], [steps, vocab]
};

std::vector<float> read_f32(const SafetensorsHeader& header, const MappedFile& file, const std::string& name) {
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

Reference load_reference(const std::filesystem::path& dir) {
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
double relative_error(const float* a, const float* b, std::size_t n) {
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

Loaded load(const std::string& fixture, const std::string& profile) {
  Loaded l;
  CheckOptions options;
  options.model.model_path = source_path("tests/fixtures/fidelity/" + fixture);
  options.profile = source_path("optimize_rules/" + profile);
  l.check = run_check(options);
  for (const Diagnostic& d : l.check.diagnostics.items()) INFO(format_diagnostic(d));
  REQUIRE_FALSE(l.check.diagnostics.has_errors());
  l.weights = std::make_unique<Checkpoint>(Checkpoint::open(options.model.model_path));
  const BuildContext context{*l.check.tree, l.check.plan, *l.weights, 128};
  l.model = std::make_unique<CausalLM>(context);
  return l;
}

}  // namespace

TEST_CASE("fidelity: logits and greedy continuations match transformers") {
  const std::pair<const char*, const char*> cases[] = {
      {"deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml"},
      {"deepseek_v2", "DeepSeek-V2-Lite-Chat-cpu.yaml"},
      {"qwen3_moe", "Qwen3-MoE-cpu.yaml"},
      {"mixtral", "Mixtral-cpu.yaml"},
  };
  for (const auto& [fixture, profile] : cases) {
    INFO(fixture << " with " << profile);
    const Reference ref = load_reference(source_path(std::string("tests/fixtures/fidelity/") + fixture));
    Loaded l = load(fixture, profile);
    const std::int64_t vocab = l.model->vocab_size();
    // Prefill: every prompt position's logits.
    const std::vector<float> logits = l.model->forward(ref.prompt, 0, /*all_logits=*/true);
    REQUIRE(logits.size() == ref.prompt_logits.size());
    const double prompt_error = relative_error(logits.data(), ref.prompt_logits.data(), logits.size());
    CHECK_MESSAGE(prompt_error <= 1e-4, "prompt logits relative error " << prompt_error);
    // Decode: greedy, one token at a time through the KV cache.
    std::int32_t next = static_cast<std::int32_t>(
        std::max_element(logits.end() - vocab, logits.end()) - (logits.end() - vocab));
    std::vector<std::int32_t> generated = {next};
    double step_error = relative_error(logits.data() + logits.size() - static_cast<std::size_t>(vocab),
                                       ref.step_logits.data(), static_cast<std::size_t>(vocab));
    auto position = static_cast<std::int64_t>(ref.prompt.size());
    while (generated.size() < ref.generated.size()) {
      const std::vector<float> step = l.model->forward(std::span(&next, 1), position++);
      step_error = std::max(step_error, relative_error(step.data(), ref.step_logits.data() + generated.size() * vocab,
                                                       static_cast<std::size_t>(vocab)));
      next = static_cast<std::int32_t>(std::max_element(step.begin(), step.end()) - step.begin());
      generated.push_back(next);
    }
    CHECK_MESSAGE(step_error <= 1e-4, "decode logits relative error " << step_error);
    MESSAGE(std::string(fixture) << ": relative error of prompt logits " << prompt_error << ", of decode logits " << step_error);
    CHECK(generated == ref.generated);
  }
}
