// GGUF files as models (core/gguf_model.h): every preset's config survives the trip through
// llama.cpp's metadata keys, every tensor of every tree has one place in the file by llama.cpp's
// names, and a file that does not describe a model we run says which key is at fault.
#include <map>
#include <set>
#include <string>
#include <utility>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/gguf_model.h"
#include "core/module_tree.h"
#include "core/weight_scheme.h"
#include "tests/core_test_support.h"

namespace sy = switchyard;
using nlohmann::json;

namespace {

// What a GGUF does not carry: the MTP layers (not written), the source, and (for DeepSeek) the
// form of an absent field that parse fills in the same.
json comparable(const sy::ModelConfig& config) {
  json j = sy::model_config_to_json(config);
  j.erase("num_nextn_predict_layers");
  j.erase("torch_dtype");
  return j;
}

sy::GgufTensorFacts facts_with_all_tensors(const sy::ModelConfig& config) {
  // The tensors a file written for this config holds, by GGUF name.
  std::set<std::string> names;
  const sy::ModuleTree tree = sy::build_module_tree(config, *sy::find_weight_scheme("bf16"));
  for (const sy::Module& m : tree.modules())
    for (const sy::Parameter& p : m.params) {
      const auto location = sy::gguf_location(config, std::string(m.name) + "." + std::string(p.name));
      if (location) names.insert(location->tensor);
    }
  sy::GgufTensorFacts facts;
  facts.has_tensor = [names](std::string_view name) { return names.count(std::string(name)) > 0; };
  return facts;
}

}  // namespace

TEST_CASE("gguf model: every preset's config comes back from llama.cpp's metadata keys") {
  int presets = 0;
  for (const sy::ArchPreset& preset : sy::arch_presets()) {
    CAPTURE(preset.name);
    const sy::ModelConfig config = sy::preset_model_config(preset.name);
    const json metadata = sy::gguf_metadata(config);
    CHECK(metadata.at("general.architecture") == config.family->gguf.architecture);
    const sy::ModelConfig back = sy::gguf_model_config(metadata, facts_with_all_tensors(config), "test.gguf");
    CHECK(back.family == config.family);
    CHECK(comparable(back).dump(1) == comparable(config).dump(1));
    ++presets;
  }
  CHECK(presets >= 10);
}

TEST_CASE("gguf model: every tensor of every tiny tree has its own place in the file") {
  for (const sy::ArchPreset& preset : sy::arch_presets()) {
    if (!preset.test_size) continue;
    CAPTURE(preset.name);
    const sy::ModelConfig config = sy::preset_model_config(preset.name);
    const sy::ModuleTree tree = sy::build_module_tree(config, *sy::find_weight_scheme("bf16"));
    std::set<std::pair<std::string, int>> places;
    std::map<std::string, std::set<int>> experts_of;  // fused tensor -> the experts sliced from it
    int tensors = 0;
    for (const sy::Module& m : tree.modules())
      for (const sy::Parameter& p : m.params) {
        const std::string name = std::string(m.name) + "." + std::string(p.name);
        CAPTURE(name);
        const auto location = sy::gguf_location(config, name);
        REQUIRE(location.has_value());
        CHECK(places.insert({location->tensor, location->expert}).second);  // no two tensors share a place
        if (location->expert >= 0) experts_of[location->tensor].insert(location->expert);
        ++tensors;
      }
    CHECK(tensors > 20);
    // Each fused tensor holds every expert of its layer, 0 .. n_routed_experts - 1.
    CHECK_FALSE(experts_of.empty());
    for (const auto& entry : experts_of) {
      CHECK(entry.second.size() == static_cast<std::size_t>(config.n_routed_experts));
      CHECK(*entry.second.rbegin() == config.n_routed_experts - 1);
    }
  }
}

TEST_CASE("gguf model: llama.cpp's names for the parts of each family") {
  const sy::ModelConfig v3 = sy::preset_model_config("tiny-deepseek-v3");
  const auto at = [](const sy::ModelConfig& c, const std::string& name) {
    const auto location = sy::gguf_location(c, name);
    REQUIRE(location.has_value());
    return std::make_pair(location->tensor, location->expert);
  };
  CHECK(at(v3, "model.embed_tokens.weight").first == "token_embd.weight");
  CHECK(at(v3, "lm_head.weight").first == "output.weight");
  CHECK(at(v3, "model.norm.weight").first == "output_norm.weight");
  CHECK(at(v3, "model.layers.2.self_attn.kv_a_proj_with_mqa.weight").first == "blk.2.attn_kv_a_mqa.weight");
  CHECK(sy::gguf_location(v3, "model.layers.2.self_attn.kv_b_proj.weight")->transform ==
        sy::GgufLocation::Transform::kv_b_from_split);
  CHECK(at(v3, "model.layers.3.mlp.experts.7.up_proj.weight") == std::make_pair(std::string("blk.3.ffn_up_exps.weight"), 7));
  CHECK(at(v3, "model.layers.3.mlp.shared_experts.down_proj.weight").first == "blk.3.ffn_down_shexp.weight");
  CHECK(at(v3, "model.layers.3.mlp.gate.e_score_correction_bias").first == "blk.3.exp_probs_b.bias");
  CHECK(at(v3, "model.layers.3.mlp.gate.weight").first == "blk.3.ffn_gate_inp.weight");
  CHECK(at(v3, "model.layers.0.mlp.down_proj.weight").first == "blk.0.ffn_down.weight");
  CHECK(at(v3, "model.layers.0.post_attention_layernorm.weight").first == "blk.0.ffn_norm.weight");
  CHECK_FALSE(sy::gguf_location(v3, "model.layers.0.self_attn.rotary_emb.inv_freq").has_value());
  CHECK_FALSE(sy::gguf_location(v3, "model.layers.x.mlp.down_proj.weight").has_value());

  const sy::ModelConfig mixtral = sy::preset_model_config("tiny-mixtral");
  CHECK(at(mixtral, "model.layers.1.block_sparse_moe.experts.3.w1.weight") ==
        std::make_pair(std::string("blk.1.ffn_gate_exps.weight"), 3));
  CHECK(at(mixtral, "model.layers.1.block_sparse_moe.experts.3.w2.weight").first == "blk.1.ffn_down_exps.weight");
  CHECK(at(mixtral, "model.layers.1.block_sparse_moe.experts.3.w3.weight").first == "blk.1.ffn_up_exps.weight");
  CHECK(sy::gguf_location(mixtral, "model.layers.1.self_attn.q_proj.weight")->transform ==
        sy::GgufLocation::Transform::interleaved_rope_rows);
  CHECK(sy::gguf_location(mixtral, "model.layers.1.self_attn.v_proj.weight")->transform ==
        sy::GgufLocation::Transform::none);

  const sy::ModelConfig glm = sy::preset_model_config("tiny-glm4-moe");
  CHECK(at(glm, "model.layers.0.post_attention_layernorm.weight").first == "blk.0.post_attention_norm.weight");
  CHECK(at(glm, "model.layers.0.self_attn.q_proj.bias").first == "blk.0.attn_q.bias");
  CHECK(sy::gguf_location(glm, "model.layers.0.self_attn.q_proj.weight")->transform == sy::GgufLocation::Transform::none);
}

TEST_CASE("gguf model: a file that does not describe a model we run names the key") {
  const sy::ModelConfig config = sy::preset_model_config("tiny-deepseek-v3");
  const json good = sy::gguf_metadata(config);
  const sy::GgufTensorFacts facts = facts_with_all_tensors(config);
  using sy::core_testing::input_error_message;
  {
    json m = good;
    m["general.architecture"] = "mamba";
    const std::string message = input_error_message([&] { sy::gguf_model_config(m, facts, "x.gguf"); });
    CHECK(message.find("x.gguf") != std::string::npos);
    CHECK(message.find("'mamba'") != std::string::npos);
    CHECK(message.find("deepseek2") != std::string::npos);
    CHECK(message.find("qwen3moe") != std::string::npos);
  }
  {
    json m = good;
    m.erase("deepseek2.expert_count");
    CHECK(input_error_message([&] { sy::gguf_model_config(m, facts, "x.gguf"); }).find("deepseek2.expert_count is missing") !=
          std::string::npos);
  }
  {
    json m = good;
    m["deepseek2.attention.kv_lora_rank"] = "512";
    CHECK(input_error_message([&] { sy::gguf_model_config(m, facts, "x.gguf"); })
              .find("deepseek2.attention.kv_lora_rank is a string ('512'), but an integer is expected") != std::string::npos);
  }
  {
    json m = good;
    m.erase("general.architecture");
    CHECK(input_error_message([&] { sy::gguf_model_config(m, facts, "x.gguf"); }).find("general.architecture") !=
          std::string::npos);
  }
  {  // A value the config's own rules refuse is refused as in config.json, naming the field.
    json m = good;
    m["deepseek2.expert_used_count"] = 1000;
    CHECK(input_error_message([&] { sy::gguf_model_config(m, facts, "x.gguf"); }).find("num_experts_per_tok") !=
          std::string::npos);
  }
  {
    sy::GgufTensorFacts tied = facts;
    tied.has_output = false;
    CHECK(input_error_message([&] { sy::gguf_model_config(good, tied, "x.gguf"); }).find("output.weight") != std::string::npos);
  }
  {
    json m = sy::gguf_metadata(sy::preset_model_config("tiny-mixtral"));
    m.erase("llama.expert_count");
    CHECK(input_error_message([&] { sy::gguf_model_config(m, facts, "x.gguf"); }).find("dense llama") != std::string::npos);
  }
}

TEST_CASE("gguf model: a key's wrong type, value out of range or enum value outside its set is named as it is (exit 1)") {
  const sy::ModelConfig config = sy::preset_model_config("tiny-deepseek-v3");
  const json good = sy::gguf_metadata(config);
  const sy::GgufTensorFacts facts = facts_with_all_tensors(config);
  using sy::core_testing::input_error_message;
  using sy::core_testing::input_error_exit_code;
  struct Case {
    const char* key;
    json value;
    std::string expected;
  };
  const Case cases[] = {
      {"deepseek2.block_count", -1, "deepseek2.block_count is -1; it must be from 1 to 2048"},
      {"deepseek2.block_count", json{{"gguf_type", "an array of u32"}}, "deepseek2.block_count is an array of u32, but an integer is expected"},
      {"deepseek2.block_count", 1.5, "deepseek2.block_count is a float (1.5), but an integer is expected"},
      {"deepseek2.nextn_predict_layers", 99, "deepseek2.nextn_predict_layers is 99; it must be from 0 to "},
      {"deepseek2.embedding_length", 0, "deepseek2.embedding_length is 0; it must be from 1 to"},
      {"deepseek2.expert_count", 100000, "deepseek2.expert_count is 100000; it must be from 1 to 4096"},
      {"deepseek2.expert_gating_func", 99, "deepseek2.expert_gating_func is 99, not a value Switchyard runs; valid: 1 (softmax), 2 (sigmoid)"},
      {"deepseek2.expert_gating_func", 0, "valid: 1 (softmax), 2 (sigmoid)"},
      {"deepseek2.rope.scaling.type", "linear", "deepseek2.rope.scaling.type is 'linear', not a scaling Switchyard runs; valid: 'none', 'yarn'"},
      {"general.architecture", "\x1b[2Jdeep", "GGUF architecture '\\x1B[2Jdeep' is not one Switchyard runs"},
  };
  for (const Case& c : cases) {
    json m = good;
    m[c.key] = c.value;
    CAPTURE(c.key);
    CAPTURE(c.value.dump());
    const std::string message = input_error_message([&] { sy::gguf_model_config(m, facts, "x.gguf"); });
    CHECK_MESSAGE(message.find("x.gguf: ") == 0, message);
    CHECK_MESSAGE(message.find(c.expected) != std::string::npos, message);
    CHECK(input_error_exit_code([&] { sy::gguf_model_config(m, facts, "x.gguf"); }) == sy::kExitBadContent);
  }
  // GLM gates with a sigmoid only.
  const sy::ModelConfig glm = sy::preset_model_config("tiny-glm4-moe");
  json m = sy::gguf_metadata(glm);
  m["glm4moe.expert_gating_func"] = 1;
  CHECK(input_error_message([&] { sy::gguf_model_config(m, facts_with_all_tensors(glm), "g.gguf"); })
            .find("glm4moe.expert_gating_func is 1, not a value Switchyard runs; valid: 2 (sigmoid)") != std::string::npos);
}

TEST_CASE("gguf model: a row that is not whole blocks of the wanted type falls back as llama.cpp's quantizer does") {
  CHECK(sy::gguf_storage_type(sy::DType::q4_k, 512) == sy::DType::q4_k);
  CHECK(sy::gguf_storage_type(sy::DType::q4_k, 128) == sy::DType::q5_0);
  CHECK(sy::gguf_storage_type(sy::DType::q6_k, 96) == sy::DType::q8_0);
  CHECK(sy::gguf_storage_type(sy::DType::q5_k, 64) == sy::DType::q5_1);
  CHECK(sy::gguf_storage_type(sy::DType::q2_k, 32) == sy::DType::q4_0);
  CHECK(sy::gguf_storage_type(sy::DType::q8_0, 16) == sy::DType::f32);
  CHECK(sy::gguf_storage_type(sy::DType::bf16, 16) == sy::DType::bf16);
}
