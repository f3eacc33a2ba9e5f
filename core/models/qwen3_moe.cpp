// Qwen3-MoE (qwen3_moe): grouped-query attention with per-head q/k RMSNorm, softmax top-k routing,
// no shared experts, dense layers where mlp_only_layers or decoder_sparse_step say. The module tree
// follows the registration order of transformers' modeling_qwen3_moe.py, with the checkpoint's
// per-expert names (mlp.experts.E.gate_proj).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/gguf_keys.h"
#include "core/models/config_parts.h"
#include "core/models/tree_builder.h"

namespace switchyard::models {
namespace {

constexpr const char* kQwen3_30B_A3B = R"({
  "model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
  "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
  "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
  "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": true,
  "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16", "rope_scaling": null
})";

constexpr const char* kTinyQwen3Moe = R"({
  "model_type": "qwen3_moe", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
  "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 16, "num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
  "mlp_only_layers": [], "norm_topk_prob": true, "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16"
})";

// Test size with every width a multiple of 256, so that each row is whole super-blocks of the K
// types (GGUF tests of Q2_K..Q6_K; the tiny presets' rows of 64 fall back to 32-weight types).
constexpr const char* kSmallQwen3Moe = R"({
  "model_type": "qwen3_moe", "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
  "moe_intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
  "mlp_only_layers": [], "norm_topk_prob": true, "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16"
})";

void parse(const ConfigFields& f, ModelConfig& c) {
  parse_gqa_attention(f, c);
  c.qk_norm = true;  // q_norm and k_norm in every layer
  // Qwen's releases say num_experts; transformers >= 5 saves it as num_local_experts.
  c.n_routed_experts = static_cast<int>(
      f.integer(f.has("num_experts") || !f.has("num_local_experts") ? "num_experts" : "num_local_experts", 1, kMaxExperts));
  c.moe_intermediate_size = f.integer("moe_intermediate_size", 1, kMaxWidth);
  c.decoder_sparse_step = static_cast<int>(f.integer_or("decoder_sparse_step", 1, 1, kMaxLayers));
  c.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
  if (f.has("mlp_only_layers")) c.mlp_only_layers = f.layer_list("mlp_only_layers", c.num_hidden_layers);
}

void validate(const ModelConfig& c) {
  for (const int layer : c.mlp_only_layers)
    if (layer < 0 || layer >= c.num_hidden_layers)
      fail_field(c.source, "mlp_only_layers",
                 "holds " + std::to_string(layer) + "; layer numbers are in [0, num_hidden_layers = " +
                     std::to_string(c.num_hidden_layers) + ")");
}

void write(const ModelConfig& c, nlohmann::json& j) {
  j["head_dim"] = c.head_dim;
  j["num_experts"] = c.n_routed_experts;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["decoder_sparse_step"] = c.decoder_sparse_step;
  j["mlp_only_layers"] = c.mlp_only_layers;
}

bool is_moe_layer(const ModelConfig& c, int layer) {
  return std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), layer) == c.mlp_only_layers.end() &&
         (layer + 1) % c.decoder_sparse_step == 0;
}

// Softmax, top-k, weights divided by their sum (no epsilon) when norm_topk_prob.
GateScheme gate_scheme(const ModelConfig& c) {
  GateScheme g;
  g.normalize = c.norm_topk_prob;
  return g;
}

// llama.cpp's qwen3moe: every layer MoE, the top-k weights normalised.
void read_gguf(const GgufKeys& k, nlohmann::json& c) {
  c["model_type"] = "qwen3_moe";
  c["head_dim"] = k.integer("attention.key_length");
  c["num_experts"] = k.integer("expert_count", 1, kMaxExperts);
  c["moe_intermediate_size"] = k.integer("expert_feed_forward_length");
  c["norm_topk_prob"] = k.flag_or("expert_weights_norm", true);
}

void write_gguf(const ModelConfig& c, nlohmann::json& k) {
  if (!c.mlp_only_layers.empty() || c.decoder_sparse_step != 1)
    throw InputError(c.source + ": llama.cpp's qwen3moe has a MoE block in every layer; this config has dense layers "
                                "(mlp_only_layers, decoder_sparse_step), which a GGUF cannot say");
  k["attention.key_length"] = c.head_dim;
  k["attention.value_length"] = c.head_dim;
  k["expert_feed_forward_length"] = c.moe_intermediate_size;
  k["expert_weights_norm"] = c.norm_topk_prob;
}

void build_tree(TreeBuilder& b) {
  const ModelConfig& c = b.tree().config();
  const std::int64_t head_dim = c.head_dim;
  const int root = b.root("Qwen3MoeForCausalLM");
  const int model = b.module(root, "model", "Qwen3MoeModel");
  const int embed = b.module(model, "embed_tokens", "Embedding");
  b.param(embed, "weight", shape2(c.vocab_size, c.hidden_size), TensorKind::embedding);
  const int layers = b.module(model, "layers", "ModuleList");
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const int layer = b.layer(layers, i, "Qwen3MoeDecoderLayer");
    const int attn = b.module(layer, "self_attn", "Qwen3MoeAttention");
    b.linear(attn, "q_proj", c.num_attention_heads * head_dim, c.hidden_size, TensorKind::attention, c.attention_bias);
    b.linear(attn, "k_proj", c.num_key_value_heads * head_dim, c.hidden_size, TensorKind::attention, c.attention_bias);
    b.linear(attn, "v_proj", c.num_key_value_heads * head_dim, c.hidden_size, TensorKind::attention, c.attention_bias);
    b.linear(attn, "o_proj", c.hidden_size, c.num_attention_heads * head_dim, TensorKind::attention, c.attention_bias);
    b.norm(attn, "q_norm", head_dim, "Qwen3MoeRMSNorm");
    b.norm(attn, "k_norm", head_dim, "Qwen3MoeRMSNorm");
    if (c.is_moe_layer(i)) {
      const int mlp = b.module(layer, "mlp", "Qwen3MoeSparseMoeBlock");
      b.linear(mlp, "gate", c.n_routed_experts, c.hidden_size, TensorKind::router);
      const int experts = b.module(mlp, "experts", "ModuleList");
      for (int e = 0; e < c.n_routed_experts; ++e) {
        const int expert = b.expert(experts, e, "Qwen3MoeMLP");
        b.swiglu(expert, c.hidden_size, c.moe_intermediate_size, TensorKind::expert_gate_up, TensorKind::expert_down);
      }
    } else {
      const int mlp = b.module(layer, "mlp", "Qwen3MoeMLP");
      b.swiglu(mlp, c.hidden_size, c.intermediate_size, TensorKind::dense_mlp, TensorKind::dense_mlp);
    }
    b.norm(layer, "input_layernorm", c.hidden_size, "Qwen3MoeRMSNorm");
    b.norm(layer, "post_attention_layernorm", c.hidden_size, "Qwen3MoeRMSNorm");
  }
  b.norm(model, "norm", c.hidden_size, "Qwen3MoeRMSNorm");
  b.module(model, "rotary_emb", "Qwen3MoeRotaryEmbedding");
  if (c.tie_word_embeddings) b.module(root, "lm_head", "Linear");
  else b.linear(root, "lm_head", c.vocab_size, c.hidden_size, TensorKind::output);
}

}  // namespace

const ModelFamily& qwen3_moe() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.model_type = "qwen3_moe";
    f.causal_lm_class = "Qwen3MoeForCausalLM";
    f.classes = {{{"ktransformers.models.modeling_qwen3_moe", "transformers.models.qwen3_moe.modeling_qwen3_moe"},
                  {{"Qwen3MoeForCausalLM", "CausalLM"}, {"Qwen3MoeModel", "Model"},
                   {"Qwen3MoeDecoderLayer", "DecoderLayer"}, {"Qwen3MoeAttention", "Attention"},
                   {"Qwen3MoeSparseMoeBlock", "MoE"}, {"Qwen3MoeMLP", "MLP"}, {"Qwen3MoeRMSNorm", "RMSNorm"},
                   {"Qwen3MoeRotaryEmbedding", "RotaryEmbedding"}}}};
    // ktransformers' Qwen3-MoE attention takes its RoPE from modeling_qwen2_moe's class (one per
    // layer), and its Qwen3 profiles match that class; transformers' model, which the tree
    // follows, has one model.rotary_emb, and those rules place it.
    f.class_aliases = {{"ktransformers.models.modeling_qwen2_moe.Qwen2MoeRotaryEmbedding", "Qwen3MoeRotaryEmbedding"}};
    f.parse = parse;
    f.validate = validate;
    f.write = write;
    f.is_moe_layer = is_moe_layer;
    f.routed_experts_field = "num_experts";
    f.tokens = {151643, {151645}, std::nullopt};
    f.build_tree = build_tree;
    f.attention = AttentionKind::gqa;
    f.feed_forward_child = "mlp";
    f.expert_projections = {"gate_proj", "up_proj", "down_proj"};
    f.gate_scheme = gate_scheme;
    f.ktransformers_model_class = "ktransformers.operators.models.KQwen3MoeModel";
    f.gguf.architecture = "qwen3moe";
    f.gguf.read = read_gguf;
    f.gguf.write = write_gguf;
    f.presets = {{"qwen3-30b-a3b", "Qwen3-30B-A3B, 48 layers, 128 experts", kQwen3_30B_A3B},
                 {"tiny-qwen3-moe", "Qwen3-MoE structure at test size", kTinyQwen3Moe, true},
                 {"small-qwen3-moe", "Qwen3-MoE at test size, widths whole K-quant super-blocks", kSmallQwen3Moe, true}};
    return f;
  }();
  return family;
}

}  // namespace switchyard::models
