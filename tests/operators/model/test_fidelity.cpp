// Fidelity to transformers: tiny random models saved by transformers 5 (tests/fidelity/
// make_fixtures.py) run through the shipped CPU profiles must give the same f32 logits (max
// relative error 1e-4) and the same 32-token greedy continuation, token by token with the cache.
#include "tests/fidelity_support.h"

using namespace switchyard;
using namespace switchyard::testing;

TEST_CASE("fidelity: logits and greedy continuations match transformers") {
  const std::pair<const char*, const char*> cases[] = {
      {"deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml"},
      {"deepseek_v2", "DeepSeek-V2-Lite-Chat-cpu.yaml"},
      {"qwen3_moe", "Qwen3-MoE-cpu.yaml"},
      {"mixtral", "Mixtral-cpu.yaml"},
      {"glm4_moe", "GLM-4.5-Air-cpu.yaml"},
      {"glm4_moe_qk_norm", "GLM-4.5-Air-cpu.yaml"},
  };
  for (const auto& entry : cases) {
    const char* const fixture = entry.first;
    const char* const profile = entry.second;
    INFO(fixture << " with " << profile);
    const Reference ref = load_reference(source_path(std::string("tests/fixtures/fidelity/") + fixture));
    Loaded l = load(fixture, profile);
    const FidelityRun run = run_greedy(*l.model, ref);
    CHECK_MESSAGE(run.prompt_error <= 1e-4, "prompt logits relative error " << run.prompt_error);
    CHECK_MESSAGE(run.step_error <= 1e-4, "decode logits relative error " << run.step_error);
    MESSAGE(std::string(fixture) << ": relative error of prompt logits " << run.prompt_error << ", of decode logits "
                                 << run.step_error);
    CHECK(run.generated == ref.generated);
  }
}

TEST_CASE("fidelity: with bf16 KV caches the logits stay within bf16's tolerance of transformers'") {
  const std::pair<const char*, const char*> cases[] = {
      {"deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml"},
      {"deepseek_v2", "DeepSeek-V2-Lite-Chat-cpu.yaml"},
      {"qwen3_moe", "Qwen3-MoE-cpu.yaml"},
      {"mixtral", "Mixtral-cpu.yaml"},
  };
  for (const auto& [fixture, profile] : cases) {
    const std::string name = std::string(fixture) + " with " + profile + ", bf16 KV cache";
    INFO(name);
    const Reference ref = load_reference(source_path(std::string("tests/fixtures/fidelity/") + fixture));
    Loaded l = load(fixture, profile, "", {}, nullptr, nullptr, DType::bf16);
    REQUIRE(l.model->kv_cache_bytes() * 2 == load(fixture, profile).model->kv_cache_bytes());
    check_bf16_cache_run(run_teacher_forced(*l.model, ref), ref, name);
  }
}

TEST_CASE("fidelity: forward_greedy chooses the argmax of forward's logits on the CPU") {
  const Reference ref = load_reference(source_path("tests/fixtures/fidelity/deepseek_v3"));
  Loaded l = load("deepseek_v3", "DeepSeek-V3-Chat-cpu.yaml");
  check_greedy_choices(*l.model, ref, 8);
}
