// Mixtral module tree, in the registration order of transformers' modeling_mixtral.py with the
// checkpoint's per-expert names (block_sparse_moe.experts.E.w1/w2/w3).
#include "core/models/tree_builder.h"

namespace switchyard::models {

void build_mixtral(TreeBuilder& b) {
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

}  // namespace switchyard::models
