#pragma once
// Causal attention of new query tokens against a KV cache, on the CPU. The new tokens sit at
// positions [first_position, first_position + tokens); the cache holds every position up to the
// last new one, so query t sees cache rows [0, first_position + t].
//
// The caches are f32 or bf16 (`cache_dtype`; bf16 as the bits cpu::f32_to_bf16 writes); bf16 rows
// are widened exactly as they are read, and all arithmetic is f32 either way, so a bf16 cache gives
// the f32 result of its rounded values (core/kv_cache_layout.h).
#include <cstdint>

#include "core/dtype.h"

namespace switchyard::cpu {

// Grouped-query attention (Qwen3-MoE, Mixtral).
// q: [tokens, heads, head_dim] f32; k_cache, v_cache: [context, kv_heads, head_dim] of cache_dtype;
// out: [tokens, heads, head_dim] f32. heads is a multiple of kv_heads; head h reads kv head
// h / (heads / kv_heads). Scores are scaled by `scale` before the softmax.
void gqa_attention(const float* q, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                   const void* k_cache, const void* v_cache, DType cache_dtype, std::int64_t kv_heads,
                   std::int64_t first_position, float scale, float* out);

// Multi-head latent attention in the absorbed form (DeepSeek): every head attends to the shared
// compressed latent and rope key of each position, and reads the latent as its value.
// q_latent: [tokens, heads, latent_dim] f32 (q_nope already multiplied into the latent space);
// q_rope: [tokens, heads, rope_dim] f32; latent_cache: [context, latent_dim] and
// rope_cache: [context, rope_dim] of cache_dtype; out_latent: [tokens, heads, latent_dim] f32.
void mla_attention(const float* q_latent, const float* q_rope, std::int64_t tokens, std::int64_t heads,
                   std::int64_t latent_dim, std::int64_t rope_dim, const void* latent_cache, const void* rope_cache,
                   DType cache_dtype, std::int64_t first_position, float scale, float* out_latent);

}  // namespace switchyard::cpu
