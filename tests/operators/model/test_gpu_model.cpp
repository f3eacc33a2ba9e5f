// The model on a GPU: the tiny transformers fixtures (f32 weights) run through the shipped hybrid
// profiles (attention, gates, shared experts on cuda:0; routed experts on the CPU in decode, on
// the GPU in prefill) and through an all-GPU profile, eagerly and with one CUDA graph per decode
// step; and the hybrid profiles split over two GPUs by `switchyard split` (one decode graph across
// both; test_gpu_folded.cpp runs the same splits folded onto one GPU). Without a GPU every case
// says "skipped: no CUDA device".
//
// Tolerance: logits within 2^-8 (bf16's unit roundoff) of transformers', relative to the logits'
// scale, for the prompt and every decode step; in practice f32 cuBLAS (no TF32) and f32 kernels
// land near 1e-6, so the bound only has to absorb summation order. The greedy continuation must
// equal transformers' and the CPU run's, and graph replays must give exactly the eager tokens.
#include "tests/fidelity_support.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

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

constexpr const char* kAllGpuProfile = R"(- match:
    name: ""
  replace:
    class: default
    kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}
)";

// Each fixture with the shipped hybrid profile of its architecture.
constexpr std::pair<const char*, const char*> kHybridCases[] = {
    {"deepseek_v3", "DeepSeek-V3-Chat.yaml"},
    {"deepseek_v2", "DeepSeek-V2-Lite-Chat.yaml"},
    {"qwen3_moe", "Qwen3-MoE.yaml"},
    {"mixtral", "Mixtral.yaml"},
    {"glm4_moe", "GLM-4.5-Air.yaml"},
    {"glm4_moe_qk_norm", "GLM-4.5-Air.yaml"},
};

}  // namespace

TEST_CASE("gpu model: hybrid and all-GPU runs match transformers, eagerly and as CUDA graphs") {
  if (no_gpu()) return;
  for (const auto& [fixture, hybrid] : kHybridCases) {
    const Reference ref = load_reference(source_path(std::string("tests/fixtures/fidelity/") + fixture));
    for (const bool all_gpu : {false, true})
      for (const bool graph : {false, true}) {
        const std::string name = std::string(fixture) + (all_gpu ? " all-GPU" : std::string(" hybrid ") + hybrid) +
                                 (graph ? ", CUDA graph" : ", eager");
        INFO(name);
        CausalLMOptions options;
        options.use_cuda_graph = graph;
        Loaded l = load(fixture, all_gpu ? "<all-GPU profile>" : hybrid, all_gpu ? kAllGpuProfile : "", options);
        CHECK(l.model->graph_device().has_value() == graph);
        const FidelityRun run = run_greedy(*l.model, ref);
        MESSAGE(name << ": relative error of prompt logits " << run.prompt_error << ", of decode logits "
                     << run.step_error);
        CHECK(run.prompt_error <= kBf16Tolerance);
        CHECK(run.step_error <= kBf16Tolerance);
        CHECK(run.generated == ref.generated);
      }
  }
}

TEST_CASE("gpu model: with bf16 KV caches, hybrid and all-GPU runs stay within the bf16 cache tolerance") {
  if (no_gpu()) return;
  // The CPU run's tolerance and jump rule (fidelity_support.h): the GPU kernels read the rounded
  // cache rows widened exactly, so only the f32 summation orders and the rounding of values that
  // differ by those orders separate the devices.
  for (const auto& [fixture, hybrid] : kHybridCases) {
    const Reference ref = load_reference(source_path(std::string("tests/fixtures/fidelity/") + fixture));
    for (const bool all_gpu : {false, true})
      for (const bool graph : {false, true}) {
        const std::string name = std::string(fixture) + (all_gpu ? " all-GPU" : std::string(" hybrid ") + hybrid) +
                                 (graph ? ", CUDA graph" : ", eager") + ", bf16 KV cache";
        INFO(name);
        CausalLMOptions options;
        options.use_cuda_graph = graph;
        Loaded l = load(fixture, all_gpu ? "<all-GPU profile>" : hybrid, all_gpu ? kAllGpuProfile : "", options,
                        nullptr, nullptr, DType::bf16);
        check_bf16_cache_run(run_teacher_forced(*l.model, ref), ref, name);
      }
  }
}

TEST_CASE("gpu model: hybrid profiles split over two GPUs (switchyard split) match transformers") {
  if (no_gpu()) return;
  if (cuda::device_count() < 2) {
    MESSAGE("skipped: fewer than two CUDA devices");
    return;
  }
  for (const auto& [fixture, hybrid] : kHybridCases) {
    const Reference ref = load_reference(source_path(std::string("tests/fixtures/fidelity/") + fixture));
    const Loaded base = load(fixture, hybrid);
    const SplitResult split = split_profile(base.check, 2, MemoryBudget{}, hybrid);
    INFO(std::string(fixture) << " split over two GPUs:\n" << split.yaml);
    Loaded l = load(fixture, "<split over two GPUs>", split.yaml);
    CHECK(l.model->graph_device().has_value());  // one decode graph spans both GPUs
    const FidelityRun run = run_greedy(*l.model, ref);
    CHECK(l.model->graph_gpus() == 2);
    MESSAGE(std::string(fixture) << " on two GPUs: relative error of prompt logits " << run.prompt_error << ", of decode logits "
                    << run.step_error);
    CHECK(run.prompt_error <= kBf16Tolerance);
    CHECK(run.step_error <= kBf16Tolerance);
    CHECK(run.generated == ref.generated);
  }
}

TEST_CASE("gpu model: a graph replays at new positions exactly as eager steps do") {
  if (no_gpu()) return;
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  CausalLMOptions eager_options, graph_options;
  eager_options.use_cuda_graph = false;
  Loaded eager = load("deepseek_v3", "DeepSeek-V3-Chat.yaml", "", eager_options);
  Loaded graph = load("deepseek_v3", "DeepSeek-V3-Chat.yaml", "", graph_options);
  REQUIRE(graph.model->graph_device().has_value());
  // Prefill in two chunks of different sizes, then decode; every step's logits bit for bit.
  const std::span<const std::int32_t> prompt(ref.prompt);
  for (Loaded* l : {&eager, &graph}) {
    l->model->forward(prompt.first(3), 0);
    l->model->forward(prompt.subspan(3), 3);
  }
  std::int32_t next = 1;
  for (std::int64_t position = static_cast<std::int64_t>(prompt.size()); position < 40; ++position) {
    const std::vector<float> a = eager.model->forward(std::span(&next, 1), position);
    const std::vector<float> b = graph.model->forward(std::span(&next, 1), position);
    REQUIRE(a == b);
    next = static_cast<std::int32_t>((std::max_element(a.begin(), a.end()) - a.begin() + position) % a.size());
  }
}

TEST_CASE("gpu model: forward_greedy's choice on the GPU is the argmax of forward's logits") {
  if (no_gpu()) return;
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  for (const bool all_gpu : {false, true})
    for (const bool graph : {false, true}) {
      INFO((all_gpu ? "all-GPU" : "hybrid") << (graph ? ", CUDA graph" : ", eager"));
      CausalLMOptions options;
      options.use_cuda_graph = graph;
      Loaded l = load("deepseek_v3", all_gpu ? "<all-GPU profile>" : "DeepSeek-V3-Chat.yaml",
                      all_gpu ? kAllGpuProfile : "", options);
      check_greedy_choices(*l.model, ref, 8);
    }
}

TEST_CASE("gpu model: greedy steps chained on the device choose the tokens of steps taken one at a time") {
  if (no_gpu()) return;
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  constexpr int kSteps = 24;
  // Hybrid (the embedding on the CPU: the graph reads its mapped table) and all-GPU.
  for (const bool all_gpu : {false, true}) {
    INFO((all_gpu ? "all-GPU" : "hybrid"));
    CausalLMOptions eager_options;
    eager_options.use_cuda_graph = false;
    const char* profile = all_gpu ? "<all-GPU profile>" : "DeepSeek-V3-Chat.yaml";
    Loaded eager = load("deepseek_v3", profile, all_gpu ? kAllGpuProfile : "", eager_options);
    Loaded chained = load("deepseek_v3", profile, all_gpu ? kAllGpuProfile : "");
    CHECK_FALSE(eager.model->chains_decode_steps());
    REQUIRE(chained.model->chains_decode_steps());
    const auto start = static_cast<std::int64_t>(ref.prompt.size());
    const std::int32_t first = eager.model->forward_greedy(ref.prompt, 0);
    REQUIRE(chained.model->forward_greedy(ref.prompt, 0) == first);
    std::vector<std::int32_t> expected;
    std::int32_t next = first;
    for (int i = 0; i < kSteps; ++i) expected.push_back(next = eager.model->forward_greedy(std::span(&next, 1), start + i));
    std::vector<std::int32_t> got;
    auto take = [&](std::int32_t id) {
      got.push_back(id);
      return true;
    };
    CHECK(chained.model->decode_greedy(first, start, kSteps, take) == kSteps);
    CHECK(got == expected);
    // Stopped after 5 tokens (a sixth step was already queued), then on from there: the same tokens.
    got.clear();
    CHECK(chained.model->decode_greedy(first, start, kSteps, [&](std::int32_t id) {
      got.push_back(id);
      return got.size() < 5;
    }) == 5);
    CHECK(chained.model->decode_greedy(got.back(), start + 5, kSteps - 5, take) == kSteps - 5);
    CHECK(got == expected);
    // A token that the vocabulary does not hold is refused before anything runs.
    CHECK_THROWS_AS(chained.model->decode_greedy(static_cast<std::int32_t>(chained.model->vocab_size()), start, 2, take),
                    InputError);
  }
}

TEST_CASE("gpu model: --profile times GPU work on the GPU lane, eagerly and inside the decode graph") {
  if (no_gpu()) return;
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  for (const bool graph : {false, true}) {
    INFO("use_cuda_graph " << graph);
    Tracer tracer(std::vector<bool>(4, false), /*profile=*/true);
    CausalLMOptions options;
    options.use_cuda_graph = graph;
    Loaded l = load("deepseek_v3", "DeepSeek-V3-Chat.yaml", "", options, &tracer);
    tracer.begin_step(0);
    l.model->forward(ref.prompt, 0);
    std::int32_t next = 1;
    for (int step = 1; step <= 3; ++step) {
      tracer.begin_step(step);
      const Tracer::Scope scope(&tracer, Region::decode_step);
      l.model->forward(std::span(&next, 1), static_cast<std::int64_t>(ref.prompt.size()) + step - 1);
    }
    // Per decode step, layer 1 (MoE, experts on the CPU in decode): attention, gate, shared
    // experts and the wait on the GPU lane, the routed experts on the host.
    for (int step = 1; step <= 3; ++step) {
      INFO("step " << step);
      auto has = [&](Region region, int lane) {
        return std::any_of(tracer.events().begin(), tracer.events().end(), [&](const Tracer::Event& e) {
          return e.step == step && e.layer == 1 && e.region == region && e.lane == lane && e.end_ns >= e.start_ns;
        });
      };
      CHECK(has(Region::self_attention, 1));
      CHECK(has(Region::moe_gate, 1));
      CHECK(has(Region::shared_experts, 1));
      CHECK(has(Region::cpuinfer_sync, 1));
      CHECK(has(Region::routed_experts, 0));
    }
    const std::string table = tracer.profile_table();
    CHECK(table.find("GPU waited for the CPU") != std::string::npos);
  }
}

#endif
