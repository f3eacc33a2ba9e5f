#pragma once
// The attention operator as a decoder layer sees it, and what every device's attention shares:
// the MLA projections, the RoPE frequencies and softmax scale of the config, the context check.
// Each operator owns its layer's KV cache ("KV caches live with attention") and runs new tokens at
// positions [position, position + tokens) against everything cached before them. The CPU's are in
// operators/cpu/attention.h, the GPU's in operators/cuda/gpu_attention_op.h.
#include <memory>
#include <vector>

#include "operators/ops/build_context.h"
#include "operators/ops/rope_tables.h"
#include "operators/ops/linear_op.h"

namespace switchyard {

class AttentionOp {
 public:
  virtual ~AttentionOp() = default;
  // x: [tokens, hidden] f32 (already normalised) -> out: [tokens, hidden] f32
  virtual void forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) = 0;
  // Bytes of KV cache held: the allocations themselves (BuildContext::kv_cache sizes them).
  virtual std::size_t cache_bytes() const = 0;
  // Where x, out and the cache live.
  virtual Device device() const { return Device::cpu(); }
};

// Multi-head latent attention (DeepSeek-V2/V3). The cache holds, per position, the normalised
// compressed latent [kv_lora_rank] and the rotated shared rope key [qk_rope_head_dim]; prefill and
// decode both run in the absorbed form, so the latent is read once per head and never expanded.
// What the CPU and GPU MLA operators share: the sizes, the softmax scale and the projections from
// the config and the checkpoint (all but kv_b_proj, which each form lays out its own way), each on
// the device the plan gives it.
class MlaProjections {
 protected:
  MlaProjections(const BuildContext& context, const Module& self_attn);

  std::int64_t heads_, nope_, rope_, v_dim_, latent_;
  float scale_;
  bool has_q_lora_;
  LinearOp q_a_, q_b_, q_, kv_a_, o_;
  NormOp q_a_norm_, kv_a_norm_;
};

// Grouped-query attention, with what the config asks for: biases on q/k/v (attention_bias), a
// per-head RMSNorm of queries and keys before RoPE (qk_norm: Qwen3-MoE, GLM-4.5), RoPE over the
// first rope_dim of each head's head_dim (GLM: half). What the CPU and GPU GQA operators share: the
// sizes, the softmax scale and the projections and norms, each on the device the plan gives it.
class GqaProjections {
 protected:
  GqaProjections(const BuildContext& context, const Module& self_attn);

  std::int64_t heads_, kv_heads_, head_dim_;
  int rope_dim_;  // the dimensions RoPE turns at the start of each head, <= head_dim_
  float scale_;
  LinearOp q_, k_, v_, o_;
  std::unique_ptr<NormOp> q_norm_, k_norm_;  // with qk_norm
};

// RoPE frequencies of the model (default or YaRN); InputError for other scalings.
RopeFrequencies rope_frequencies(const ModelConfig& config, int rope_dim);
// DeepSeek MLA's softmax scale: 1/sqrt(nope + rope), times YaRN's mscale(factor, mscale_all_dim)^2.
float mla_softmax_scale(const ModelConfig& config);
// InputError when [position, position + tokens) does not fit the cache.
void check_context(std::int64_t position, std::int64_t tokens, std::int64_t max_context);

}  // namespace switchyard
