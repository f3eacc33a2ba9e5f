#pragma once
// Attention on the CPU: MLA (DeepSeek-V2/V3) and GQA, each with its KV cache in host memory.
#include <memory>
#include <vector>

#include "operators/cpu/kernels/cache_rows.h"
#include "operators/cpu/kernels/rope.h"
#include "operators/ops/attention_op.h"

namespace switchyard {

class MlaAttention final : public AttentionOp, private MlaProjections {
 public:
  MlaAttention(const BuildContext& context, const Module& self_attn);
  void forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) override;
  std::size_t cache_bytes() const override { return latent_cache_.bytes() + rope_cache_.bytes(); }

 private:
  std::vector<float> w_uk_;  // [heads, nope, latent]: kv_b_proj rows that make keys, f32
  std::vector<float> w_uv_;  // [heads, v_dim, latent]: kv_b_proj rows that make values, f32
  RopeFrequencies frequencies_;
  cpu::CacheRows latent_cache_;  // [max_context, latent], f32 or bf16
  cpu::CacheRows rope_cache_;    // [max_context, rope], f32 or bf16
  std::int64_t max_context_;
};

// Grouped-query attention, with what the config asks for: biases on q/k/v (attention_bias), a
// per-head RMSNorm of queries and keys before RoPE (qk_norm: Qwen3-MoE, GLM-4.5), RoPE over the
// first rope_dim of each head's head_dim (GLM: half). The cache holds rotated keys and values,
// [max_context, kv_heads, head_dim] each, f32 or bf16.
class GqaAttention final : public AttentionOp {
 public:
  GqaAttention(const BuildContext& context, const Module& self_attn);
  void forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) override;
  std::size_t cache_bytes() const override { return k_cache_.bytes() + v_cache_.bytes(); }

 private:
  std::int64_t heads_, kv_heads_, head_dim_;
  int rope_dim_;  // the dimensions RoPE turns at the start of each head, <= head_dim_
  float scale_;
  LinearOp q_, k_, v_, o_;
  std::unique_ptr<NormOp> q_norm_, k_norm_;
  RopeFrequencies frequencies_;  // [rope_dim_ / 2]
  cpu::CacheRows k_cache_, v_cache_;
  std::int64_t max_context_;
};

}  // namespace switchyard
