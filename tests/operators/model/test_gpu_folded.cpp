// Multi-GPU layouts folded onto one GPU (--device_map): each logical GPU of a profile gets its own
// stream, pool, caches and hand-off, and the hand-overs between them are the real layout's
// asynchronous copies, eagerly or inside one decode graph spanning them all. The folded runs must
// give what the one-GPU profile gives: the fidelity fixtures split two ways match transformers,
// and a 61-layer DeepSeek-V3-architecture model under the shipped 4-, 6- and 8-GPU profiles and a
// 3-GPU split chooses the one-GPU profile's greedy tokens, with and without graphs.
//
// The folded and the one-GPU runs execute the same kernels on the same inputs in the same order,
// so their greedy tokens are equal exactly, not within a tolerance; the fidelity bound is the one
// of test_gpu_model.cpp (2^-8 of the logits' scale).
#include "tests/fidelity_support.h"

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/make_model.h"
#include "tests/core_test_support.h"

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/device_context.h"
#include "placement/split.h"
#include "tests/cuda_test_support.h"
#endif

using namespace switchyard;
using namespace switchyard::testing;

#if SWITCHYARD_HAVE_CUDA

namespace {

CausalLMOptions folded_options(bool graphs) {
  CausalLMOptions options;
  options.use_cuda_graph = graphs;
  options.device_map = DeviceMap::parse("all=0");
  return options;
}

// A model in `dir` placed by `profile` (a file, or `profile_text` when given), built with `options`.
struct Built {
  CheckResult check;
  std::unique_ptr<Checkpoint> weights;
  std::unique_ptr<CausalLM> model;
};

Built build(const std::filesystem::path& dir, const std::string& profile, const std::string& profile_text,
            const CausalLMOptions& model_options) {
  Built b;
  CheckOptions options;
  options.model.model_path = dir;
  options.profile = profile;
  if (!profile_text.empty()) options.profile_text = profile_text;
  options.budget.max_context = 96;
  options.budget.device_map = model_options.device_map;
  b.check = run_check(options);
  for (const Diagnostic& d : b.check.diagnostics.items()) INFO(format_diagnostic(d));
  REQUIRE_FALSE(b.check.diagnostics.has_errors());
  b.weights = std::make_unique<Checkpoint>(open_model_weights(options.model, b.check.tree->config()));
  BuildContext context{*b.check.tree, b.check.plan, *b.weights, options.budget.max_context};
  b.model = std::make_unique<CausalLM>(context, model_options);
  return b;
}

// A prompt's greedy continuation: chained on the device where the model chains its steps, one
// forward_greedy a step otherwise.
std::vector<std::int32_t> greedy_tokens(CausalLM& model, const std::vector<std::int32_t>& prompt, int steps) {
  std::vector<std::int32_t> out{model.forward_greedy(prompt, 0)};
  model.decode_greedy(out.back(), static_cast<std::int64_t>(prompt.size()), steps - 1, [&](std::int32_t id) {
    out.push_back(id);
    return true;
  });
  return out;
}

// The prompt's logits at every position, then those of 4 decode steps fed `continuation`.
std::vector<float> logits_along(CausalLM& model, const std::vector<std::int32_t>& prompt,
                                const std::vector<std::int32_t>& continuation) {
  std::vector<float> out = model.forward(prompt, 0, /*all_logits=*/true);
  auto position = static_cast<std::int64_t>(prompt.size());
  for (std::size_t i = 0; i < 4 && i < continuation.size(); ++i) {
    const std::vector<float> step = model.forward(std::span(&continuation[i], 1), position++);
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

std::string tokens_text(const std::vector<std::int32_t>& ids) {
  std::string out;
  for (const std::int32_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

}  // namespace

TEST_CASE("gpu folded: the hybrid fixtures split over two logical GPUs on one match transformers, eager and as one graph") {
  if (no_gpu()) return;
  constexpr std::pair<const char*, const char*> kHybridCases[] = {
      {"deepseek_v3", "DeepSeek-V3-Chat.yaml"}, {"deepseek_v2", "DeepSeek-V2-Lite-Chat.yaml"},
      {"qwen3_moe", "Qwen3-MoE.yaml"},          {"mixtral", "Mixtral.yaml"},
      {"glm4_moe", "GLM-4.5-Air.yaml"},
  };
  for (const auto& fixture_and_profile : kHybridCases) {
    const std::string fixture = fixture_and_profile.first;  // no structured binding: INFO captures it
    const char* hybrid = fixture_and_profile.second;
    const Reference ref = load_reference(source_path("tests/fixtures/fidelity/" + fixture));
    const Loaded base = load(fixture, hybrid);
    const SplitResult split = split_profile(base.check, 2, MemoryBudget{}, hybrid);
    for (const bool graphs : {false, true}) {
      INFO(fixture << (graphs ? " with graphs" : " eager") << ", split over two GPUs folded onto GPU 0:\n" << split.yaml);
      Loaded l = load(fixture, "<split over two GPUs>", split.yaml, folded_options(graphs));
      const FidelityRun run = run_greedy(*l.model, ref);
      MESSAGE(fixture << (graphs ? " graphs" : " eager") << ", 2 logical GPUs on one: relative error of prompt logits "
                      << run.prompt_error << ", of decode logits " << run.step_error);
      CHECK(run.prompt_error <= kBf16Tolerance);
      CHECK(run.step_error <= kBf16Tolerance);
      CHECK(run.generated == ref.generated);
      if (graphs) CHECK(l.model->graph_gpus() == 2);  // one graph over both logical GPUs
      else CHECK(l.model->graph_gpus() == 0);
    }
    // A prompt prefilled in chunks of 3 tokens, each chunk crossing the boundary: the same logits.
    CausalLMOptions chunked = folded_options(true);
    chunked.prefill_chunk = 3;
    Loaded l = load(fixture, "<split over two GPUs>", split.yaml, chunked);
    const FidelityRun run = run_greedy(*l.model, ref);
    INFO(fixture << " prefilled in 3-token chunks across the boundary");
    CHECK(run.prompt_error <= kBf16Tolerance);
    CHECK(run.generated == ref.generated);
  }
}

TEST_CASE("gpu folded: shipped 4-, 6- and 8-GPU DeepSeek-V3 profiles and a 3-GPU split on one GPU give the 1-GPU tokens") {
  if (no_gpu()) return;
  core_testing::TempDir dir;
  MakeModelOptions make;
  make.preset = "tiny-deepseek-v3";
  make.out_dir = dir.path();
  make.seed = test_seed();
  make.dtype = "bf16";
  make.layers = 61;  // DeepSeek-V3's depth: the layer ranges the profiles were written for
  make.force = true;
  make_model(make);
  const std::vector<std::int32_t> prompt = {5, 71, 300, 12, 499, 44, 7, 260};  // the tiny vocabulary has 512
  constexpr int kSteps = 16;
  CausalLMOptions one_gpu;
  one_gpu.use_cuda_graph = false;
  Built reference = build(dir.path(), source_path("optimize_rules/DeepSeek-V3-Chat.yaml"), "", one_gpu);
  const std::vector<std::int32_t> expected = greedy_tokens(*reference.model, prompt, kSteps);
  MESSAGE("1-GPU profile, eager: " << tokens_text(expected));
  // A random model's greedy tokens may repeat one id; the logits along the way say more.
  const std::vector<float> expected_logits = logits_along(*reference.model, prompt, expected);
  const SplitResult split3 = split_profile(reference.check, 3, MemoryBudget{}, "DeepSeek-V3-Chat.yaml");
  reference.model.reset();
  const std::pair<std::string, std::string> profiles[] = {
      {"DeepSeek-V3-Chat-multi-gpu-4.yaml", ""},
      {"DeepSeek-V3-Chat-multi-gpu-6.yaml", ""},
      {"DeepSeek-V3-Chat-multi-gpu-8.yaml", ""},
      {"<split --gpus 3>", split3.yaml},
  };
  for (const auto& name_and_text : profiles) {
    const std::string& name = name_and_text.first;  // no structured binding: INFO captures it
    const std::string& text = name_and_text.second;
    for (const bool graphs : {false, true}) {
      INFO(name << (graphs ? " with graphs" : " eager") << " folded onto GPU 0");
      Built folded = build(dir.path(), text.empty() ? source_path("optimize_rules/" + name) : name, text,
                           folded_options(graphs));
      const std::vector<std::int32_t> got = greedy_tokens(*folded.model, prompt, kSteps);
      const std::size_t gpus = folded.model->graph_gpus();
      MESSAGE(name << (graphs ? " graphs over " + std::to_string(gpus) + " logical GPUs: " : " eager: ") << tokens_text(got));
      CHECK(got == expected);
      if (graphs) CHECK(gpus >= 3);
      const std::vector<float> logits = logits_along(*folded.model, prompt, expected);
      REQUIRE(logits.size() == expected_logits.size());
      const double error = relative_error(logits.data(), expected_logits.data(), logits.size());
      INFO("relative error of the logits against the 1-GPU profile's: " << error);
      CHECK(error <= 1e-5);  // the same kernels on the same inputs: in practice 0
    }
  }
}

#endif
