#pragma once
// Attention on a GPU. The KV cache lives in device memory with the operator; every step reads the
// first position from the runtime's device memory, so a captured decode graph replays at any
// position (the host position is used for bounds checks and prefill sizes only).
//
// MLA (DeepSeek): decode runs in the absorbed form (q_nope turned into the latent space by
// kv_b_proj's key rows, attention over the cached latent and rope key, values from kv_b_proj's
// value rows), reading the latent cache once per tile of heads; prefill decompresses the cached
// latent into per-head keys and values and runs ordinary attention over them.
// GQA (Qwen3-MoE and GLM-4.5 with per-head q/k norms, Mixtral, GLM-4.5-Air): keys and values cached
// per kv head; RoPE over the first rope_dim of each head (GLM: half of head_dim).
//
// Caches are f32 or bf16 (BuildContext::kv_cache, core/kv_cache_layout.h): written rounded, read
// widened by the kernels themselves in decode (half the bytes for bf16), and widened into an f32
// copy of the visible rows for a prompt's cuBLAS attention.
#include "operators/ops/attention_op.h"
#include "operators/cuda/gpu_runtime.h"

namespace switchyard {

class GpuMlaAttention final : public AttentionOp, private MlaProjections {
 public:
  GpuMlaAttention(const BuildContext& context, const Module& self_attn);
  void forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) override;
  std::size_t cache_bytes() const override { return latent_cache_.bytes() + rope_cache_.bytes(); }
  Device device() const override { return gpu_->where(); }

 private:
  // q_latent[t, h] = q_nope[t, h] W_UK[h]; attn[t, h] = W_UV[h] out_latent[t, h] (batched GEMMs
  // over heads on kv_b_proj's rows).
  void absorb_queries(const float* q, std::int64_t tokens, float* q_latent);
  // first: [tokens, q_a or q rows]; ckv: [tokens, latent + rope] (one gemv over the stacked
  // weights when one token's buffers are back to back).
  void project(const float* x, std::int64_t tokens, float* first, float* ckv);
  void expand_values(const float* out_latent, std::int64_t tokens, float* attn);
  // Decode's attention core: absorbed queries in, attn [heads, v_dim] out (the decode kernel and
  // the expansion that combines its partials where they take the sizes, else mla_attention).
  void attend_one_token(const float* q_latent, const float* q_rope, float* attn);

  GpuRuntime* gpu_;
  std::int64_t max_context_;
  LinearOp kv_b_;
  const GpuRuntime::RopeTables* rope_tables_;
  cuda::DeviceBuffer latent_cache_, rope_cache_;  // [max_context, latent], [max_context, rope] of cache_dtype_
  DType cache_dtype_ = DType::f32;
  // kv_b_proj's key rows transposed per head, [heads, latent, nope] in the checkpoint's dtype:
  // decode's absorption is then a matrix-vector product over contiguous rows.
  cuda::DeviceBuffer w_uk_t_;
  DType w_uk_t_dtype_ = DType::f32;
  const void* stacked_ = nullptr;  // [q or q_a rows; kv_a rows], or null (not stackable)
  std::int32_t* decode_counters_ = nullptr;  // for cuda::mla_decode_attention, or null (not used)
};

class GpuGqaAttention final : public AttentionOp, private GqaProjections {
 public:
  GpuGqaAttention(const BuildContext& context, const Module& self_attn);
  void forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) override;
  std::size_t cache_bytes() const override { return k_cache_.bytes() + v_cache_.bytes(); }
  Device device() const override { return gpu_->where(); }

 private:
  GpuRuntime* gpu_;
  std::int64_t max_context_;
  const GpuRuntime::RopeTables* rope_tables_;
  cuda::DeviceBuffer k_cache_, v_cache_;  // [max_context, kv_heads, head_dim] of cache_dtype_
  DType cache_dtype_ = DType::f32;
};

}  // namespace switchyard
