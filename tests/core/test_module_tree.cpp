// The module trees: checkpoint names, classes, registration order, parameter shapes from the
// config, layer/expert indices, and the dtypes each weight scheme gives; plus module classes.
#include <algorithm>
#include <charconv>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/dtype.h"
#include "core/module_class.h"
#include "core/module_tree.h"
#include "core/weight_scheme.h"
#include "tests/core_test_support.h"

namespace sy = switchyard;
using nlohmann::json;
using Dims = std::vector<std::int64_t>;

namespace {

const sy::WeightScheme& scheme(const char* name) {
  const sy::WeightScheme* found = sy::find_weight_scheme(name);
  REQUIRE_MESSAGE(found != nullptr, "no weight scheme " << name);
  return *found;
}

sy::ModuleTree preset_tree(const char* preset, const char* weight_scheme = "bf16") {
  return sy::build_module_tree(sy::preset_model_config(preset), scheme(weight_scheme));
}

const sy::Module& module(const sy::ModuleTree& tree, const std::string& name) {
  const int index = tree.find(name);
  REQUIRE_MESSAGE(index >= 0, "no module '" << name << "'");
  return tree.at(index);
}

const sy::Parameter& param(const sy::ModuleTree& tree, const std::string& module_name, const std::string& name) {
  for (const sy::Parameter& p : module(tree, module_name).params)
    if (p.name == name) return p;
  FAIL("module '" << module_name << "' has no parameter " << name);
  throw std::logic_error("unreachable: FAIL throws");
}

bool has_param(const sy::ModuleTree& tree, const std::string& module_name, const std::string& name) {
  for (const sy::Parameter& p : module(tree, module_name).params)
    if (p.name == name) return true;
  return false;
}

Dims dims(const sy::Shape& shape) { return Dims(shape.dims.begin(), shape.dims.begin() + shape.rank); }

Dims shape_of(const sy::ModuleTree& tree, const std::string& module_name, const std::string& name = "weight") {
  return dims(param(tree, module_name, name).shape);
}

std::vector<std::string> child_names(const sy::ModuleTree& tree, const std::string& name) {
  std::vector<std::string> out;
  for (int child : module(tree, name).children) out.emplace_back(tree.at(child).local_name());
  return out;
}

void check_class(const sy::ModuleTree& tree, const std::string& name, const char* class_name) {
  INFO("module '" << name << "'");
  const sy::ModuleClass* expected = sy::find_module_class(class_name);
  REQUIRE_MESSAGE(expected != nullptr, "no class " << class_name);
  CHECK(module(tree, name).cls->name == expected->name);
}

// The index after `marker` ("layers." or "experts.") in a dotted name, or -1.
int index_after(std::string_view name, std::string_view marker) {
  const auto at = name.find(marker);
  if (at == std::string_view::npos) return -1;
  name.remove_prefix(at + marker.size());
  int value = -1;
  std::from_chars(name.data(), name.data() + name.size(), value);
  return value;
}

// A DeepSeek-V3 config whose widths all differ, so a shape that swaps two of them cannot pass.
sy::ModelConfig distinct_deepseek_config() {
  json j = json::parse(sy::find_arch_preset("tiny-deepseek-v3")->config_json);
  j["hidden_size"] = 72;
  j["intermediate_size"] = 152;
  j["moe_intermediate_size"] = 36;
  j["num_attention_heads"] = j["num_key_value_heads"] = 3;
  j["q_lora_rank"] = 56;
  j["kv_lora_rank"] = 40;
  j["qk_nope_head_dim"] = 20;
  j["qk_rope_head_dim"] = 12;
  j["v_head_dim"] = 28;
  j["n_shared_experts"] = 2;
  j["vocab_size"] = 300;
  return sy::parse_model_config(j, "distinct widths");
}

}  // namespace

TEST_CASE("core: tiny-deepseek-v3 tree uses checkpoint names and classes") {
  const sy::ModuleTree tree = preset_tree("tiny-deepseek-v3");
  REQUIRE(tree.config().first_k_dense_replace == 1);  // layer 0 dense, layer 1 MoE below
  const struct {
    const char* name;
    const char* cls;
  } expected[] = {
      {"", "DeepseekV3ForCausalLM"},
      {"model", "DeepseekV3Model"},
      {"model.embed_tokens", "Embedding"},
      {"model.layers", "ModuleList"},
      {"model.layers.0", "DeepseekV3DecoderLayer"},
      {"model.layers.0.self_attn", "DeepseekV3Attention"},
      {"model.layers.0.self_attn.q_a_proj", "Linear"},
      {"model.layers.0.self_attn.q_a_layernorm", "DeepseekV3RMSNorm"},
      {"model.layers.0.mlp", "DeepseekV3MLP"},
      {"model.layers.0.mlp.gate_proj", "Linear"},
      {"model.layers.1.mlp", "DeepseekV3MoE"},
      {"model.layers.1.mlp.experts", "ModuleList"},
      {"model.layers.1.mlp.experts.3", "DeepseekV3MLP"},
      {"model.layers.1.mlp.experts.3.down_proj", "Linear"},
      {"model.layers.1.mlp.gate", "DeepseekV3MoEGate"},
      {"model.layers.1.mlp.shared_experts", "DeepseekV3MLP"},
      {"model.layers.1.mlp.shared_experts.up_proj", "Linear"},
      {"model.layers.1.self_attn.rotary_emb", "DeepseekV3YarnRotaryEmbedding"},
      {"model.layers.1.input_layernorm", "DeepseekV3RMSNorm"},
      {"model.norm", "DeepseekV3RMSNorm"},
      {"lm_head", "Linear"},
  };
  for (const auto& [name, cls] : expected) check_class(tree, name, cls);

  CHECK(tree.find("") == 0);
  CHECK(module(tree, "").parent == -1);
  CHECK(has_param(tree, "model.layers.1.mlp.gate", "e_score_correction_bias"));
  CHECK(tree.find("model.layers.0.mlp.experts") == -1);  // dense layer
  CHECK(tree.find("model.layers.0.mlp.gate") == -1);
  CHECK(tree.find("model.layers.1.self_attn.q_proj") == -1);  // q_lora: q_a/q_b instead
  // The MTP layer stored after the placed layers is not part of the tree.
  CHECK(tree.find("model.layers." + std::to_string(tree.num_layers())) == -1);

  const sy::ModuleClass& rotary = *module(tree, "model.layers.1.self_attn.rotary_emb").cls;
  CHECK(rotary.is_a(*sy::find_module_class("DeepseekV3RotaryEmbedding")));
  CHECK(rotary.is_a(*sy::find_module_class("RotaryEmbedding")));
}

TEST_CASE("core: tiny-deepseek-v2 uses q_proj, greedy routing and plain rotary") {
  const sy::ModuleTree tree = preset_tree("tiny-deepseek-v2");
  const sy::ModelConfig& c = tree.config();
  REQUIRE_FALSE(c.q_lora_rank.has_value());
  check_class(tree, "model.layers.0.self_attn.q_proj", "Linear");
  CHECK(tree.find("model.layers.0.self_attn.q_a_proj") == -1);
  CHECK(tree.find("model.layers.0.self_attn.q_a_layernorm") == -1);
  CHECK(shape_of(tree, "model.layers.0.self_attn.q_proj") ==
        Dims{c.num_attention_heads * (c.qk_nope_head_dim + c.qk_rope_head_dim), c.hidden_size});
  check_class(tree, "model.layers.1.mlp", "DeepseekV2MoE");
  check_class(tree, "model.layers.1.mlp.gate", "DeepseekV2MoEGate");
  CHECK_FALSE(has_param(tree, "model.layers.1.mlp.gate", "e_score_correction_bias"));  // greedy, not noaux_tc
  check_class(tree, "model.layers.1.self_attn.rotary_emb", "DeepseekV2RotaryEmbedding");  // no rope_scaling
}

TEST_CASE("core: tiny-qwen3-moe tree has q_norm/k_norm and a Linear router") {
  const sy::ModuleTree tree = preset_tree("tiny-qwen3-moe");
  const sy::ModelConfig& c = tree.config();
  check_class(tree, "", "Qwen3MoeForCausalLM");
  check_class(tree, "model.layers.0.self_attn.q_norm", "Qwen3MoeRMSNorm");
  check_class(tree, "model.layers.0.self_attn.k_norm", "Qwen3MoeRMSNorm");
  CHECK(shape_of(tree, "model.layers.0.self_attn.q_norm") == Dims{c.head_dim});
  check_class(tree, "model.layers.0.mlp", "Qwen3MoeSparseMoeBlock");
  check_class(tree, "model.layers.0.mlp.gate", "Linear");
  CHECK(shape_of(tree, "model.layers.0.mlp.gate") == Dims{c.n_routed_experts, c.hidden_size});
  const std::string last_expert = "model.layers.2.mlp.experts." + std::to_string(c.n_routed_experts - 1);
  check_class(tree, last_expert, "Qwen3MoeMLP");
  check_class(tree, last_expert + ".gate_proj", "Linear");
  CHECK(tree.find("model.layers.2.mlp.experts." + std::to_string(c.n_routed_experts)) == -1);
  CHECK(shape_of(tree, "model.layers.0.self_attn.k_proj") == Dims{c.num_key_value_heads * c.head_dim, c.hidden_size});
  check_class(tree, "model.rotary_emb", "Qwen3MoeRotaryEmbedding");
}

TEST_CASE("core: tiny-mixtral tree has block_sparse_moe with w1/w2/w3 experts") {
  const sy::ModuleTree tree = preset_tree("tiny-mixtral");
  const sy::ModelConfig& c = tree.config();
  check_class(tree, "model.layers.0.block_sparse_moe", "MixtralSparseMoeBlock");
  check_class(tree, "model.layers.0.block_sparse_moe.gate", "Linear");
  for (int e = 0; e < c.n_routed_experts; ++e) {
    const std::string expert = "model.layers.0.block_sparse_moe.experts." + std::to_string(e);
    check_class(tree, expert, "MixtralBlockSparseTop2MLP");
    CHECK(shape_of(tree, expert + ".w1") == Dims{c.intermediate_size, c.hidden_size});
    CHECK(shape_of(tree, expert + ".w2") == Dims{c.hidden_size, c.intermediate_size});
    CHECK(shape_of(tree, expert + ".w3") == Dims{c.intermediate_size, c.hidden_size});
  }
  CHECK(tree.find("model.layers.0.mlp") == -1);
}

TEST_CASE("core: children are listed in registration order") {
  const sy::ModuleTree deepseek = preset_tree("tiny-deepseek-v3");
  using Names = std::vector<std::string>;
  CHECK(child_names(deepseek, "") == Names{"model", "lm_head"});
  CHECK(child_names(deepseek, "model") == Names{"embed_tokens", "layers", "norm"});
  CHECK(child_names(deepseek, "model.layers.1") ==
        Names{"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"});
  CHECK(child_names(deepseek, "model.layers.1.self_attn") ==
        Names{"q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj",
              "rotary_emb"});
  CHECK(child_names(deepseek, "model.layers.1.mlp") == Names{"experts", "gate", "shared_experts"});
  CHECK(child_names(deepseek, "model.layers.1.mlp.experts.0") == Names{"gate_proj", "up_proj", "down_proj"});
  Names expert_numbers;
  for (int e = 0; e < deepseek.config().n_routed_experts; ++e) expert_numbers.push_back(std::to_string(e));
  CHECK(child_names(deepseek, "model.layers.1.mlp.experts") == expert_numbers);

  const sy::ModuleTree qwen = preset_tree("tiny-qwen3-moe");
  CHECK(child_names(qwen, "model.layers.0.mlp") == Names{"gate", "experts"});
  CHECK(child_names(qwen, "model.layers.0.self_attn") ==
        Names{"q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"});
  const sy::ModuleTree mixtral = preset_tree("tiny-mixtral");
  CHECK(child_names(mixtral, "model.layers.0.block_sparse_moe") == Names{"gate", "experts"});
  CHECK(child_names(mixtral, "model.layers.0.block_sparse_moe.experts.1") == Names{"w1", "w2", "w3"});
}

TEST_CASE("core: every tree is consistent: parents, unique names, layer and expert indices") {
  for (const char* preset : {"tiny-deepseek-v3", "tiny-deepseek-v2", "tiny-qwen3-moe", "tiny-mixtral"}) {
    INFO("preset " << preset);
    const sy::ModuleTree tree = preset_tree(preset);
    REQUIRE(tree.size() > 1);
    for (std::size_t i = 1; i < tree.size(); ++i) {
      const sy::Module& m = tree.at(static_cast<int>(i));
      INFO("module '" << m.name << "'");
      REQUIRE(m.parent >= 0);
      REQUIRE(m.parent < static_cast<int>(i));
      const sy::Module& parent = tree.at(m.parent);
      CHECK(m.name == (parent.name.empty() ? "" : std::string(parent.name) + ".") + std::string(m.local_name()));
      CHECK(std::count(parent.children.begin(), parent.children.end(), static_cast<int>(i)) == 1);
      CHECK(tree.find(m.name) == static_cast<int>(i));
      CHECK(m.cls != nullptr);
      CHECK(m.layer == index_after(m.name, "model.layers."));
      // Routed experts only; shared_experts is no `experts.E`.
      CHECK(m.expert == index_after(m.name, ".experts."));
    }
  }
}

TEST_CASE("core: MoE blocks sit exactly in the layers is_moe_layer names") {
  for (const char* preset : {"tiny-deepseek-v3", "tiny-deepseek-v2", "tiny-qwen3-moe", "tiny-mixtral", "deepseek-v3"}) {
    INFO("preset " << preset);
    const sy::ModuleTree tree = preset_tree(preset);
    const sy::ModuleClass& moe = *sy::find_module_class("MoE");
    const std::string& block = tree.config().family->feed_forward_child;
    for (int layer = 0; layer < tree.num_layers(); ++layer) {
      INFO("layer " << layer);
      const sy::Module& m = module(tree, "model.layers." + std::to_string(layer) + "." + block);
      CHECK(m.cls->is_a(moe) == tree.config().is_moe_layer(layer));
    }
  }
}

TEST_CASE("core: parameter shapes follow the config") {
  const sy::ModuleTree tree = sy::build_module_tree(distinct_deepseek_config(), scheme("bf16"));
  const sy::ModelConfig& c = tree.config();
  const std::int64_t heads = c.num_attention_heads;
  const std::int64_t q_lora = *c.q_lora_rank;
  const std::string attn = "model.layers.1.self_attn.";
  CHECK(shape_of(tree, attn + "q_a_proj") == Dims{q_lora, c.hidden_size});
  CHECK(shape_of(tree, attn + "q_a_layernorm") == Dims{q_lora});
  CHECK(shape_of(tree, attn + "q_b_proj") == Dims{heads * (c.qk_nope_head_dim + c.qk_rope_head_dim), q_lora});
  CHECK(shape_of(tree, attn + "kv_a_proj_with_mqa") == Dims{c.kv_lora_rank + c.qk_rope_head_dim, c.hidden_size});
  CHECK(shape_of(tree, attn + "kv_a_layernorm") == Dims{c.kv_lora_rank});
  CHECK(shape_of(tree, attn + "kv_b_proj") == Dims{heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank});
  CHECK(shape_of(tree, attn + "o_proj") == Dims{c.hidden_size, heads * c.v_head_dim});
  CHECK(module(tree, attn + "rotary_emb").params.empty());

  CHECK(shape_of(tree, "model.layers.0.mlp.gate_proj") == Dims{c.intermediate_size, c.hidden_size});
  CHECK(shape_of(tree, "model.layers.0.mlp.down_proj") == Dims{c.hidden_size, c.intermediate_size});
  CHECK(shape_of(tree, "model.layers.1.mlp.experts.2.up_proj") == Dims{c.moe_intermediate_size, c.hidden_size});
  CHECK(shape_of(tree, "model.layers.1.mlp.experts.2.down_proj") == Dims{c.hidden_size, c.moe_intermediate_size});
  CHECK(shape_of(tree, "model.layers.1.mlp.shared_experts.gate_proj") ==
        Dims{c.moe_intermediate_size * c.n_shared_experts, c.hidden_size});
  CHECK(shape_of(tree, "model.layers.1.mlp.gate") == Dims{c.n_routed_experts, c.hidden_size});
  CHECK(shape_of(tree, "model.layers.1.mlp.gate", "e_score_correction_bias") == Dims{c.n_routed_experts});
  CHECK(shape_of(tree, "model.embed_tokens") == Dims{c.vocab_size, c.hidden_size});
  CHECK(shape_of(tree, "model.norm") == Dims{c.hidden_size});
  CHECK(shape_of(tree, "lm_head") == Dims{c.vocab_size, c.hidden_size});
  CHECK(param(tree, "lm_head", "weight").shape.str() ==
        "[" + std::to_string(c.vocab_size) + ", " + std::to_string(c.hidden_size) + "]");
}

TEST_CASE("core: total_parameter_count equals the closed-form count of each family") {
  SUBCASE("DeepSeek, with and without q_lora") {
    for (const bool q_lora : {true, false}) {
      sy::ModelConfig c = distinct_deepseek_config();
      if (!q_lora) c.q_lora_rank.reset();
      INFO("q_lora " << q_lora);
      const std::uint64_t qk_head = c.qk_nope_head_dim + c.qk_rope_head_dim;
      const std::uint64_t h = c.hidden_size, heads = c.num_attention_heads;
      const std::uint64_t q = q_lora ? h * *c.q_lora_rank + *c.q_lora_rank + *c.q_lora_rank * heads * qk_head
                                     : h * heads * qk_head;
      const std::uint64_t attention = q + h * (c.kv_lora_rank + c.qk_rope_head_dim) + c.kv_lora_rank +
                                      c.kv_lora_rank * heads * (c.qk_nope_head_dim + c.v_head_dim) +
                                      heads * c.v_head_dim * h;
      REQUIRE(c.moe_layer_freq == 1);
      const std::uint64_t dense = 3 * h * c.intermediate_size;
      const std::uint64_t moe = c.n_routed_experts * 3 * h * c.moe_intermediate_size +
                                c.n_routed_experts * (h + 1) +  // router weight and e_score_correction_bias
                                3 * h * c.moe_intermediate_size * c.n_shared_experts;
      std::uint64_t expected = 2 * c.vocab_size * h + h;
      for (int layer = 0; layer < c.num_hidden_layers; ++layer)
        expected += attention + (layer < c.first_k_dense_replace ? dense : moe) + 2 * h;
      CHECK(sy::build_module_tree(c, scheme("bf16")).total_parameter_count() == expected);
    }
  }
  SUBCASE("Qwen3-MoE and Mixtral") {
    for (const char* preset : {"tiny-qwen3-moe", "tiny-mixtral", "qwen3-30b-a3b", "mixtral-8x7b"}) {
      INFO(preset);
      const sy::ModelConfig c = sy::preset_model_config(preset);
      const bool qwen = c.qk_norm;
      const std::uint64_t h = c.hidden_size, q_width = c.num_attention_heads * c.head_dim;
      const std::uint64_t attention = 2 * h * q_width + 2 * h * c.num_key_value_heads * c.head_dim +
                                      (qwen ? 2 * c.head_dim : 0);  // q_norm, k_norm
      const std::uint64_t moe = c.n_routed_experts * (h + 3 * h * c.moe_intermediate_size);
      const std::uint64_t expected = 2 * c.vocab_size * h + h + c.num_hidden_layers * (attention + moe + 2 * h);
      CHECK(sy::build_module_tree(c, scheme("bf16")).total_parameter_count() == expected);
    }
  }
}

TEST_CASE("core: fp8 scheme adds a 128x128-block f32 weight_scale_inv to every FP8 matrix") {
  const sy::ModuleTree fp8 = preset_tree("deepseek-v3", "fp8");
  std::size_t fp8_matrices = 0, scales = 0;
  bool saw_partial_block = false;
  for (const sy::Module& m : fp8.modules()) {
    for (std::size_t p = 0; p < m.params.size(); ++p) {
      const sy::Parameter& weight = m.params[p];
      if (weight.name == "weight_scale_inv") {
        ++scales;
        CHECK(weight.kind == sy::TensorKind::block_scale);
        continue;
      }
      if (weight.dtype != sy::DType::f8_e4m3) continue;
      INFO("module '" << m.name << "'");
      ++fp8_matrices;
      REQUIRE(p + 1 < m.params.size());
      const sy::Parameter& scale = m.params[p + 1];
      CHECK(scale.name == "weight_scale_inv");
      CHECK(scale.dtype == sy::DType::f32);
      const std::int64_t out = weight.shape.dims[0], in = weight.shape.dims[1];
      CHECK(dims(scale.shape) == Dims{(out + 127) / 128, (in + 127) / 128});
      saw_partial_block = saw_partial_block || out % 128 != 0 || in % 128 != 0;
    }
  }
  CHECK(fp8_matrices > 0);
  CHECK(scales == fp8_matrices);
  CHECK(saw_partial_block);  // kv_a_proj_with_mqa's 576 rows: 4.5 blocks round up to 5
  // Embeddings, norms and the router stay in bf16, without scales.
  CHECK(param(fp8, "model.embed_tokens", "weight").dtype == sy::DType::bf16);
  CHECK(param(fp8, "model.layers.5.mlp.gate", "weight").dtype == sy::DType::bf16);
  CHECK(param(fp8, "model.layers.5.input_layernorm", "weight").dtype == sy::DType::bf16);
  CHECK(param(fp8, "model.layers.5.mlp.gate", "e_score_correction_bias").dtype == sy::DType::f32);
  CHECK(module(fp8, "lm_head").params.size() == 1);
  // Scales are storage, not parameters.
  CHECK(fp8.total_parameter_count() == preset_tree("deepseek-v3").total_parameter_count());
}

TEST_CASE("core: q4_k_m scheme: Q6_K output and llama.cpp's more-bits layers") {
  const sy::ModuleTree tree = preset_tree("deepseek-v3", "q4_k_m");
  const int layers = tree.num_layers();
  const sy::Parameter& lm_head = param(tree, "lm_head", "weight");
  CHECK(lm_head.dtype == sy::DType::q6_k);
  CHECK(lm_head.bytes() == sy::storage_bytes(sy::DType::q6_k, lm_head.shape.elements()));
  CHECK(param(tree, "model.embed_tokens", "weight").dtype == sy::DType::q4_k);
  CHECK(param(tree, "model.norm", "weight").dtype == sy::DType::f32);
  CHECK(param(tree, "model.layers.9.mlp.gate", "weight").dtype == sy::DType::f32);
  CHECK(param(tree, "model.layers.9.mlp.experts.0.up_proj", "weight").dtype == sy::DType::q4_k);
  // Down projections get Q6_K in the first and last eighth of the layers and every third between.
  const auto down = [&](int layer) {
    return param(tree, "model.layers." + std::to_string(layer) + ".mlp.experts.0.down_proj", "weight").dtype;
  };
  const int first_eighth = layers / 8;
  CHECK(down(first_eighth - 1) == sy::DType::q6_k);
  CHECK(down(first_eighth + 1) == sy::DType::q4_k);
  CHECK(down(first_eighth + 2) == sy::DType::q6_k);
  CHECK(down(first_eighth + 3) == sy::DType::q4_k);
  CHECK(down(layers - 1) == sy::DType::q6_k);
}

TEST_CASE("core: storage_bytes counts whole blocks, and safetensors dtype names map both ways") {
  sy::core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  CHECK(sy::storage_bytes(sy::DType::q4_k, 256) == 144);
  CHECK(sy::storage_bytes(sy::DType::q4_k, 0) == 0);
  CHECK(sy::storage_bytes(sy::DType::q4_k, 1) == 144);
  CHECK(sy::storage_bytes(sy::DType::q8_0, 32) == 34);
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t blocks = static_cast<std::uint64_t>(rng.between(1, 1 << 30));
    const std::uint64_t partial = static_cast<std::uint64_t>(rng.between(1, 255));
    INFO(blocks << " blocks + " << partial);
    CHECK(sy::storage_bytes(sy::DType::q4_k, 256 * blocks) == 144 * blocks);
    CHECK(sy::storage_bytes(sy::DType::q4_k, 256 * blocks + partial) == 144 * (blocks + 1));
    CHECK(sy::storage_bytes(sy::DType::bf16, blocks) == 2 * blocks);
    CHECK(sy::storage_bytes(sy::DType::f32, blocks) == 4 * blocks);
  }
  for (int d = 0; d <= static_cast<int>(sy::DType::q2_k); ++d) {
    const sy::DTypeInfo& info = sy::dtype_info(static_cast<sy::DType>(d));
    INFO(info.name);
    CHECK(info.dtype == static_cast<sy::DType>(d));
    if (info.safetensors_name) CHECK(sy::dtype_from_safetensors(info.safetensors_name) == info.dtype);
  }
  CHECK_FALSE(sy::dtype_from_safetensors("bf16").has_value());  // safetensors spells it BF16
  CHECK_FALSE(sy::dtype_from_safetensors("Q4_K").has_value());
}

TEST_CASE("core: find_module_class accepts native names and Python paths") {
  const sy::ModuleClass* moe = sy::find_module_class("DeepseekV3MoE");
  REQUIRE(moe != nullptr);
  CHECK(sy::find_module_class("ktransformers.models.modeling_deepseek_v3.DeepseekV3MoE") == moe);
  CHECK(moe->display_name() == "ktransformers.models.modeling_deepseek_v3.DeepseekV3MoE");
  const sy::ModuleClass* linear = sy::find_module_class("Linear");
  REQUIRE(linear != nullptr);
  CHECK(sy::find_module_class("torch.nn.Linear") == linear);
  CHECK(sy::find_module_class("torch.nn.modules.linear.Linear") == linear);
  CHECK(sy::find_module_class("ktransformers.models.modeling_deepseek_v3.MoEGate") ==
        sy::find_module_class("DeepseekV3MoEGate"));
  CHECK(sy::find_module_class("ktransformers.models.modeling_deepseek.MoEGate") ==
        sy::find_module_class("DeepseekV2MoEGate"));
  CHECK(sy::find_module_class("DeepseekV4MoE") == nullptr);
  CHECK(sy::find_module_class("linear") == nullptr);  // Python names are case-sensitive
  CHECK(sy::find_module_class("") == nullptr);
  CHECK(sy::find_module_class("torch.nn.Linear ") == nullptr);
  CHECK_THROWS_AS(sy::module_class("NoSuchClass"), std::logic_error);

  // Every spelling resolves, to a class that lists it.
  for (const std::string& spelling : sy::module_class_spellings()) {
    INFO(spelling);
    const sy::ModuleClass* c = sy::find_module_class(spelling);
    REQUIRE(c != nullptr);
    CHECK((c->name == spelling ||
           std::find(c->python_paths.begin(), c->python_paths.end(), spelling) != c->python_paths.end()));
  }
}

TEST_CASE("core: is_a has isinstance semantics, with family-neutral natives") {
  const auto cls = [](const char* name) -> const sy::ModuleClass& {
    const sy::ModuleClass* c = sy::find_module_class(name);
    REQUIRE_MESSAGE(c != nullptr, "no class " << name);
    return *c;
  };
  CHECK(cls("DeepseekV3MoE").is_a(cls("DeepseekV3MoE")));
  CHECK(cls("DeepseekV3MoE").is_a(cls("MoE")));
  CHECK(cls("Qwen3MoeSparseMoeBlock").is_a(cls("MoE")));
  CHECK(cls("MixtralSparseMoeBlock").is_a(cls("MoE")));
  CHECK(cls("DeepseekV3MoE").is_a(cls("torch.nn.Module")));
  CHECK_FALSE(cls("MoE").is_a(cls("DeepseekV3MoE")));  // a base is not an instance of its subclass
  CHECK_FALSE(cls("DeepseekV3MoE").is_a(cls("DeepseekV2MoE")));
  CHECK_FALSE(cls("DeepseekV3MoE").is_a(cls("MLP")));
  CHECK(cls("DeepseekV3YarnRotaryEmbedding").is_a(cls("DeepseekV3RotaryEmbedding")));
  CHECK_FALSE(cls("DeepseekV3RotaryEmbedding").is_a(cls("DeepseekV3YarnRotaryEmbedding")));
  CHECK(cls("DeepseekV3MoEGate").role == sy::ModuleRole::gate);
  CHECK(cls("DeepseekV3YarnRotaryEmbedding").role == sy::ModuleRole::rotary);
  CHECK(cls("MoE").display_name() == "MoE");
  CHECK(cls("Linear").is_a(cls("Module")));
  CHECK(cls("Module").base == nullptr);
}

TEST_CASE("core: find takes only exact full module names") {
  const sy::ModuleTree tree = preset_tree("tiny-deepseek-v3");
  const std::string beyond = "model.layers." + std::to_string(tree.num_layers());
  const std::string no_expert = "model.layers.1.mlp.experts." + std::to_string(tree.config().n_routed_experts);
  for (const std::string& name : {std::string("model."), std::string(".model"), std::string("model..layers"),
                                  std::string("model.layers.01"), std::string("model.layers.1."), std::string("lm_head.weight"),
                                  std::string("Model"), std::string("model.layers.-1"), beyond, no_expert}) {
    INFO("'" << name << "'");
    CHECK(tree.find(name) == -1);
  }
  CHECK(tree.find("model.layers.1.mlp.experts.0") >= 0);
}

TEST_CASE("core: a moved ModuleTree keeps its names and finds its modules") {
  auto original = std::make_unique<sy::ModuleTree>(preset_tree("tiny-deepseek-v3"));
  const std::string name = "model.layers.1.mlp.experts.3.down_proj";
  const int index = original->find(name);
  REQUIRE(index >= 0);
  std::vector<std::string> names;
  for (const sy::Module& m : original->modules()) names.emplace_back(m.name);

  sy::ModuleTree moved = std::move(*original);
  original.reset();  // whatever the moved-from tree still owned is gone
  REQUIRE(moved.size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(moved.at(static_cast<int>(i)).name == names[i]);
  CHECK(moved.find(name) == index);

  sy::ModuleTree assigned = preset_tree("tiny-mixtral");
  assigned = std::move(moved);
  CHECK(assigned.find("model.layers.0.block_sparse_moe") == -1);
  CHECK(assigned.find(name) == index);
  CHECK(assigned.at(index).name == name);
}
