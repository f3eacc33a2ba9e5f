// Mixtral (mixtral): grouped-query attention, softmax top-2 routing renormalised, every layer MoE,
// the MoE block named block_sparse_moe and its experts' projections w1 (gate), w3 (up), w2 (down).
// The module tree follows the registration order of transformers' modeling_mixtral.py with the
// checkpoint's per-expert names (block_sparse_moe.experts.E.w1/w2/w3).
#include <nlohmann/json.hpp>

#include "core/gguf_keys.h"
#include "core/models/config_parts.h"
#include "core/models/tree_builder.h"

namespace switchyard::models {
namespace {

constexpr const char* kMixtral8x7B = R"({
  "model_type": "mixtral", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
  "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
  "num_experts_per_tok": 2, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

constexpr const char* kTinyMixtral = R"({
  "model_type": "mixtral", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 96,
  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4,
  "num_experts_per_tok": 2, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

void parse(const ConfigFields& f, ModelConfig& c) {
  parse_gqa_attention(f, c);
  c.n_routed_experts = static_cast<int>(f.integer("num_local_experts", 1, kMaxExperts));
  c.moe_intermediate_size = c.intermediate_size;  // the experts are Mixtral's MLPs
  c.norm_topk_prob = true;  // Mixtral renormalises its top-k softmax weights
}

void validate(const ModelConfig&) {}

void write(const ModelConfig& c, nlohmann::json& j) {
  j["head_dim"] = c.head_dim;
  j["num_local_experts"] = c.n_routed_experts;
}

bool is_moe_layer(const ModelConfig&, int) { return true; }

// Softmax, top-k, weights always divided by their sum.
GateScheme gate_scheme(const ModelConfig&) {
  GateScheme g;
  g.normalize = true;
  return g;
}

// llama.cpp writes Mixtral as a llama with experts (and reorders q/k rows for its RoPE: the
// family's interleaved_rope_rows). A llama without experts is a dense model, which Switchyard
// does not run.
void read_gguf(const GgufKeys& k, nlohmann::json& c) {
  if (k.integer_or("expert_count", 0) == 0)
    k.fail("expert_count", "is missing or 0: a dense llama model, which Switchyard does not run (Mixtral is a llama with experts)");
  c["model_type"] = "mixtral";
  if (k.has("attention.key_length")) c["head_dim"] = k.integer("attention.key_length");
  c["num_local_experts"] = k.integer("expert_count", 1, kMaxExperts);
}

void write_gguf(const ModelConfig& c, nlohmann::json& k) {
  k["attention.key_length"] = c.head_dim;
  k["attention.value_length"] = c.head_dim;
  k["rope.dimension_count"] = c.head_dim;
}

void build_tree(TreeBuilder& b) {
  const ModelConfig& c = b.tree().config();
  const std::int64_t head_dim = c.head_dim;
  const int root = b.root("MixtralForCausalLM");
  const int model = b.module(root, "model", "MixtralModel");
  const int embed = b.module(model, "embed_tokens", "Embedding");
  b.param(embed, "weight", shape2(c.vocab_size, c.hidden_size), TensorKind::embedding);
  const int layers = b.module(model, "layers", "ModuleList");
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const int layer = b.layer(layers, i, "MixtralDecoderLayer");
    const int attn = b.module(layer, "self_attn", "MixtralAttention");
    b.linear(attn, "q_proj", c.num_attention_heads * head_dim, c.hidden_size, TensorKind::attention);
    b.linear(attn, "k_proj", c.num_key_value_heads * head_dim, c.hidden_size, TensorKind::attention);
    b.linear(attn, "v_proj", c.num_key_value_heads * head_dim, c.hidden_size, TensorKind::attention);
    b.linear(attn, "o_proj", c.hidden_size, c.num_attention_heads * head_dim, TensorKind::attention);
    const int moe = b.module(layer, "block_sparse_moe", "MixtralSparseMoeBlock");
    b.linear(moe, "gate", c.n_routed_experts, c.hidden_size, TensorKind::router);
    const int experts = b.module(moe, "experts", "ModuleList");
    for (int e = 0; e < c.n_routed_experts; ++e) {
      const int expert = b.expert(experts, e, "MixtralBlockSparseTop2MLP");
      b.swiglu(expert, c.hidden_size, c.moe_intermediate_size, TensorKind::expert_gate_up, TensorKind::expert_down,
               "w1", "w3", "w2");
    }
    b.norm(layer, "input_layernorm", c.hidden_size, "MixtralRMSNorm");
    b.norm(layer, "post_attention_layernorm", c.hidden_size, "MixtralRMSNorm");
  }
  b.norm(model, "norm", c.hidden_size, "MixtralRMSNorm");
  b.module(model, "rotary_emb", "MixtralRotaryEmbedding");
  if (c.tie_word_embeddings) b.module(root, "lm_head", "Linear");
  else b.linear(root, "lm_head", c.vocab_size, c.hidden_size, TensorKind::output);
}

}  // namespace

const ModelFamily& mixtral() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.model_type = "mixtral";
    f.causal_lm_class = "MixtralForCausalLM";
    f.classes = {{{"ktransformers.models.modeling_mixtral", "transformers.models.mixtral.modeling_mixtral"},
                  {{"MixtralForCausalLM", "CausalLM"}, {"MixtralModel", "Model"},
                   {"MixtralDecoderLayer", "DecoderLayer"}, {"MixtralAttention", "Attention"},
                   {"MixtralSparseMoeBlock", "MoE"}, {"MixtralBlockSparseTop2MLP", "MLP"},
                   {"MixtralRMSNorm", "RMSNorm"}, {"MixtralRotaryEmbedding", "RotaryEmbedding"}}}};
    f.parse = parse;
    f.validate = validate;
    f.write = write;
    f.is_moe_layer = is_moe_layer;
    f.routed_experts_field = "num_local_experts";
    f.tokens = {1, {2}, std::nullopt};
    f.build_tree = build_tree;
    f.attention = AttentionKind::gqa;
    f.feed_forward_child = "block_sparse_moe";
    f.expert_projections = {"w1", "w3", "w2"};
    f.gate_scheme = gate_scheme;
    f.ktransformers_model_class = "Model";  // Switchyard's own spelling of the decoder stack
    f.gguf.architecture = "llama";
    f.gguf.read = read_gguf;
    f.gguf.write = write_gguf;
    f.gguf.interleaved_rope_rows = true;
    f.presets = {{"mixtral-8x7b", "Mixtral-8x7B, 32 layers, 8 experts", kMixtral8x7B},
                 {"tiny-mixtral", "Mixtral structure at test size", kTinyMixtral, true}};
    return f;
  }();
  return family;
}

}  // namespace switchyard::models
