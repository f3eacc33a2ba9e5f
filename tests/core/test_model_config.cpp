// ModelConfig parsing (config.json in its HF and transformers-v5 spellings), the built-in presets,
// and the per-layer facts the placement relies on: which layers are MoE, KV-cache bytes.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/input_file.h"
#include "core/model_config.h"
#include "core/module_tree.h"
#include "tests/core_test_support.h"
#include "operators/ops/attention_op.h"
#include "operators/cpu/kernels/moe_gate.h"
#include "operators/cpu/kernels/rope.h"
#include "operators/ops/feed_forward_op.h"

namespace sy = switchyard;
using nlohmann::json;
using sy::core_testing::contains;
using sy::core_testing::input_error_exit_code;
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
  CHECK(a.family == b.family);
  CHECK(a.model_type == b.model_type);
  CHECK(a.vocab_size == b.vocab_size);
  CHECK(a.hidden_size == b.hidden_size);
  CHECK(a.intermediate_size == b.intermediate_size);
  CHECK(a.moe_intermediate_size == b.moe_intermediate_size);
  CHECK(a.num_hidden_layers == b.num_hidden_layers);
  CHECK(a.num_attention_heads == b.num_attention_heads);
  CHECK(a.num_key_value_heads == b.num_key_value_heads);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.partial_rotary_factor == b.partial_rotary_factor);
  CHECK(a.qk_norm == b.qk_norm);
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
    REQUIRE(config.family != nullptr);
    CHECK(config.model_type == config.family->model_type);
    CHECK(sy::find_model_family(config.model_type) == config.family);
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
  CHECK(contains(input_error_message([&] { sy::load_model_config(dir / "config.json"); }), "no such file"));
  sy::core_testing::write_file(dir / "config.json", "{\"model_type\": \"mixtral\",");
  CHECK(contains(input_error_message([&] { sy::load_model_config(dir / "config.json"); }), "not JSON"));
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

TEST_CASE("core: config values that run would refuse or turn into NaN are refused, naming the field (exit 1)") {
  struct Case {
    const char* preset;
    const char* field;
    std::function<void(json&)> mutate;
    std::vector<const char*> problem;  // parts of the message after the field name
  };
  const std::vector<Case> cases = {
      // The MoE gate's own checks (operators/cpu/kernels/moe_gate.cpp), which run met first as "internal error".
      {"tiny-deepseek-v3", "n_group", [](json& j) { j["n_group"] = j["n_routed_experts"]; }, {"at most n_routed_experts / 2 = 8"}},
      {"tiny-deepseek-v3", "topk_group", [](json& j) { j["n_group"] = 8; j["topk_group"] = 1; j["num_experts_per_tok"] = 3; },
       {"fewer than num_experts_per_tok = 3", "at least 2"}},
      {"deepseek-v2", "topk_group", [](json& j) { j["topk_group"] = 1; j["num_experts_per_tok"] = 21; },
       {"kept groups of 20 experts", "at least 2"}},
      {"deepseek-v2", "n_group", [](json& j) { j["n_group"] = 7; }, {"must divide n_routed_experts (160)"}},
      // RoPE rotates pairs, at most 1024 dimensions.
      {"tiny-mixtral", "head_dim", [](json& j) { j["head_dim"] = 15; }, {"is 15", "must be even"}},
      {"tiny-qwen3-moe", "head_dim", [](json& j) { j["head_dim"] = 2048; }, {"outside [2, 1024]"}},
      {"tiny-mixtral", "head_dim", [](json& j) { j["num_attention_heads"] = 6; j["num_key_value_heads"] = 2; },
       {"is absent", "64 / 6 is not a whole number"}},
      {"tiny-mixtral", "head_dim", [](json& j) { j["hidden_size"] = 60; }, {"is 15", "hidden_size / num_attention_heads", "even"}},
      {"tiny-mixtral", "head_dim", [](json& j) { j["hidden_size"] = 4; }, {"is 1", "even"}},
      {"tiny-deepseek-v3", "qk_rope_head_dim", [](json& j) { j["qk_rope_head_dim"] = 1026; }, {"outside [2, 1024]"}},
      // Values that ran, silently, to NaN (every generated id 0).
      {"tiny-mixtral", "rms_norm_eps", [](json& j) { j["rms_norm_eps"] = 0; }, {"is 0, outside [1e-30, 1]"}},
      {"tiny-mixtral", "rms_norm_eps", [](json& j) { j["rms_norm_eps"] = -1e-6; }, {"outside [1e-30, 1]"}},
      {"tiny-mixtral", "rms_norm_eps", [](json& j) { j["rms_norm_eps"] = 1e300; }, {"outside [1e-30, 1]"}},
      {"tiny-mixtral", "rms_norm_eps", [](json& j) { j["rms_norm_eps"] = 1e-40; }, {"outside [1e-30, 1]"}},
      {"tiny-mixtral", "rope_theta", [](json& j) { j["rope_theta"] = 0; }, {"is 0, outside (1, 1e+12]"}},
      {"tiny-mixtral", "rope_theta", [](json& j) { j["rope_theta"] = -10000.0; }, {"outside (1, 1e+12]"}},
      {"tiny-qwen3-moe", "rope_theta", [](json& j) { j["rope_theta"] = 1; }, {"outside (1, 1e+12]"}},
      {"tiny-deepseek-v3", "factor", [](json& j) { j["rope_scaling"]["factor"] = 0; }, {"rope_scaling", "outside [1, 1e+06]"}},
      {"tiny-deepseek-v3", "beta_fast", [](json& j) { j["rope_scaling"]["beta_fast"] = 0; }, {"outside (0, 10000]"}},
      {"tiny-deepseek-v3", "beta_slow", [](json& j) { j["rope_scaling"]["beta_slow"] = -1; }, {"outside (0, 10000]"}},
      {"tiny-deepseek-v3", "mscale_all_dim", [](json& j) { j["rope_scaling"]["mscale_all_dim"] = -2.5; }, {"outside [0, 1000]"}},
      {"tiny-deepseek-v3", "routed_scaling_factor", [](json& j) { j["routed_scaling_factor"] = -1e308; },
       {"is -1e+308, outside (0, 1000]"}},
      {"tiny-deepseek-v3", "routed_scaling_factor", [](json& j) { j["routed_scaling_factor"] = 0; }, {"outside (0, 1000]"}},
      // Accepted silently before, and run as something else.
      {"tiny-deepseek-v3", "scoring_func", [](json& j) { j["scoring_func"] = "relu"; }, {"is 'relu'", "sigmoid"}},
      {"tiny-deepseek-v3", "scoring_func", [](json& j) { j["scoring_func"] = "softmax"; }, {"is 'softmax'", "sigmoid"}},
      {"tiny-deepseek-v2", "scoring_func", [](json& j) { j["scoring_func"] = "sigmoid"; }, {"is 'sigmoid'", "softmax"}},
      {"tiny-deepseek-v3", "topk_method", [](json& j) { j["topk_method"] = "greedy"; }, {"is 'greedy'", "noaux_tc only"}},
      {"tiny-deepseek-v2", "topk_method", [](json& j) { j["topk_method"] = "noaux_tc"; }, {"is 'noaux_tc'", "group_limited_greedy"}},
      {"tiny-mixtral", "rope_theta", [](json& j) { j["rope_theta"] = "1e6"; }, {"must be a number, got \"1e6\""}},
      {"tiny-mixtral", "rope_theta",
       [](json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", "1e6"}}; },
       {"rope_parameters", "must be a number"}},
      {"tiny-qwen3-moe", "mlp_only_layers", [](json& j) { j["mlp_only_layers"] = {-1}; }, {"holds -1", "[0, num_hidden_layers = 3)"}},
      {"tiny-qwen3-moe", "mlp_only_layers", [](json& j) { j["mlp_only_layers"] = {0, 1000000000000LL}; }, {"holds 1000000000000"}},
      {"tiny-qwen3-moe", "mlp_only_layers", [](json& j) { j["mlp_only_layers"] = {3}; }, {"holds 3"}},
      {"tiny-qwen3-moe", "mlp_only_layers", [](json& j) { j["mlp_only_layers"] = {1e12}; }, {"must hold integers"}},
      {"tiny-qwen3-moe", "mlp_only_layers",
       [](json& j) { j["mlp_only_layers"] = {std::numeric_limits<std::uint64_t>::max()}; }, {"holds 18446744073709551615"}},
      // What run refused after check had passed it.
      {"tiny-deepseek-v3", "type", [](json& j) { j["rope_scaling"]["type"] = "linear"; }, {"'linear'", "not supported"}},
      {"tiny-qwen3-moe", "rope_type", [](json& j) { j["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}}; },
       {"rope_parameters", "'dynamic'"}},
      {"tiny-mixtral", "tie_word_embeddings", [](json& j) { j["tie_word_embeddings"] = true; }, {"not supported"}},
      {"tiny-mixtral", "num_hidden_layers", [](json& j) { j["num_hidden_layers"] = 18446744073709551615ULL; },
       {"is 18446744073709551615, outside [1, 1024]"}},
  };
  for (const Case& c : cases) {
    json config = preset_json(c.preset);
    c.mutate(config);
    const std::string message = input_error_message([&] { sy::parse_model_config(config, "models/x/config.json"); });
    INFO(c.preset << " with bad " << c.field << ": " << message);
    CHECK(contains(message, "models/x/config.json"));
    CHECK(contains(message, "'" + std::string(c.field) + "'"));
    for (const char* part : c.problem) CHECK(contains(message, part));
    CHECK(input_error_exit_code([&] { sy::parse_model_config(config, "models/x/config.json"); }) == sy::kExitBadContent);
  }
}

TEST_CASE("core: the edges of each float range are accepted") {
  struct Edge {
    const char* preset;
    std::function<void(json&)> mutate;
  };
  const std::vector<Edge> edges = {
      {"tiny-mixtral", [](json& j) { j["rms_norm_eps"] = 1e-30; }},
      {"tiny-mixtral", [](json& j) { j["rms_norm_eps"] = 1; }},
      {"tiny-mixtral", [](json& j) { j["rope_theta"] = 1.0001; }},
      {"tiny-mixtral", [](json& j) { j["rope_theta"] = 1e12; }},
      {"tiny-deepseek-v3", [](json& j) { j["routed_scaling_factor"] = 1e-9; }},
      {"tiny-deepseek-v3", [](json& j) { j["routed_scaling_factor"] = 1000; }},
      {"tiny-deepseek-v3", [](json& j) { j["rope_scaling"]["factor"] = 1; }},
      {"tiny-deepseek-v3", [](json& j) { j["rope_scaling"]["mscale"] = 0; }},
      {"tiny-deepseek-v3", [](json& j) { j["n_group"] = 8; j["topk_group"] = 2; }},  // 2 groups of 2 hold the 4
  };
  for (std::size_t i = 0; i < edges.size(); ++i) {
    json config = preset_json(edges[i].preset);
    edges[i].mutate(config);
    INFO("edge " << i << ": " << config.dump());
    CHECK_NOTHROW(sy::parse_model_config(config, "edge"));
  }
  SUBCASE("YaRN without original_max_position_embeddings uses max_position_embeddings, as transformers") {
    json config = preset_json("tiny-deepseek-v3");
    config["rope_scaling"].erase("original_max_position_embeddings");
    const sy::ModelConfig c = sy::parse_model_config(config, "no original");
    REQUIRE(c.rope_scaling.has_value());
    CHECK(c.rope_scaling->original_max_position_embeddings == config["max_position_embeddings"].get<std::int64_t>());
  }
}

TEST_CASE("core: DeepSeek routing is accepted exactly when the MoE gate can route it") {
  sy::core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  int accepted = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    sy::ModelConfig c = sy::preset_model_config(rng.below(2) ? "tiny-deepseek-v3" : "deepseek-v2");
    c.n_routed_experts = static_cast<int>(rng.between(1, 64));
    c.n_group = static_cast<int>(rng.between(1, c.n_routed_experts));
    c.topk_group = static_cast<int>(rng.between(1, c.n_group));  // parse_model_config's own range
    c.num_experts_per_tok = static_cast<int>(rng.between(1, c.n_routed_experts));
    if (c.model_type == "deepseek_v2") c.topk_method = rng.below(2) ? "greedy" : "group_limited_greedy";
    INFO(c.model_type << " " << c.topk_method << ": " << c.n_routed_experts << " experts, n_group " << c.n_group
                      << ", topk_group " << c.topk_group << ", top_k " << c.num_experts_per_tok);
    const std::vector<float> bias(static_cast<std::size_t>(c.n_routed_experts), 0.0f);
    bool gate_routes = true;
    try {  // with no tokens the gate validates its config and touches nothing else
      sy::cpu::moe_gate(sy::gate_config(c, bias.data()), nullptr, 0, nullptr, nullptr);
    } catch (const std::invalid_argument&) {
      gate_routes = false;
    }
    const std::string message = input_error_message([&] { sy::validate_model_config(c); });
    REQUIRE((message == "<no exception>") == gate_routes);
    if (!gate_routes) {
      CHECK((contains(message, "'n_group'") || contains(message, "'topk_group'")));
      ++refused;
    } else {
      ++accepted;
    }
  }
  CHECK(accepted > 100);
  CHECK(refused > 100);
}

TEST_CASE("core: head widths are accepted exactly when the RoPE kernel rotates them") {
  sy::core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  const auto rope_rotates = [](std::int64_t dim) {
    try {
      switchyard::rope_frequencies_default(static_cast<int>(dim), 10000.0);
      return true;
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  int accepted = 0;
  for (int round = 0; round < 2000; ++round) {
    json config = preset_json(rng.below(2) ? "tiny-mixtral" : "tiny-qwen3-moe");
    const std::int64_t heads = rng.between(1, 16);
    config["num_attention_heads"] = heads;
    config["num_key_value_heads"] = 1;
    std::int64_t head_dim = 0;
    if (rng.below(2)) {
      head_dim = rng.between(2, 1100);
      config["head_dim"] = head_dim;
    } else {  // the default: hidden_size / num_attention_heads, when whole
      config.erase("head_dim");
      config["hidden_size"] = rng.between(1, 4096);
      head_dim = config["hidden_size"].get<std::int64_t>() % heads ? 0 : config["hidden_size"].get<std::int64_t>() / heads;
    }
    INFO(config.dump());
    const std::string message = input_error_message([&] { sy::parse_model_config(config, "heads"); });
    const bool expected = head_dim > 0 && rope_rotates(head_dim);
    REQUIRE((message == "<no exception>") == expected);
    if (!expected) CHECK(contains(message, "'head_dim'"));
    accepted += expected;
  }
  CHECK(accepted > 100);
}

TEST_CASE("core: every float a config.json can hold is refused or gives finite RoPE and routing factors") {
  sy::core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  // Log-uniform magnitudes from 1e-45 to 1e300, either sign, and the values at the edges.
  const auto any_double = [&] {
    switch (rng.below(6)) {
      case 0: return 0.0;
      case 1: return static_cast<double>(rng.between(-4, 70000));
      default: {
        const double magnitude = std::pow(10.0, static_cast<double>(rng.between(-45, 300)) + static_cast<double>(rng.below(1000)) / 1000);
        return rng.below(4) ? magnitude : -magnitude;
      }
    }
  };
  const char* rope_fields[] = {"factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim"};
  int accepted = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    json config = preset_json("tiny-deepseek-v3");
    std::vector<std::string> changed;
    for (const char* top : {"rms_norm_eps", "rope_theta", "routed_scaling_factor"})
      if (rng.below(3) == 0) {
        config[top] = any_double();
        changed.push_back(top);
      }
    for (const char* field : rope_fields)
      if (rng.below(3) == 0) {
        config["rope_scaling"][field] = any_double();
        changed.push_back(field);
      }
    INFO(config.dump());
    sy::ModelConfig c;
    const std::string message = input_error_message([&] { c = sy::parse_model_config(config, "floats"); });
    if (message != "<no exception>") {
      bool names_a_changed_field = false;
      for (const std::string& field : changed) names_a_changed_field |= contains(message, "'" + field + "'");
      CHECK_MESSAGE(names_a_changed_field, message);
      ++refused;
      continue;
    }
    ++accepted;
    const auto eps = static_cast<float>(c.rms_norm_eps);
    CHECK(std::isnormal(eps));
    CHECK(eps > 0);
    CHECK(std::isfinite(static_cast<float>(c.routed_scaling_factor)));
    CHECK(c.routed_scaling_factor > 0);
    const switchyard::RopeFrequencies f = sy::rope_frequencies(c, c.qk_rope_head_dim);
    CHECK(std::isfinite(f.attention_factor));
    CHECK(f.attention_factor > 0);
    for (const float inv_freq : f.inv_freq) REQUIRE(std::isfinite(inv_freq));
    CHECK(std::isfinite(sy::mla_softmax_scale(c)));
  }
  CHECK(accepted > 50);
  CHECK(refused > 50);
}

TEST_CASE("core: validate_model_config holds a changed layer count to mlp_only_layers") {
  json config = preset_json("tiny-qwen3-moe");
  config["num_hidden_layers"] = 6;
  config["mlp_only_layers"] = {4};
  sy::ModelConfig c = sy::parse_model_config(config, "six layers");
  c.num_hidden_layers = 5;
  CHECK_NOTHROW(sy::validate_model_config(c));
  c.num_hidden_layers = 4;  // as make-model --layers 4 would
  const std::string message = input_error_message([&] { sy::validate_model_config(c); });
  CHECK(contains(message, "six layers: field 'mlp_only_layers' holds 4"));
  CHECK(contains(message, "num_hidden_layers = 4"));
}

TEST_CASE("core: load_model_config reads only a regular config.json under its cap") {
  sy::core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  const sy::core_testing::TempDir dir;
  const std::filesystem::path config = dir / "config.json";
  const auto load = [&] { sy::load_model_config(config); };

  SUBCASE("a directory is named as one, not as bad JSON (exit 2)") {
    std::filesystem::create_directory(config);
    CHECK(contains(input_error_message(load), "is a directory"));
    CHECK(input_error_exit_code(load) == sy::kExitUsageOrIo);
  }
  SUBCASE("a link to /dev/zero is refused, not read forever (exit 2)") {
    std::filesystem::create_symlink("/dev/zero", config);
    CHECK(contains(input_error_message(load), "is a character device"));
    CHECK(input_error_exit_code(load) == sy::kExitUsageOrIo);
  }
  SUBCASE("a FIFO is refused without waiting for a writer (exit 2)") {
    REQUIRE(::mkfifo(config.c_str(), 0600) == 0);
    CHECK(contains(input_error_message(load), "is a FIFO"));
  }
  SUBCASE("a link loop is an InputError naming the file") {
    std::filesystem::create_symlink(dir / "loop", config);
    std::filesystem::create_symlink(config, dir / "loop");
    const std::string message = input_error_message(load);
    CHECK(contains(message, config.string()));
    CHECK(input_error_exit_code(load) == sy::kExitUsageOrIo);
  }
  SUBCASE("a file larger than 16 MiB is refused by size, not parsed") {
    sy::core_testing::write_file(config, "{");
    std::filesystem::resize_file(config, sy::kMaxConfigJsonBytes + 1 + rng.below(1 << 20));
    CHECK(contains(input_error_message(load), "config.json larger than 16.0 MiB"));
  }
  SUBCASE("content errors exit 1: invalid JSON, a number past a double's range, a bad value") {
    json zero_eps = sy::model_config_to_json(sy::preset_model_config("tiny-mixtral"));
    zero_eps["rms_norm_eps"] = 0;
    for (const std::string& text : {std::string("{\"model_type\": \"mixtral\","), std::string("{\"rope_theta\": 1e999}"),
                                    std::string("[1, 2]"), zero_eps.dump()}) {
      INFO(text.substr(0, 80));
      sy::core_testing::write_file(config, text);
      const std::string message = input_error_message(load);
      CHECK(contains(message, config.string()));
      CHECK_FALSE(contains(message, "<not an InputError"));
      CHECK(input_error_exit_code(load) == sy::kExitBadContent);
    }
    CHECK(contains(input_error_message(load), "'rms_norm_eps'"));
  }
}

TEST_CASE("core: config.json nested past the bound, a huge wrong-typed value, a tree past the expert bound") {
  sy::core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  const sy::core_testing::TempDir dir;
  const std::filesystem::path config = dir / "config.json";
  const auto load = [&] { sy::load_model_config(config); };

  SUBCASE("a million nested lists are refused before parsing (they overflowed the stack)") {
    const std::size_t depth = 100000 + rng.below(900000);
    sy::core_testing::write_file(config, "{\"model_type\":\"mixtral\",\"vocab_size\":" + std::string(depth, '[') +
                                             std::string(depth, ']') + "}");
    CHECK(contains(input_error_message(load), "JSON nesting deeper than 64"));
    CHECK(input_error_exit_code(load) == sy::kExitBadContent);
  }
  SUBCASE("nesting inside strings does not count; 64 levels pass the bound and meet the field check") {
    json j = sy::model_config_to_json(sy::preset_model_config("tiny-mixtral"));
    j["comment"] = std::string(1000, '[');
    json nested = 1;
    for (int level = 0; level < 62; ++level) nested = json::array({nested});
    j["vocab_size"] = nested;
    sy::core_testing::write_file(config, j.dump());
    const std::string message = input_error_message(load);
    CHECK(contains(message, "'vocab_size' must be an integer, got a list of 1 value"));
  }
  SUBCASE("a megabyte string in a number's place is quoted in part") {
    json j = sy::model_config_to_json(sy::preset_model_config("tiny-mixtral"));
    j["hidden_size"] = std::string(1 << 20, 'x');
    sy::core_testing::write_file(config, j.dump());
    const std::string message = input_error_message(load);
    CHECK(contains(message, "'hidden_size' must be an integer"));
    CHECK(contains(message, "characters)"));
    CHECK(message.size() < 400);
  }
  SUBCASE("1024 layers of 4096 experts: refused by the layer-expert bound instead of built") {
    json j = sy::model_config_to_json(sy::preset_model_config("tiny-mixtral"));
    j["num_hidden_layers"] = 1024;
    j["num_local_experts"] = 4096;
    sy::core_testing::write_file(config, j.dump());
    const std::string message = input_error_message(load);
    CHECK(contains(message, "'num_local_experts' gives 4194304 routed experts over the MoE layers, more than 262144"));
    // The bound is far above real models: every preset passes, DeepSeek-V3 with 15 k of them.
    for (const sy::ArchPreset& preset : sy::arch_presets()) CHECK_NOTHROW(sy::preset_model_config(preset.name));
  }
}
