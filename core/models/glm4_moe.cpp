// GLM-4.5 and GLM-4.5-Air (glm4_moe): grouped-query attention with q/k/v biases, optional per-head
// q/k RMSNorm (use_qk_norm) and RoPE over the first half of each head (partial_rotary_factor,
// rotate_half within those dimensions); `first_k_dense_replace` dense layers, then MoE layers with
// one shared expert and DeepSeek-V3's router (sigmoid scores, e_score_correction_bias for the
// choice only, group-limited top-k with groups scored by their two best, weights normalised then
// scaled); one MTP layer stored after the placed ones (num_nextn_predict_layers), not placed.
// The module tree follows the registration order of transformers' modeling_glm4_moe.py, with the
// checkpoint's per-expert names (mlp.experts.E.gate_proj).
#include <nlohmann/json.hpp>

#include "core/gguf_keys.h"
#include "core/models/config_parts.h"
#include "core/models/tree_builder.h"

namespace switchyard::models {
namespace {

// GLM-4.5-Air, 106B (12B active). The values of zai-org/GLM-4.5-Air's config.json; source: the
// same architecture's config.json as published with PrimeIntellect/INTELLECT-3-Base (trained from
// GLM-4.5-Air-Base), which agrees with NVIDIA Megatron-Bridge's GLM 4.5 page (docs.nvidia.com/nemo/
// megatron-bridge, models/llm/glm45) and transformers' Glm4MoeConfig documentation.
constexpr const char* kGlm45Air = R"({
  "model_type": "glm4_moe", "vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 10944,
  "moe_intermediate_size": 1408, "num_hidden_layers": 46, "num_nextn_predict_layers": 1,
  "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "partial_rotary_factor": 0.5,
  "attention_bias": true, "use_qk_norm": false, "n_routed_experts": 128, "n_shared_experts": 1,
  "num_experts_per_tok": 8, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
  "norm_topk_prob": true, "routed_scaling_factor": 1.0, "max_position_embeddings": 131072,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000, "rope_scaling": null, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16"
})";

// GLM-4.5, 355B (32B active). The values of zai-org/GLM-4.5's config.json; source: NVIDIA
// Megatron-Bridge's GLM 4.5 page (92 layers, the first 3 dense, 160 experts, top-8, scaling 2.5,
// QK norm, 131072 tokens of context) and zai-org/GLM-4.7's config.json, the same architecture
// (it differs in max_position_embeddings only).
constexpr const char* kGlm45 = R"({
  "model_type": "glm4_moe", "vocab_size": 151552, "hidden_size": 5120, "intermediate_size": 12288,
  "moe_intermediate_size": 1536, "num_hidden_layers": 92, "num_nextn_predict_layers": 1,
  "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "partial_rotary_factor": 0.5,
  "attention_bias": true, "use_qk_norm": true, "n_routed_experts": 160, "n_shared_experts": 1,
  "num_experts_per_tok": 8, "first_k_dense_replace": 3, "n_group": 1, "topk_group": 1,
  "norm_topk_prob": true, "routed_scaling_factor": 2.5, "max_position_embeddings": 131072,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000, "rope_scaling": null, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16"
})";

// Every structural feature at test size: half of each 16-wide head turned, biases, a dense layer
// first, 16 experts in 4 groups of which 2 are kept, a shared expert; with and without q/k norms.
constexpr const char* kTinyGlm4Moe = R"({
  "model_type": "glm4_moe", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
  "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_nextn_predict_layers": 1,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "partial_rotary_factor": 0.5,
  "attention_bias": true, "use_qk_norm": false, "n_routed_experts": 16, "n_shared_experts": 1,
  "num_experts_per_tok": 4, "first_k_dense_replace": 1, "n_group": 4, "topk_group": 2,
  "norm_topk_prob": true, "routed_scaling_factor": 2.5, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-05, "rope_theta": 10000, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

constexpr const char* kTinyGlm4MoeQkNorm = R"({
  "model_type": "glm4_moe", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
  "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_nextn_predict_layers": 1,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "partial_rotary_factor": 0.5,
  "attention_bias": true, "use_qk_norm": true, "n_routed_experts": 16, "n_shared_experts": 1,
  "num_experts_per_tok": 4, "first_k_dense_replace": 1, "n_group": 4, "topk_group": 2,
  "norm_topk_prob": true, "routed_scaling_factor": 2.5, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-05, "rope_theta": 10000, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

// A factor of 0 would turn no dimension; above 1, more than the head has.
constexpr NumberRange kPartialRotaryFactor{0.0, 1.0, false};

void parse(const ConfigFields& f, ModelConfig& c) {
  parse_gqa_attention(f, c);
  c.qk_norm = f.boolean_or("use_qk_norm", false);
  // transformers' default is 0.5; transformers 5 also saves the factor among rope_parameters, which
  // its rotary embedding reads.
  c.partial_rotary_factor = f.number_or("partial_rotary_factor", 0.5, kPartialRotaryFactor);
  if (f.has("rope_parameters") && f.at("rope_parameters").is_object())
    c.partial_rotary_factor = ConfigFields(f.at("rope_parameters"), f.source() + ": rope_parameters")
                                  .number_or("partial_rotary_factor", c.partial_rotary_factor, kPartialRotaryFactor);
  // transformers 5 may save the count as num_local_experts, its name in the fused experts.
  c.n_routed_experts = static_cast<int>(f.integer(
      f.has("n_routed_experts") || !f.has("num_local_experts") ? "n_routed_experts" : "num_local_experts", 1, kMaxExperts));
  // transformers builds the shared expert whatever n_shared_experts says; 0 would make it empty.
  c.n_shared_experts = static_cast<int>(f.integer_or("n_shared_experts", 1, 1, kMaxExperts));
  c.moe_intermediate_size = f.integer("moe_intermediate_size", 1, kMaxWidth);
  c.first_k_dense_replace = static_cast<int>(f.integer_or("first_k_dense_replace", 1, 0, kMaxLayers));
  c.n_group = static_cast<int>(f.integer_or("n_group", 1, 1, kMaxExperts));
  c.topk_group = static_cast<int>(f.integer_or("topk_group", 1, 1, c.n_group));
  c.norm_topk_prob = f.boolean_or("norm_topk_prob", true);
  c.routed_scaling_factor = f.number_or("routed_scaling_factor", 1.0, kRoutedScalingFactor);
  c.num_nextn_predict_layers = static_cast<int>(f.integer_or("num_nextn_predict_layers", 0, 0, 16));
  // Not read by transformers' Glm4Moe, but some releases (GLM-4.7) state them; anything else
  // would promise a router this family does not have.
  c.scoring_func = f.string_or("scoring_func", "sigmoid");
  c.topk_method = f.string_or("topk_method", "noaux_tc");
}

void validate(const ModelConfig& c) {
  const auto fail = [&](const std::string& key, const std::string& what) { fail_field(c.source, key, what); };
  if (c.scoring_func != "sigmoid")
    fail("scoring_func", "is '" + c.scoring_func + "', but glm4_moe routes with sigmoid scores only");
  if (c.topk_method != "noaux_tc")
    fail("topk_method", "is '" + c.topk_method + "', but glm4_moe routes with noaux_tc only");
  validate_group_limited_routing(c, GroupScoring::sum_of_top2);
}

void write(const ModelConfig& c, nlohmann::json& j) {
  j["head_dim"] = c.head_dim;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["use_qk_norm"] = c.qk_norm;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["first_k_dense_replace"] = c.first_k_dense_replace;
  j["n_group"] = c.n_group;
  j["topk_group"] = c.topk_group;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
}

bool is_moe_layer(const ModelConfig& c, int layer) { return layer >= c.first_k_dense_replace; }

// Glm4MoeMoE.route_tokens_to_experts: DeepSeek-V3's noaux_tc, with or without groups.
GateScheme gate_scheme(const ModelConfig& c) { return noaux_tc_gate_scheme(c); }

// llama.cpp's glm4moe: the rotary width as rope.dimension_count; q/k norms and q/k/v biases have
// no key, the file holds their tensors or not (layer 0 says for all).
void read_gguf(const GgufKeys& k, nlohmann::json& c) {
  c["model_type"] = "glm4_moe";
  k.choice_or("expert_gating_func", 2, {{2, "sigmoid"}});  // Glm4MoeMoE gates with a sigmoid only
  const std::int64_t head_dim = k.integer("attention.key_length");
  c["head_dim"] = head_dim;
  c["partial_rotary_factor"] = static_cast<double>(k.integer("rope.dimension_count")) / static_cast<double>(head_dim);
  c["use_qk_norm"] = k.has_tensor("blk.0.attn_q_norm.weight");
  c["attention_bias"] = k.has_tensor("blk.0.attn_q.bias");
  c["n_routed_experts"] = k.integer("expert_count", 1, kMaxExperts);
  c["n_shared_experts"] = k.integer_or("expert_shared_count", 1);
  c["moe_intermediate_size"] = k.integer("expert_feed_forward_length");
  c["first_k_dense_replace"] = k.integer_or("leading_dense_block_count", 0);
  c["n_group"] = k.integer_or("expert_group_count", 1);
  c["topk_group"] = k.integer_or("expert_group_used_count", 1);
  c["norm_topk_prob"] = k.flag_or("expert_weights_norm", true);
  c["routed_scaling_factor"] = k.number_or("expert_weights_scale", 1.0);
}

void write_gguf(const ModelConfig& c, nlohmann::json& k) {
  k["attention.key_length"] = c.head_dim;
  k["attention.value_length"] = c.head_dim;
  k["rope.dimension_count"] = c.rope_dim();
  k["expert_shared_count"] = c.n_shared_experts;
  k["expert_feed_forward_length"] = c.moe_intermediate_size;
  k["leading_dense_block_count"] = c.first_k_dense_replace;
  k["expert_group_count"] = c.n_group;
  k["expert_group_used_count"] = c.topk_group;
  k["expert_gating_func"] = 2;  // sigmoid
  k["expert_weights_norm"] = c.norm_topk_prob;
  k["expert_weights_scale"] = c.routed_scaling_factor;
  k["nextn_predict_layers"] = 0;  // the MTP layers are not written
}

void attention(TreeBuilder& b, int layer) {
  const ModelConfig& c = b.tree().config();
  const std::int64_t head_dim = c.head_dim;
  const int attn = b.module(layer, "self_attn", "Glm4MoeAttention");
  b.linear(attn, "q_proj", c.num_attention_heads * head_dim, c.hidden_size, TensorKind::attention, c.attention_bias);
  b.linear(attn, "k_proj", c.num_key_value_heads * head_dim, c.hidden_size, TensorKind::attention, c.attention_bias);
  b.linear(attn, "v_proj", c.num_key_value_heads * head_dim, c.hidden_size, TensorKind::attention, c.attention_bias);
  b.linear(attn, "o_proj", c.hidden_size, c.num_attention_heads * head_dim, TensorKind::attention);  // no bias
  if (c.qk_norm) {
    b.norm(attn, "q_norm", head_dim, "Glm4MoeRMSNorm");
    b.norm(attn, "k_norm", head_dim, "Glm4MoeRMSNorm");
  }
}

void moe(TreeBuilder& b, int layer) {
  const ModelConfig& c = b.tree().config();
  const int mlp = b.module(layer, "mlp", "Glm4MoeMoE");
  const int experts = b.module(mlp, "experts", "ModuleList");
  for (int e = 0; e < c.n_routed_experts; ++e) {
    const int expert = b.expert(experts, e, "Glm4MoeMLP");
    b.swiglu(expert, c.hidden_size, c.moe_intermediate_size, TensorKind::expert_gate_up, TensorKind::expert_down);
  }
  const int gate = b.module(mlp, "gate", "Glm4MoeTopkRouter");
  b.param(gate, "weight", shape2(c.n_routed_experts, c.hidden_size), TensorKind::router);
  b.param(gate, "e_score_correction_bias", shape1(c.n_routed_experts), TensorKind::router_bias);
  const int shared = b.module(mlp, "shared_experts", "Glm4MoeMLP");
  b.swiglu(shared, c.hidden_size, c.moe_intermediate_size * c.n_shared_experts, TensorKind::shared_expert,
           TensorKind::shared_expert);
}

void build_tree(TreeBuilder& b) {
  const ModelConfig& c = b.tree().config();
  const int root = b.root("Glm4MoeForCausalLM");
  const int model = b.module(root, "model", "Glm4MoeModel");
  const int embed = b.module(model, "embed_tokens", "Embedding");
  b.param(embed, "weight", shape2(c.vocab_size, c.hidden_size), TensorKind::embedding);
  const int layers = b.module(model, "layers", "ModuleList");
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const int layer = b.layer(layers, i, "Glm4MoeDecoderLayer");
    attention(b, layer);
    if (c.is_moe_layer(i)) {
      moe(b, layer);
    } else {
      const int mlp = b.module(layer, "mlp", "Glm4MoeMLP");
      b.swiglu(mlp, c.hidden_size, c.intermediate_size, TensorKind::dense_mlp, TensorKind::dense_mlp);
    }
    b.norm(layer, "input_layernorm", c.hidden_size, "Glm4MoeRMSNorm");
    b.norm(layer, "post_attention_layernorm", c.hidden_size, "Glm4MoeRMSNorm");
  }
  b.norm(model, "norm", c.hidden_size, "Glm4MoeRMSNorm");
  b.module(model, "rotary_emb", "Glm4MoeRotaryEmbedding");
  if (c.tie_word_embeddings) b.module(root, "lm_head", "Linear");
  else b.linear(root, "lm_head", c.vocab_size, c.hidden_size, TensorKind::output);
}

}  // namespace

const ModelFamily& glm4_moe() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.model_type = "glm4_moe";
    f.causal_lm_class = "Glm4MoeForCausalLM";
    f.classes = {{{"ktransformers.models.modeling_glm4_moe", "transformers.models.glm4_moe.modeling_glm4_moe"},
                  {{"Glm4MoeForCausalLM", "CausalLM"}, {"Glm4MoeModel", "Model"},
                   {"Glm4MoeDecoderLayer", "DecoderLayer"}, {"Glm4MoeAttention", "Attention"},
                   {"Glm4MoeMoE", "MoE"}, {"Glm4MoeTopkRouter", "MoEGate"}, {"Glm4MoeMLP", "MLP"},
                   {"Glm4MoeRMSNorm", "RMSNorm"}, {"Glm4MoeRotaryEmbedding", "RotaryEmbedding"}}}};
    f.parse = parse;
    f.validate = validate;
    f.write = write;
    f.is_moe_layer = is_moe_layer;
    f.routed_experts_field = "n_routed_experts";
    f.tokens = {std::nullopt, {151329, 151336, 151338}, 151329};  // no BOS; eos and pad as the releases list them
    f.build_tree = build_tree;
    f.attention = AttentionKind::gqa;
    f.feed_forward_child = "mlp";
    f.expert_projections = {"gate_proj", "up_proj", "down_proj"};
    f.gate_scheme = gate_scheme;
    f.gguf.architecture = "glm4moe";
    f.gguf.read = read_gguf;
    f.gguf.write = write_gguf;
    f.gguf.post_attention_norm = "post_attention_norm";
    f.ktransformers_model_class = "Model";  // ktransformers has no model class for GLM-4.5: ours
    f.presets = {{"glm-4.5-air", "GLM-4.5-Air, 106B, 46 layers, 128 experts", kGlm45Air},
                 {"glm-4.5", "GLM-4.5, 355B, 92 layers, 160 experts", kGlm45},
                 {"tiny-glm4-moe", "GLM-4.5-Air structure (no q/k norms) at test size", kTinyGlm4Moe, true},
                 {"tiny-glm4-moe-qk-norm", "GLM-4.5 structure (q/k norms) at test size", kTinyGlm4MoeQkNorm, true}};
    return f;
  }();
  return family;
}

}  // namespace switchyard::models
