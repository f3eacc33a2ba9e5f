// DeepSeek-V2 / V3 module tree, in the registration order of DeepSeek's modeling code
// (the classes ktransformers' modeling_deepseek{,_v3}.py define).
#include "core/models/tree_builder.h"

namespace switchyard::models {
namespace {

struct Names {
  const char* causal_lm;
  const char* model;
  const char* layer;
  const char* attention;
  const char* moe;
  const char* gate;
  const char* mlp;
  const char* norm;
  const char* rotary;
  const char* yarn_rotary;
};

constexpr Names kV3 = {"DeepseekV3ForCausalLM", "DeepseekV3Model", "DeepseekV3DecoderLayer", "DeepseekV3Attention",
                       "DeepseekV3MoE", "DeepseekV3MoEGate", "DeepseekV3MLP", "DeepseekV3RMSNorm",
                       "DeepseekV3RotaryEmbedding", "DeepseekV3YarnRotaryEmbedding"};
constexpr Names kV2 = {"DeepseekV2ForCausalLM", "DeepseekV2Model", "DeepseekV2DecoderLayer", "DeepseekV2Attention",
                       "DeepseekV2MoE", "DeepseekV2MoEGate", "DeepseekV2MLP", "DeepseekV2RMSNorm",
                       "DeepseekV2RotaryEmbedding", "DeepseekV2YarnRotaryEmbedding"};

void attention(TreeBuilder& b, const Names& n, int layer) {
  const ModelConfig& c = b.tree().config();
  const std::int64_t heads = c.num_attention_heads;
  const std::int64_t qk_head = c.qk_nope_head_dim + c.qk_rope_head_dim;
  const int attn = b.module(layer, "self_attn", n.attention);
  if (c.q_lora_rank) {
    b.linear(attn, "q_a_proj", *c.q_lora_rank, c.hidden_size, TensorKind::attention);
    b.norm(attn, "q_a_layernorm", *c.q_lora_rank, n.norm);
    b.linear(attn, "q_b_proj", heads * qk_head, *c.q_lora_rank, TensorKind::attention);
  } else {
    b.linear(attn, "q_proj", heads * qk_head, c.hidden_size, TensorKind::attention);
  }
  b.linear(attn, "kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, c.hidden_size, TensorKind::attention);
  b.norm(attn, "kv_a_layernorm", c.kv_lora_rank, n.norm);
  b.linear(attn, "kv_b_proj", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, TensorKind::attention);
  b.linear(attn, "o_proj", c.hidden_size, heads * c.v_head_dim, TensorKind::attention);
  const bool yarn = c.rope_scaling && c.rope_scaling->type == "yarn";
  b.module(attn, "rotary_emb", yarn ? n.yarn_rotary : n.rotary);
}

void moe(TreeBuilder& b, const Names& n, int layer) {
  const ModelConfig& c = b.tree().config();
  const int mlp = b.module(layer, "mlp", n.moe);
  const int experts = b.module(mlp, "experts", "ModuleList");
  for (int e = 0; e < c.n_routed_experts; ++e) {
    const int expert = b.expert(experts, e, n.mlp);
    b.swiglu(expert, c.hidden_size, c.moe_intermediate_size, TensorKind::expert_gate_up, TensorKind::expert_down);
  }
  const int gate = b.module(mlp, "gate", n.gate);
  b.param(gate, "weight", shape2(c.n_routed_experts, c.hidden_size), TensorKind::router);
  if (c.topk_method == "noaux_tc") b.param(gate, "e_score_correction_bias", shape1(c.n_routed_experts), TensorKind::router_bias);
  if (c.n_shared_experts > 0) {
    const int shared = b.module(mlp, "shared_experts", n.mlp);
    b.swiglu(shared, c.hidden_size, c.moe_intermediate_size * c.n_shared_experts, TensorKind::shared_expert,
             TensorKind::shared_expert);
  }
}

}  // namespace

void build_deepseek(TreeBuilder& b) {
  const ModelConfig& c = b.tree().config();
  const Names& n = c.arch == Architecture::deepseek_v3 ? kV3 : kV2;
  const int root = b.root(n.causal_lm);
  const int model = b.module(root, "model", n.model);
  const int embed = b.module(model, "embed_tokens", "Embedding");
  b.param(embed, "weight", shape2(c.vocab_size, c.hidden_size), TensorKind::embedding);
  const int layers = b.module(model, "layers", "ModuleList");
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const int layer = b.layer(layers, i, n.layer);
    attention(b, n, layer);
    if (c.is_moe_layer(i)) {
      moe(b, n, layer);
    } else {
      const int mlp = b.module(layer, "mlp", n.mlp);
      b.swiglu(mlp, c.hidden_size, c.intermediate_size, TensorKind::dense_mlp, TensorKind::dense_mlp);
    }
    b.norm(layer, "input_layernorm", c.hidden_size, n.norm);
    b.norm(layer, "post_attention_layernorm", c.hidden_size, n.norm);
  }
  b.norm(model, "norm", c.hidden_size, n.norm);
  if (c.tie_word_embeddings) b.module(root, "lm_head", "Linear");
  else b.linear(root, "lm_head", c.vocab_size, c.hidden_size, TensorKind::output);
}

}  // namespace switchyard::models
