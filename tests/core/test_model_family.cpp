// The family seam (core/model_family.h): every family is found by its model_type, its classes are
// registered under their Python paths, its tree has the children the operators look up, and its
// gate scheme routes as the MoE gate's preset for that model does.
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/model_family.h"
#include "core/module_tree.h"
#include "tests/core_test_support.h"
#include "tests/gate_presets.h"
#include "operators/cpu/kernels/moe_gate.h"
#include "operators/ops/feed_forward_op.h"

namespace sy = switchyard;
namespace presets = switchyard::gate_presets;

namespace {

const sy::WeightScheme& bf16() {
  const sy::WeightScheme* scheme = sy::find_weight_scheme("bf16");
  REQUIRE(scheme != nullptr);
  return *scheme;
}

// The first test-size preset of the family.
sy::ModelConfig tiny_config(const sy::ModelFamily& family) {
  for (const sy::ArchPreset& preset : family.presets)
    if (preset.test_size) return sy::preset_model_config(preset.name);
  FAIL("family " << family.model_type << " has no test-size preset");
  return {};
}

void check_same_gate(const switchyard::MoeGateConfig& a, const switchyard::MoeGateConfig& b) {
  CHECK(a.n_experts == b.n_experts);
  CHECK(a.top_k == b.top_k);
  CHECK(a.scoring == b.scoring);
  CHECK(a.score_correction_bias == b.score_correction_bias);
  CHECK(a.group_score == b.group_score);
  CHECK(a.n_group == b.n_group);
  CHECK(a.topk_group == b.topk_group);
  CHECK(a.masked_choice == b.masked_choice);
  CHECK(a.weights_from_scores == b.weights_from_scores);
  CHECK(a.normalize == b.normalize);
  CHECK(a.normalize_epsilon == b.normalize_epsilon);
  CHECK(a.routed_scaling_factor == b.routed_scaling_factor);
  CHECK(a.scale_when_normalized == b.scale_when_normalized);
}

// Both configs route the same random logits to the same experts with the same weights.
void check_same_routing(const switchyard::MoeGateConfig& a, const switchyard::MoeGateConfig& b,
                        sy::core_testing::SeededRng& rng) {
  constexpr std::int64_t kTokens = 7;
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<std::size_t>(kTokens * a.n_experts));
  for (float& x : logits) x = normal(rng.engine);
  std::vector<std::int32_t> ids_a(static_cast<std::size_t>(kTokens * a.top_k)), ids_b(ids_a.size());
  std::vector<float> weights_a(ids_a.size()), weights_b(ids_a.size());
  sy::cpu::moe_gate(a, logits.data(), kTokens, ids_a.data(), weights_a.data());
  sy::cpu::moe_gate(b, logits.data(), kTokens, ids_b.data(), weights_b.data());
  CHECK(ids_a == ids_b);
  CHECK(weights_a == weights_b);
}

}  // namespace

TEST_CASE("core: every family is found by its model_type and owns its presets") {
  std::set<std::string> types;
  REQUIRE_FALSE(sy::model_families().empty());
  for (const sy::ModelFamily* family : sy::model_families()) {
    INFO("family " << family->model_type);
    CHECK(types.insert(family->model_type).second);
    CHECK(sy::find_model_family(family->model_type) == family);
    REQUIRE(static_cast<bool>(family->parse));
    REQUIRE(static_cast<bool>(family->validate));
    REQUIRE(static_cast<bool>(family->write));
    REQUIRE(static_cast<bool>(family->is_moe_layer));
    REQUIRE(static_cast<bool>(family->build_tree));
    REQUIRE(static_cast<bool>(family->gate_scheme));
    CHECK_FALSE(family->feed_forward_child.empty());
    CHECK_FALSE(family->routed_experts_field.empty());
    CHECK_FALSE(family->ktransformers_model_class.empty());
    CHECK_FALSE(family->presets.empty());
    for (const sy::ArchPreset& preset : family->presets) {
      INFO("preset " << preset.name);
      CHECK(sy::find_arch_preset(preset.name) != nullptr);
      CHECK(sy::preset_model_config(preset.name).family == family);
    }
  }
  CHECK(sy::find_model_family("llama") == nullptr);
  CHECK(sy::model_family_names().size() == sy::model_families().size());
}

TEST_CASE("core: an unknown model_type lists the families there are") {
  const std::string message = sy::core_testing::input_error_message(
      [] { sy::parse_model_config(nlohmann::json{{"model_type", "llama"}}, "models/l/config.json"); });
  CHECK(sy::core_testing::contains(message, "models/l/config.json: field 'model_type' is 'llama'"));
  for (const sy::ModelFamily* family : sy::model_families())
    CHECK(sy::core_testing::contains(message, family->model_type));
}

TEST_CASE("core: a family's classes are registered under its Python modules, with their roles") {
  for (const sy::ModelFamily* family : sy::model_families()) {
    INFO("family " << family->model_type);
    const sy::ModuleClass* causal_lm = sy::find_module_class(family->causal_lm_class);
    REQUIRE(causal_lm != nullptr);
    CHECK(causal_lm->role == sy::ModuleRole::causal_lm);
    for (const sy::FamilyClasses& group : family->classes)
      for (const sy::FamilyClass& cls : group.classes) {
        INFO("class " << cls.name);
        const sy::ModuleClass* found = sy::find_module_class(cls.name);
        REQUIRE(found != nullptr);
        const sy::ModuleClass* base = sy::find_module_class(cls.base);
        REQUIRE(base != nullptr);
        CHECK(found->is_a(*base));
        CHECK(found->role == base->role);
        for (const std::string& module : group.python_modules)
          CHECK(sy::find_module_class(module + "." + (cls.python_name ? cls.python_name : cls.name)) == found);
      }
  }
}

TEST_CASE("core: each family's tree has the children its operators look up") {
  for (const sy::ModelFamily* family : sy::model_families()) {
    INFO("family " << family->model_type);
    const sy::ModuleTree tree = sy::build_module_tree(tiny_config(*family), bf16());
    const sy::ModelConfig& c = tree.config();
    for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
      INFO("layer " << layer);
      const std::string prefix = "model.layers." + std::to_string(layer) + ".";
      const int block = tree.find(prefix + family->feed_forward_child);
      REQUIRE(block >= 0);
      CHECK((tree.at(block).cls->role == sy::ModuleRole::moe) == c.is_moe_layer(layer));
      const char* attention_part = family->attention == sy::AttentionKind::mla ? "kv_b_proj" : "k_proj";
      CHECK(tree.find(prefix + "self_attn." + attention_part) >= 0);
      CHECK((tree.find(prefix + "self_attn.q_norm") >= 0) == c.qk_norm);
      if (!c.is_moe_layer(layer)) continue;
      const std::string expert = prefix + family->feed_forward_child + ".experts." + std::to_string(c.n_routed_experts - 1);
      const sy::ProjectionNames names = family->expert_projections;
      for (const char* projection : {names.gate, names.up, names.down}) CHECK(tree.find(expert + "." + projection) >= 0);
      CHECK(tree.find(prefix + family->feed_forward_child + ".gate") >= 0);
    }
  }
}

TEST_CASE("core: each family's gate scheme is the MoE gate's preset for its model") {
  sy::core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  const std::vector<float> bias(512, 0.25f);
  struct Case {
    const char* preset;
    std::function<void(sy::ModelConfig&)> change;
    std::function<switchyard::MoeGateConfig(const sy::ModelConfig&)> expected;
  };
  const std::vector<Case> cases = {
      {"tiny-deepseek-v3", [](sy::ModelConfig&) {},
       [&](const sy::ModelConfig& c) {
         return presets::deepseek_v3_gate(c.n_routed_experts, c.num_experts_per_tok, c.n_group, c.topk_group,
                                          bias.data(), c.norm_topk_prob, static_cast<float>(c.routed_scaling_factor));
       }},
      {"deepseek-v3", [](sy::ModelConfig& c) { c.norm_topk_prob = false; },
       [&](const sy::ModelConfig& c) {
         return presets::deepseek_v3_gate(c.n_routed_experts, c.num_experts_per_tok, c.n_group, c.topk_group,
                                          bias.data(), false, static_cast<float>(c.routed_scaling_factor));
       }},
      {"deepseek-v2", [](sy::ModelConfig&) {},  // group_limited_greedy
       [](const sy::ModelConfig& c) {
         return presets::deepseek_v2_gate(c.n_routed_experts, c.num_experts_per_tok, c.n_group, c.topk_group,
                                          static_cast<float>(c.routed_scaling_factor));
       }},
      {"deepseek-v2-lite", [](sy::ModelConfig& c) { c.routed_scaling_factor = 3.0; },  // greedy
       [](const sy::ModelConfig& c) {
         return presets::deepseek_v2_gate(c.n_routed_experts, c.num_experts_per_tok, 0, c.topk_group, 3.0f);
       }},
      {"qwen3-30b-a3b", [](sy::ModelConfig&) {},
       [](const sy::ModelConfig& c) { return presets::qwen3_moe_gate(c.n_routed_experts, c.num_experts_per_tok, true); }},
      {"tiny-qwen3-moe", [](sy::ModelConfig& c) { c.norm_topk_prob = false; },
       [](const sy::ModelConfig& c) { return presets::qwen3_moe_gate(c.n_routed_experts, c.num_experts_per_tok, false); }},
      {"mixtral-8x7b", [](sy::ModelConfig&) {},
       [](const sy::ModelConfig& c) { return presets::mixtral_gate(c.n_routed_experts, c.num_experts_per_tok); }},
  };
  for (const Case& test : cases) {
    INFO("preset " << test.preset);
    sy::ModelConfig c = sy::preset_model_config(test.preset);
    test.change(c);
    const switchyard::MoeGateConfig expected = test.expected(c);
    const switchyard::MoeGateConfig got = sy::gate_config(c, bias.data());
    check_same_gate(got, expected);
    check_same_routing(got, expected, rng);
  }
}
