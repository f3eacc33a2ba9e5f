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

// GQA on the CPU. The cache holds rotated keys and values, [max_context, kv_heads, head_dim] each,
// f32 or bf16.
class GqaAttention final : public AttentionOp, private GqaProjections {
 public:
  GqaAttention(const BuildContext& context, const Module& self_attn);
  void forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) override;
  std::size_t cache_bytes() const override { return k_cache_.bytes() + v_cache_.bytes(); }

 private:
  RopeFrequencies frequencies_;  // [rope_dim_ / 2]
  cpu::CacheRows k_cache_, v_cache_;
  std::int64_t max_context_;
};

}  // namespace switchyard
