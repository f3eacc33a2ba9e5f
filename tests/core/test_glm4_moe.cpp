// GLM-4.5 (glm4_moe) in core/: its presets against the published sizes, config.json in the
// spellings of transformers 4 and 5 with transformers' defaults, the rules that refuse what the
// engine cannot run (naming the field), the module tree's names, order and shapes, and its
// profiles against both presets.
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/make_model.h"
#include "core/model_config.h"
#include "core/module_tree.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

namespace sy = switchyard;
using nlohmann::json;
using sy::core_testing::contains;
using sy::core_testing::input_error_message;

namespace {

using Dims = std::vector<std::int64_t>;

json preset_json(const std::string& name) {
  const sy::ArchPreset* preset = sy::find_arch_preset(name);
  REQUIRE_MESSAGE(preset != nullptr, "no preset " << name);
  return json::parse(preset->config_json);
}

sy::ModuleTree tree_of(const sy::ModelConfig& config) {
  const sy::WeightScheme* bf16 = sy::find_weight_scheme("bf16");
  REQUIRE(bf16 != nullptr);
  return sy::build_module_tree(config, *bf16);
}

const sy::Module& module(const sy::ModuleTree& tree, const std::string& name) {
  const int index = tree.find(name);
  REQUIRE_MESSAGE(index >= 0, "no module " << name);
  return tree.at(index);
}

Dims shape_of(const sy::ModuleTree& tree, const std::string& name, const std::string& param = "weight") {
  for (const sy::Parameter& p : module(tree, name).params)
    if (p.name == param) return Dims(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
  FAIL("no parameter " << name << "." << param);
  return {};
}

bool has_param(const sy::ModuleTree& tree, const std::string& name, const std::string& param) {
  for (const sy::Parameter& p : module(tree, name).params)
    if (p.name == param) return true;
  return false;
}

std::vector<std::string> children(const sy::ModuleTree& tree, const std::string& name) {
  std::vector<std::string> out;
  for (const int child : module(tree, name).children) out.emplace_back(tree.at(child).local_name());
  return out;
}

}  // namespace

TEST_CASE("glm4_moe: the presets have the published models' sizes") {
  struct Published {
    const char* preset;
    double parameters;
  };
  // Both totals count the MTP layer too (about 2.3B and 4.0B); the tree does not place it.
  for (const Published model : {Published{"glm-4.5-air", 106e9}, Published{"glm-4.5", 355e9}}) {
    const sy::ModelConfig c = sy::preset_model_config(model.preset);
    const double count = static_cast<double>(tree_of(c).total_parameter_count());
    INFO(model.preset << ": " << count / 1e9 << "B parameters, published " << model.parameters / 1e9 << "B");
    CHECK(std::abs(count - model.parameters) <= 0.01 * model.parameters);
    CHECK(c.family == sy::find_model_family("glm4_moe"));
    CHECK(c.num_nextn_predict_layers == 1);
    CHECK(c.rope_dim() == 64);  // half of head_dim 128
  }
  CHECK_FALSE(sy::preset_model_config("glm-4.5-air").qk_norm);
  CHECK(sy::preset_model_config("glm-4.5").qk_norm);
}

TEST_CASE("glm4_moe: config.json fields, defaults and the spellings of transformers 5") {
  SUBCASE("transformers' defaults for what a config leaves out") {
    json j = preset_json("tiny-glm4-moe");
    for (const char* key : {"partial_rotary_factor", "use_qk_norm", "n_shared_experts", "first_k_dense_replace",
                            "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor", "attention_bias"})
      j.erase(key);
    j["num_experts_per_tok"] = 2;
    const sy::ModelConfig c = sy::parse_model_config(j, "defaults");
    CHECK(c.partial_rotary_factor == 0.5);
    CHECK_FALSE(c.qk_norm);
    CHECK(c.n_shared_experts == 1);
    CHECK(c.first_k_dense_replace == 1);
    CHECK(c.n_group == 1);
    CHECK(c.topk_group == 1);
    CHECK(c.norm_topk_prob);
    CHECK(c.routed_scaling_factor == 1.0);
    CHECK_FALSE(c.attention_bias);
  }
  SUBCASE("rope_parameters' partial_rotary_factor is the one transformers 5 reads") {
    json j = preset_json("tiny-glm4-moe");
    j["partial_rotary_factor"] = 0.5;
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 12345.0}, {"partial_rotary_factor", 0.25}};
    const sy::ModelConfig c = sy::parse_model_config(j, "v5");
    CHECK(c.partial_rotary_factor == 0.25);
    CHECK(c.rope_dim() == 4);
    CHECK(c.rope_theta == 12345.0);
    CHECK_FALSE(c.rope_scaling.has_value());
  }
  SUBCASE("num_local_experts when n_routed_experts is absent") {
    json j = preset_json("tiny-glm4-moe");
    j["num_local_experts"] = j["n_routed_experts"];
    j.erase("n_routed_experts");
    CHECK(sy::parse_model_config(j, "v5").n_routed_experts == 16);
  }
  SUBCASE("the released spellings of the router (GLM-4.7 states them)") {
    json j = preset_json("tiny-glm4-moe");
    j["scoring_func"] = "sigmoid";
    j["topk_method"] = "noaux_tc";
    CHECK_NOTHROW(sy::parse_model_config(j, "stated"));
  }
  SUBCASE("make-model's config.json names the class and the tokenizer's ids, and parses back the same") {
    const sy::core_testing::TempDir dir;
    sy::MakeModelOptions options;
    options.preset = "tiny-glm4-moe-qk-norm";
    options.out_dir = dir.path();
    const sy::MakeModelSummary made = sy::make_model(options);
    const json written = json::parse(sy::core_testing::read_file(dir / "config.json"));
    CHECK(written["architectures"] == json::array({"Glm4MoeForCausalLM"}));
    CHECK(written["use_qk_norm"] == true);
    CHECK(written["partial_rotary_factor"] == 0.5);
    CHECK_FALSE(written.contains("bos_token_id"));  // GLM's ids 151329.. are past the tiny vocabulary
    const sy::ModelConfig back = sy::load_model_config(dir / "config.json");
    CHECK(back.qk_norm);
    CHECK(back.rope_dim() == made.config.rope_dim());
    CHECK(sy::model_config_to_json(back) == written);
  }
  SUBCASE("the published models' config.json carries GLM's end-of-text ids as a list and no BOS") {
    const json written = sy::model_config_to_json(sy::preset_model_config("glm-4.5-air"));
    CHECK(written["eos_token_id"] == json::array({151329, 151336, 151338}));
    CHECK(written["pad_token_id"] == 151329);
    CHECK_FALSE(written.contains("bos_token_id"));
  }
}

TEST_CASE("glm4_moe: what the engine cannot run is refused, naming the field (exit 1)") {
  struct Case {
    const char* field;
    std::function<void(json&)> mutate;
    std::vector<const char*> problem;
  };
  const std::vector<Case> cases = {
      {"partial_rotary_factor", [](json& j) { j["partial_rotary_factor"] = 0; }, {"outside (0, 1]"}},
      {"partial_rotary_factor", [](json& j) { j["partial_rotary_factor"] = 1.5; }, {"outside (0, 1]"}},
      {"partial_rotary_factor", [](json& j) { j["partial_rotary_factor"] = 0.1875; }, {"turns 3 of head_dim = 16", "even"}},
      {"partial_rotary_factor", [](json& j) { j["partial_rotary_factor"] = 0.05; }, {"turns 0"}},
      {"partial_rotary_factor",
       [](json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", "half"}}; },
       {"rope_parameters", "must be a number"}},
      {"use_qk_norm", [](json& j) { j["use_qk_norm"] = "yes"; }, {"must be true or false"}},
      {"n_shared_experts", [](json& j) { j["n_shared_experts"] = 0; }, {"outside [1, 4096]"}},
      {"n_routed_experts", [](json& j) { j.erase("n_routed_experts"); }, {"is missing"}},
      {"n_group", [](json& j) { j["n_group"] = 3; j["topk_group"] = 2; }, {"must divide n_routed_experts (16)"}},
      {"n_group", [](json& j) { j["n_group"] = 16; j["topk_group"] = 8; }, {"two best", "at most n_routed_experts / 2 = 8"}},
      {"topk_group", [](json& j) { j["topk_group"] = 1; j["num_experts_per_tok"] = 5; },
       {"fewer than num_experts_per_tok = 5", "at least 2"}},
      {"topk_group", [](json& j) { j["topk_group"] = 5; }, {"outside [1, 4]"}},
      {"scoring_func", [](json& j) { j["scoring_func"] = "softmax"; }, {"is 'softmax'", "sigmoid"}},
      {"topk_method", [](json& j) { j["topk_method"] = "greedy"; }, {"is 'greedy'", "noaux_tc"}},
      {"head_dim", [](json& j) { j.erase("head_dim"); j["num_attention_heads"] = 3; j["num_key_value_heads"] = 1; },
       {"64 / 3 is not a whole number"}},
      {"num_key_value_heads", [](json& j) { j["num_key_value_heads"] = 3; }, {"must divide num_attention_heads (4)"}},
      {"routed_scaling_factor", [](json& j) { j["routed_scaling_factor"] = 0; }, {"outside (0, 1000]"}},
  };
  for (const Case& c : cases) {
    json config = preset_json("tiny-glm4-moe");
    c.mutate(config);
    const std::string message = input_error_message([&] { sy::parse_model_config(config, "models/glm/config.json"); });
    INFO("bad " << c.field << ": " << message);
    CHECK(contains(message, "models/glm/config.json"));
    CHECK(contains(message, "'" + std::string(c.field) + "'"));
    for (const char* part : c.problem) CHECK(contains(message, part));
    CHECK(sy::core_testing::input_error_exit_code([&] { sy::parse_model_config(config, "x"); }) == sy::kExitBadContent);
  }
}

TEST_CASE("glm4_moe: the module tree has transformers' names, order and shapes") {
  for (const bool qk_norm : {false, true}) {
    INFO("q/k norms " << qk_norm);
    const sy::ModelConfig c = sy::preset_model_config(qk_norm ? "tiny-glm4-moe-qk-norm" : "tiny-glm4-moe");
    const sy::ModuleTree tree = tree_of(c);
    const std::int64_t h = c.hidden_size, d = c.head_dim, heads = c.num_attention_heads, kv = c.num_key_value_heads;
    CHECK(children(tree, "") == std::vector<std::string>{"model", "lm_head"});
    CHECK(children(tree, "model") == std::vector<std::string>{"embed_tokens", "layers", "norm", "rotary_emb"});
    CHECK(module(tree, "model.layers").children.size() == static_cast<std::size_t>(c.num_hidden_layers));  // no MTP layer
    CHECK(children(tree, "model.layers.0") ==
          std::vector<std::string>{"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"});
    const std::vector<std::string> attention =
        qk_norm ? std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"}
                : std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj"};
    CHECK(children(tree, "model.layers.1.self_attn") == attention);
    const std::string attn = "model.layers.1.self_attn.";
    CHECK(shape_of(tree, attn + "q_proj") == Dims{heads * d, h});
    CHECK(shape_of(tree, attn + "q_proj", "bias") == Dims{heads * d});
    CHECK(shape_of(tree, attn + "k_proj", "bias") == Dims{kv * d});
    CHECK(shape_of(tree, attn + "v_proj", "bias") == Dims{kv * d});
    CHECK_FALSE(has_param(tree, attn + "o_proj", "bias"));
    if (qk_norm) CHECK(shape_of(tree, attn + "q_norm") == Dims{d});

    CHECK(module(tree, "model.layers.0.mlp").cls->name == "Glm4MoeMLP");  // first_k_dense_replace = 1
    CHECK(shape_of(tree, "model.layers.0.mlp.gate_proj") == Dims{c.intermediate_size, h});
    CHECK(children(tree, "model.layers.2.mlp") == std::vector<std::string>{"experts", "gate", "shared_experts"});
    CHECK(module(tree, "model.layers.2.mlp").cls->name == "Glm4MoeMoE");
    CHECK(module(tree, "model.layers.2.mlp.experts").children.size() == static_cast<std::size_t>(c.n_routed_experts));
    CHECK(shape_of(tree, "model.layers.2.mlp.experts.15.down_proj") == Dims{h, c.moe_intermediate_size});
    CHECK(module(tree, "model.layers.2.mlp.gate").cls->name == "Glm4MoeTopkRouter");
    CHECK(shape_of(tree, "model.layers.2.mlp.gate") == Dims{c.n_routed_experts, h});
    CHECK(shape_of(tree, "model.layers.2.mlp.gate", "e_score_correction_bias") == Dims{c.n_routed_experts});
    CHECK(shape_of(tree, "model.layers.2.mlp.shared_experts.up_proj") ==
          Dims{c.moe_intermediate_size * c.n_shared_experts, h});
    CHECK(c.kv_cache_bytes_per_token_per_layer(4) == static_cast<std::uint64_t>(2 * kv * d * 4));
  }
}

TEST_CASE("glm4_moe: the closed-form parameter count of the tree") {
  for (const char* preset : {"tiny-glm4-moe", "tiny-glm4-moe-qk-norm", "glm-4.5-air", "glm-4.5"}) {
    INFO(std::string(preset));
    const sy::ModelConfig c = sy::preset_model_config(preset);
    const std::uint64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
    const std::uint64_t attention = (h + 1) * q + 2 * (h + 1) * kv + q * h + (c.qk_norm ? 2 * c.head_dim : 0);
    const std::uint64_t dense = 3 * h * c.intermediate_size;
    const std::uint64_t moe = c.n_routed_experts * 3 * h * c.moe_intermediate_size + c.n_routed_experts * (h + 1) +
                              3 * h * c.moe_intermediate_size * c.n_shared_experts;
    std::uint64_t expected = 2 * c.vocab_size * h + h;
    for (int layer = 0; layer < c.num_hidden_layers; ++layer)
      expected += attention + (layer < c.first_k_dense_replace ? dense : moe) + 2 * h;
    CHECK(tree_of(c).total_parameter_count() == expected);
  }
}

TEST_CASE("glm4_moe: the shipped profiles place GLM-4.5 as cleanly as GLM-4.5-Air") {
  for (const char* profile : {"GLM-4.5-Air.yaml", "GLM-4.5-Air-cpu.yaml"})
    for (const char* arch : {"glm-4.5-air", "glm-4.5"}) {
      INFO(std::string(profile) << " on " << std::string(arch));
      sy::CheckOptions options;
      options.model.arch = arch;
      options.profile = sy::testing::source_path(std::string("optimize_rules/") + profile);
      const sy::CheckResult result = sy::run_check(options);
      for (const sy::Diagnostic& d : result.diagnostics.items()) INFO(sy::format_diagnostic(d));
      CHECK(result.diagnostics.items().empty());
      const int experts = result.tree->find("model.layers.3.mlp.experts");  // MoE in all three (GLM-4.5: layers 3-91)
      REQUIRE(experts >= 0);
      CHECK(result.plan.owner_of(experts).generate_device.is_cpu());
    }
}
