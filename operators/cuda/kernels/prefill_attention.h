#pragma once
// Causal attention of a prompt's tokens on the GPU through cuBLAS: the same result as
// gqa_attention (attention.h) with the same layouts, computed as dense products. For a chunk of
// queries at a time, every head's scores against the keys the chunk sees come from one strided
// batched GEMM (f32 in, f32 compute, no TF32, scale as alpha), a kernel turns each row into its
// causal softmax (masked keys get 0), and a second batched GEMM multiplies by the values. The
// causal upper triangle of a chunk is computed and discarded: tensor-core-free f32 GEMMs still
// beat the per-tile kernel of gqa_attention many times at prompt lengths (docs/performance.md).
//
// Unlike gqa_attention, `position` (P) is a host value: a prefill is never captured in a CUDA
// graph. Query t (at position P + t) sees cache rows [0, P + t]; rows from P + tokens on are never
// read. Numerics: f32 dot products summed in cuBLAS's order, softmax in f32 with expf, as the
// kernels of attention.h within their bound.
#include <cstddef>
#include <cstdint>

#include "operators/cuda/kernels/device_context.h"

namespace switchyard::cuda {

// Workspace for prefill_attention: the scores of one chunk of queries, heads * chunk * (P + tokens)
// floats, with the chunk as many queries as fit kPrefillScoreBytes (at least one).
constexpr std::size_t kPrefillScoreBytes = std::size_t{64} << 20;
std::size_t prefill_attention_workspace_bytes(std::int64_t tokens, std::int64_t heads, std::int64_t position);

// Device pointers, queued on the context's stream, f32:
//   q: [tokens, heads, qk_dim]; k_cache: [>= P + tokens, kv_heads, qk_dim];
//   v_cache: [>= P + tokens, kv_heads, v_dim]; out: [tokens, heads, v_dim];
//   workspace: prefill_attention_workspace_bytes(tokens, heads, position) bytes.
// heads is a multiple of kv_heads; head h reads kv head h / (heads / kv_heads). Throws
// std::invalid_argument, before launching, for sizes < 1 (position < 0), sizes beyond cuBLAS's
// 32-bit arguments, null pointers or a small workspace.
void prefill_attention(DeviceContext& context, const float* q, std::int64_t tokens, std::int64_t heads,
                       std::int64_t qk_dim, std::int64_t v_dim, const float* k_cache, const float* v_cache,
                       std::int64_t kv_heads, std::int64_t position, float scale, float* out, void* workspace,
                       std::size_t workspace_bytes);

}  // namespace switchyard::cuda
