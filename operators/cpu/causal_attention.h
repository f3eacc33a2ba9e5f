#pragma once
// Causal attention of new query tokens against a KV cache, on the CPU, f32. The new tokens sit at
// positions [first_position, first_position + tokens); the cache holds every position up to the
// last new one, so query t sees cache rows [0, first_position + t].
#include <cstdint>

namespace switchyard::cpu {

// Grouped-query attention (Qwen3-MoE, Mixtral).
// q: [tokens, heads, head_dim]; k_cache, v_cache: [context, kv_heads, head_dim];
// out: [tokens, heads, head_dim]. heads is a multiple of kv_heads; head h reads kv head
// h / (heads / kv_heads). Scores are scaled by `scale` before the softmax.
void gqa_attention(const float* q, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                   const float* k_cache, const float* v_cache, std::int64_t kv_heads, std::int64_t first_position,
                   float scale, float* out);

// Multi-head latent attention in the absorbed form (DeepSeek): every head attends to the shared
// compressed latent and rope key of each position, and reads the latent as its value.
// q_latent: [tokens, heads, latent_dim] (q_nope already multiplied into the latent space);
// q_rope: [tokens, heads, rope_dim]; latent_cache: [context, latent_dim];
// rope_cache: [context, rope_dim]; out_latent: [tokens, heads, latent_dim].
void mla_attention(const float* q_latent, const float* q_rope, std::int64_t tokens, std::int64_t heads,
                   std::int64_t latent_dim, std::int64_t rope_dim, const float* latent_cache, const float* rope_cache,
                   std::int64_t first_position, float scale, float* out_latent);

}  // namespace switchyard::cpu
