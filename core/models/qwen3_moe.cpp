// Qwen3-MoE module tree, in the registration order of transformers' modeling_qwen3_moe.py; the
// experts use the checkpoint's per-expert names (mlp.experts.E.gate_proj).
#include "core/models/tree_builder.h"

namespace switchyard::models {

void build_qwen3_moe(TreeBuilder& b) {
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

}  // namespace switchyard::models
