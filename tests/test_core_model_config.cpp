// ModelConfig parsing (config.json in its HF and transformers-v5 spellings), the built-in presets,
// and the per-layer facts the placement relies on: which layers are MoE, KV-cache bytes.
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/model_config.h"
#include "core/module_tree.h"
#include "core_test_support.h"

namespace sy = switchyard;
using nlohmann::json;
using sy::core_testing::contains;
using sy::core_testing::input_error_message;

namespace {

json preset_json(const std::string& name) {
  const sy::ArchPreset* preset = sy::find_arch_preset(name);
  REQUIRE_MESSAGE(preset != nullptr, "no preset " << name);
  return json::parse(preset->config_json);
}

void check_same_rope(const std::optional<sy::RopeScaling>& a, const std::optional<sy::RopeScaling>& b) {
  REQUIRE(a.has_value() == b.has_value());
  if (!a) return;
  CHECK(a->type == b->type);
  CHECK(a->factor == b->factor);
  CHECK(a->original_max_position_embeddings == b->original_max_position_embeddings);
  CHECK(a->beta_fast == b->beta_fast);
  CHECK(a->beta_slow == b->beta_slow);
  CHECK(a->mscale == b->mscale);
  CHECK(a->mscale_all_dim == b->mscale_all_dim);
}

// Every field but `source`, which names where each config came from.
void check_same_config(const sy::ModelConfig& a, const sy::ModelConfig& b) {
  CHECK(a.arch == b.arch);
  CHECK(a.model_type == b.model_type);
  CHECK(a.vocab_size == b.vocab_size);
  CHECK(a.hidden_size == b.hidden_size);
  CHECK(a.intermediate_size == b.intermediate_size);
  CHECK(a.moe_intermediate_size == b.moe_intermediate_size);
  CHECK(a.num_hidden_layers == b.num_hidden_layers);
  CHECK(a.num_attention_heads == b.num_attention_heads);
  CHECK(a.num_key_value_heads == b.num_key_value_heads);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.q_lora_rank == b.q_lora_rank);
  CHECK(a.kv_lora_rank == b.kv_lora_rank);
  CHECK(a.qk_nope_head_dim == b.qk_nope_head_dim);
  CHECK(a.qk_rope_head_dim == b.qk_rope_head_dim);
  CHECK(a.v_head_dim == b.v_head_dim);
  CHECK(a.n_routed_experts == b.n_routed_experts);
  CHECK(a.n_shared_experts == b.n_shared_experts);
  CHECK(a.num_experts_per_tok == b.num_experts_per_tok);
  CHECK(a.first_k_dense_replace == b.first_k_dense_replace);
  CHECK(a.moe_layer_freq == b.moe_layer_freq);
  CHECK(a.decoder_sparse_step == b.decoder_sparse_step);
  CHECK(a.mlp_only_layers == b.mlp_only_layers);
  CHECK(a.n_group == b.n_group);
  CHECK(a.topk_group == b.topk_group);
  CHECK(a.topk_method == b.topk_method);
  CHECK(a.scoring_func == b.scoring_func);
  CHECK(a.norm_topk_prob == b.norm_topk_prob);
  CHECK(a.routed_scaling_factor == b.routed_scaling_factor);
  CHECK(a.rope_theta == b.rope_theta);
  check_same_rope(a.rope_scaling, b.rope_scaling);
  CHECK(a.max_position_embeddings == b.max_position_embeddings);
  CHECK(a.rms_norm_eps == b.rms_norm_eps);
  CHECK(a.tie_word_embeddings == b.tie_word_embeddings);
  CHECK(a.attention_bias == b.attention_bias);
  CHECK(a.num_nextn_predict_layers == b.num_nextn_predict_layers);
  CHECK(a.torch_dtype == b.torch_dtype);
}

std::vector<int> moe_layers(const sy::ModelConfig& config) {
  std::vector<int> layers;
  for (int layer = 0; layer < config.num_hidden_layers; ++layer)
    if (config.is_moe_layer(layer)) layers.push_back(layer);
  return layers;
}

}  // namespace

TEST_CASE("core: every architecture preset parses and names its family") {
  REQUIRE_FALSE(sy::arch_presets().empty());
  std::set<std::string> names;
  for (const sy::ArchPreset& preset : sy::arch_presets()) {
    INFO("preset " << preset.name);
    CHECK(names.insert(preset.name).second);
    CHECK(sy::find_arch_preset(preset.name) == &preset);
    sy::ModelConfig config;
    REQUIRE_NOTHROW(config = sy::preset_model_config(preset.name));
    CHECK(config.model_type == sy::architecture_model_type(config.arch));
    CHECK(config.source == "preset " + preset.name);
    CHECK(config.num_experts_per_tok <= config.n_routed_experts);
  }
}

TEST_CASE("core: an unknown preset name throws InputError with a suggestion") {
  const std::string message = input_error_message([] { sy::preset_model_config("deepseek-v4"); });
  CHECK(contains(message, "unknown --arch 'deepseek-v4'"));
  CHECK(contains(message, "did you mean 'deepseek-v3'"));
  CHECK(contains(message, "tiny-mixtral"));  // the list of presets
  CHECK(sy::find_arch_preset("deepseek-v4") == nullptr);
}

TEST_CASE("core: preset parameter counts match the published model sizes") {
  struct Published {
    const char* preset;
    double parameters;
    double tolerance;  // fraction of `parameters`
  };
  // DeepSeek-V3's 671B excludes its MTP layer, which the tree does not place either.
  const Published published[] = {
      {"deepseek-v3", 671e9, 0.005},      {"deepseek-v2", 236e9, 0.01},  {"deepseek-v2-lite", 15.7e9, 0.02},
      {"qwen3-30b-a3b", 30.5e9, 0.02}, {"mixtral-8x7b", 46.7e9, 0.01},
  };
  const sy::WeightScheme* bf16 = sy::find_weight_scheme("bf16");
  REQUIRE(bf16 != nullptr);
  for (const Published& model : published) {
    const sy::ModuleTree tree = sy::build_module_tree(sy::preset_model_config(model.preset), *bf16);
    const double count = static_cast<double>(tree.total_parameter_count());
    INFO(model.preset << ": " << count / 1e9 << "B parameters, published " << model.parameters / 1e9 << "B");
    CHECK(std::abs(count - model.parameters) <= model.tolerance * model.parameters);
  }
}

TEST_CASE("core: rope_scaling and transformers v5 rope_parameters give the same RopeScaling") {
  sy::core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  // Values no default could produce, so a field that is not read shows up as a difference.
  const double theta = static_cast<double>(rng.between(20000, 2000000));
  json classic = preset_json("tiny-deepseek-v3");
  classic["rope_theta"] = theta;
  classic["rope_scaling"] = {{"type", "yarn"},
                             {"factor", static_cast<double>(rng.between(2, 64))},
                             {"original_max_position_embeddings", rng.between(512, 8192)},
                             {"beta_fast", static_cast<double>(rng.between(8, 64))},
                             {"beta_slow", static_cast<double>(rng.between(2, 4))},
                             {"mscale", 0.5 + static_cast<double>(rng.between(1, 100)) / 100},
                             {"mscale_all_dim", 0.5 + static_cast<double>(rng.between(1, 100)) / 100}};

  json v5 = classic;
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = classic["rope_scaling"];
  v5["rope_parameters"].erase("type");
  v5["rope_parameters"]["rope_type"] = "yarn";
  v5["rope_parameters"]["rope_theta"] = theta;

  const sy::ModelConfig a = sy::parse_model_config(classic, "classic/config.json");
  const sy::ModelConfig b = sy::parse_model_config(v5, "v5/config.json");
  REQUIRE(a.rope_scaling.has_value());
  CHECK(a.rope_scaling->factor == classic["rope_scaling"]["factor"].get<double>());
  check_same_rope(a.rope_scaling, b.rope_scaling);
  CHECK(a.rope_theta == theta);
  CHECK(b.rope_theta == theta);

  SUBCASE("rope_type default in rope_parameters means no scaling, with its theta") {
    json plain = v5;
    plain["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", theta}};
    const sy::ModelConfig c = sy::parse_model_config(plain, "plain/config.json");
    CHECK_FALSE(c.rope_scaling.has_value());
    CHECK(c.rope_theta == theta);
  }
  SUBCASE("rope_scaling: null means no scaling") {
    json none = classic;
    none["rope_scaling"] = nullptr;
    CHECK_FALSE(sy::parse_model_config(none, "none/config.json").rope_scaling.has_value());
  }
}

TEST_CASE("core: q_lora_rank null or absent means q_proj, a number means q_a/q_b") {
  json config = preset_json("tiny-deepseek-v3");
  const std::int64_t rank = config["q_lora_rank"].get<std::int64_t>();
  CHECK(sy::parse_model_config(config, "with").q_lora_rank == rank);
  config["q_lora_rank"] = nullptr;
  CHECK_FALSE(sy::parse_model_config(config, "null").q_lora_rank.has_value());
  config.erase("q_lora_rank");
  CHECK_FALSE(sy::parse_model_config(config, "absent").q_lora_rank.has_value());
  CHECK_FALSE(sy::preset_model_config("deepseek-v2-lite").q_lora_rank.has_value());
}

TEST_CASE("core: broken config.json fields throw InputError naming the field") {
  struct Case {
    const char* preset;
    const char* field;
    std::function<void(json&)> mutate;
    const char* problem;  // part of the message after the field name
  };
  const std::vector<Case> cases = {
      {"tiny-deepseek-v3", "model_type", [](json& j) { j["model_type"] = "llama"; }, "not supported"},
      {"tiny-deepseek-v3", "model_type", [](json& j) { j.erase("model_type"); }, "is missing"},
      {"tiny-deepseek-v3", "hidden_size", [](json& j) { j.erase("hidden_size"); }, "is missing"},
      {"tiny-deepseek-v3", "kv_lora_rank", [](json& j) { j.erase("kv_lora_rank"); }, "is missing"},
      {"tiny-qwen3-moe", "num_experts", [](json& j) { j.erase("num_experts"); }, "is missing"},
      {"tiny-mixtral", "num_local_experts", [](json& j) { j.erase("num_local_experts"); }, "is missing"},
      {"tiny-mixtral", "hidden_size", [](json& j) { j["hidden_size"] = "big"; }, "must be an integer"},
      {"tiny-mixtral", "hidden_size", [](json& j) { j["hidden_size"] = 64.5; }, "must be an integer"},
      {"tiny-mixtral", "rms_norm_eps", [](json& j) { j["rms_norm_eps"] = "small"; }, "must be a number"},
      {"tiny-mixtral", "tie_word_embeddings", [](json& j) { j["tie_word_embeddings"] = 1; }, "must be true or false"},
      {"tiny-mixtral", "torch_dtype", [](json& j) { j["torch_dtype"] = 16; }, "must be a string"},
      {"tiny-mixtral", "num_hidden_layers", [](json& j) { j["num_hidden_layers"] = 100000; }, "is 100000, outside"},
      {"tiny-mixtral", "num_hidden_layers", [](json& j) { j["num_hidden_layers"] = 0; }, "is 0, outside"},
      {"tiny-mixtral", "vocab_size", [](json& j) { j["vocab_size"] = -512; }, "outside"},
      {"tiny-mixtral", "num_experts_per_tok", [](json& j) { j["num_experts_per_tok"] = 5; }, "outside [1, 4]"},
      {"tiny-qwen3-moe", "num_key_value_heads", [](json& j) { j["num_key_value_heads"] = 3; }, "must divide"},
      {"tiny-qwen3-moe", "mlp_only_layers", [](json& j) { j["mlp_only_layers"] = "all"; }, "must be a list"},
      {"tiny-qwen3-moe", "mlp_only_layers", [](json& j) { j["mlp_only_layers"] = {0, "1"}; }, "must hold integers"},
      {"tiny-deepseek-v3", "n_routed_experts", [](json& j) { j["n_routed_experts"] = 5000; }, "outside"},
      {"tiny-deepseek-v3", "qk_rope_head_dim", [](json& j) { j["qk_rope_head_dim"] = 7; }, "must be even"},
      {"tiny-deepseek-v3", "topk_method", [](json& j) { j["topk_method"] = "random"; }, "is 'random'"},
      {"tiny-deepseek-v3", "n_group", [](json& j) { j["n_group"] = 3; }, "must divide n_routed_experts"},
      {"tiny-deepseek-v3", "topk_group", [](json& j) { j["topk_group"] = 5; }, "outside [1, 4]"},
      {"tiny-deepseek-v3", "rope_scaling", [](json& j) { j["rope_scaling"] = "yarn"; }, "must be an object"},
      {"tiny-deepseek-v3", "factor", [](json& j) { j["rope_scaling"]["factor"] = "x"; }, "must be a number"},
      {"tiny-deepseek-v3", "rope_parameters", [](json& j) { j["rope_parameters"] = 4; }, "must be an object"},
  };
  for (const Case& c : cases) {
    json config = preset_json(c.preset);
    c.mutate(config);
    const std::string message = input_error_message([&] { sy::parse_model_config(config, "models/x/config.json"); });
    INFO(c.preset << " with bad " << c.field << ": " << message);
    CHECK(contains(message, "models/x/config.json"));
    CHECK(contains(message, "'" + std::string(c.field) + "'"));
    CHECK(contains(message, c.problem));
  }
  CHECK(contains(input_error_message([] { sy::parse_model_config(json::array({1, 2}), "list.json"); }),
                 "list.json: expected a JSON object"));
}

TEST_CASE("core: load_model_config reports unreadable and invalid files") {
  const sy::core_testing::TempDir dir;
  CHECK(contains(input_error_message([&] { sy::load_model_config(dir / "config.json"); }), "cannot open"));
  sy::core_testing::write_file(dir / "config.json", "{\"model_type\": \"mixtral\",");
  CHECK(contains(input_error_message([&] { sy::load_model_config(dir / "config.json"); }), "not valid JSON"));
  const sy::ModelConfig preset = sy::preset_model_config("tiny-qwen3-moe");
  sy::core_testing::write_file(dir / "config.json", sy::model_config_to_json(preset).dump(2));
  const sy::ModelConfig loaded = sy::load_model_config(dir / "config.json");
  CHECK(loaded.source == (dir / "config.json").string());
  check_same_config(loaded, preset);
}

TEST_CASE("core: model_config_to_json round-trips every preset") {
  for (const sy::ArchPreset& preset : sy::arch_presets()) {
    INFO("preset " << preset.name);
    const sy::ModelConfig original = sy::preset_model_config(preset.name);
    const json written = sy::model_config_to_json(original);
    // Through text too, as a config.json written to disk would be.
    const sy::ModelConfig reparsed = sy::parse_model_config(json::parse(written.dump()), "round trip");
    check_same_config(original, reparsed);
    CHECK(sy::model_config_to_json(reparsed) == written);
  }
}

TEST_CASE("core: is_moe_layer follows first_k_dense_replace and moe_layer_freq (DeepSeek)") {
  json config = preset_json("tiny-deepseek-v3");
  config["num_hidden_layers"] = 8;
  config["first_k_dense_replace"] = 3;
  CHECK(moe_layers(sy::parse_model_config(config, "k3")) == std::vector<int>{3, 4, 5, 6, 7});
  config["moe_layer_freq"] = 2;
  CHECK(moe_layers(sy::parse_model_config(config, "k3 freq2")) == std::vector<int>{4, 6});
  config["first_k_dense_replace"] = 0;
  config["moe_layer_freq"] = 1;
  CHECK(moe_layers(sy::parse_model_config(config, "k0")).size() == 8);

  const sy::ModelConfig v3 = sy::preset_model_config("deepseek-v3");
  const std::vector<int> layers = moe_layers(v3);
  CHECK(layers.size() == static_cast<std::size_t>(v3.num_hidden_layers - v3.first_k_dense_replace));
  REQUIRE_FALSE(layers.empty());
  CHECK(layers.front() == v3.first_k_dense_replace);
}

TEST_CASE("core: is_moe_layer follows mlp_only_layers and decoder_sparse_step (Qwen3-MoE)") {
  json config = preset_json("tiny-qwen3-moe");
  config["num_hidden_layers"] = 6;
  CHECK(moe_layers(sy::parse_model_config(config, "all")) == std::vector<int>{0, 1, 2, 3, 4, 5});
  config["mlp_only_layers"] = {0, 4};
  CHECK(moe_layers(sy::parse_model_config(config, "mlp only")) == std::vector<int>{1, 2, 3, 5});
  config["mlp_only_layers"] = json::array();
  config["decoder_sparse_step"] = 2;  // layers whose (index + 1) is a multiple of the step
  CHECK(moe_layers(sy::parse_model_config(config, "step 2")) == std::vector<int>{1, 3, 5});
  config["decoder_sparse_step"] = 3;
  config["mlp_only_layers"] = {5};
  CHECK(moe_layers(sy::parse_model_config(config, "step 3")) == std::vector<int>{2});

  const sy::ModelConfig mixtral = sy::preset_model_config("tiny-mixtral");
  CHECK(moe_layers(mixtral).size() == static_cast<std::size_t>(mixtral.num_hidden_layers));
}

TEST_CASE("core: KV-cache bytes per token per layer for MLA and GQA") {
  for (const int element_bytes : {1, 2, 4}) {
    INFO("element bytes " << element_bytes);
    for (const char* name : {"deepseek-v3", "deepseek-v2-lite", "tiny-deepseek-v2"}) {
      INFO(name);
      const sy::ModelConfig c = sy::preset_model_config(name);  // MLA: the latent plus the shared rope key
      CHECK(c.kv_cache_bytes_per_token_per_layer(element_bytes) ==
            static_cast<std::uint64_t>((c.kv_lora_rank + c.qk_rope_head_dim) * element_bytes));
    }
    for (const char* name : {"qwen3-30b-a3b", "mixtral-8x7b", "tiny-qwen3-moe", "tiny-mixtral"}) {
      INFO(name);
      const sy::ModelConfig c = sy::preset_model_config(name);  // GQA: K and V per KV head
      CHECK(c.kv_cache_bytes_per_token_per_layer(element_bytes) ==
            static_cast<std::uint64_t>(2 * c.num_key_value_heads * c.head_dim * element_bytes));
    }
  }
  SUBCASE("MLA does not grow with the head count; GQA grows with the KV heads") {
    json deepseek = preset_json("tiny-deepseek-v3");
    const std::uint64_t mla = sy::parse_model_config(deepseek, "4 heads").kv_cache_bytes_per_token_per_layer(2);
    deepseek["num_attention_heads"] = deepseek["num_key_value_heads"] = 16;
    CHECK(sy::parse_model_config(deepseek, "16 heads").kv_cache_bytes_per_token_per_layer(2) == mla);

    json qwen = preset_json("tiny-qwen3-moe");
    const std::uint64_t gqa = sy::parse_model_config(qwen, "2 kv").kv_cache_bytes_per_token_per_layer(2);
    qwen["num_key_value_heads"] = 2 * qwen["num_key_value_heads"].get<int>();
    CHECK(sy::parse_model_config(qwen, "4 kv").kv_cache_bytes_per_token_per_layer(2) == 2 * gqa);
  }
}
