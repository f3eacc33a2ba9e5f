#pragma once
// Causal attention of new query tokens against a KV cache on the GPU, as
// operators/cpu/kernels/causal_attention.h: the new tokens sit at positions [P, P + tokens) with P = *position,
// query t sees cache rows [0, P + t], and its output is softmax(scale * q.k) over them times the
// values, in f32 (expf). The caches are f32 or bf16 (`cache_dtype`, core/kv_cache_layout.h): bf16
// rows are widened exactly as they load into shared memory (half the bytes from memory), and the
// rest is the same f32 arithmetic, so a bf16 cache gives the f32 result of its rounded values.
//
// For CUDA graphs: `position` is a device pointer to ONE int32 (P), read by the kernels; the launch
// (grid, shared memory, workspace layout) depends only on the host arguments, so a captured call
// replays at any position. The kernels read cache rows [0, min(P + tokens, max_context)) only: rows
// past the visible length may hold anything. A P outside [0, max_context - tokens] is the caller's
// error (the host checks it); the kernels then still read and write nothing out of bounds, and a
// query that sees no cache row gets NaN.
//
// Design (flash-decoding; tokens = 1 is the hot path): the keys are split into a fixed number of
// splits (split_count in attention.cu, from tokens * heads and max_context), each split covering an
// equal share of the P + tokens visible keys (at least 32; splits past them exit at once), so that as
// many splits work as the visible length pays for. A block takes one split, one kv head and a tile of
// up to 16 query rows (the query heads that share the kv head, times tokens; for MLA, a tile of
// heads); it streams the split's keys through shared memory 32 at a time, reads each cache row once
// for all its query rows, and keeps an online softmax (running max, sum, accumulator) in f32. When one
// split covers every visible key its block writes the output (the combine kernel, still launched for
// graph capture, returns at once); with several each writes its partial (max, sum, unnormalised
// accumulator) to the workspace and a second kernel combines the splits. Many tokens take the same
// kernel (one split, blocks over query tiles, each reading the keys its tile sees), correct but
// slow at prompt lengths: the operators send prompts to prefill_attention.h (cuBLAS) instead.
//
// Agreement with the CPU kernels: both are f32 with different summation orders and the GPU's online
// softmax rescaling; dot products over d terms differ by ~sqrt(d) f32 rounding steps of the score
// magnitude, the softmax sums by ~sqrt(keys) steps. tests/operators/cuda/kernels/test_attention.cpp bounds
// |out - exact| by 3e-5 * (1 + S) * sum_r p_r |v_r| with S the largest |scale| * sum |q k| of a query.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace switchyard::cuda {

// Workspace for gqa_attention with these sizes (0 when one split suffices; then workspace may be
// null). Throws std::invalid_argument for negative sizes.
std::size_t gqa_attention_workspace_bytes(std::int64_t tokens, std::int64_t heads, std::int64_t v_dim,
                                          std::int64_t max_context);

// Grouped-query attention (Qwen3-MoE, Mixtral; DeepSeek's MLA prefill on decompressed K/V with
// kv_heads == heads). Device pointers, queued on `stream`:
//   q: [tokens, heads, qk_dim] f32; k_cache: [max_context, kv_heads, qk_dim] of cache_dtype;
//   v_cache: [max_context, kv_heads, v_dim] of cache_dtype; out: [tokens, heads, v_dim] f32;
//   workspace: gqa_attention_workspace_bytes(tokens, heads, v_dim, max_context) bytes.
// heads is a multiple of kv_heads; head h reads kv head h / (heads / kv_heads). qk_dim and v_dim
// in [1, 512], any value (multiples of 4 with 16-byte aligned pointers take vector loads).
// Throws std::invalid_argument, before launching, for other sizes, a cache dtype other than f32
// and bf16, or a missing workspace/position.
void gqa_attention(const float* q, std::int64_t tokens, std::int64_t heads, std::int64_t qk_dim,
                   std::int64_t v_dim, const void* k_cache, const void* v_cache, DType cache_dtype,
                   std::int64_t kv_heads, const std::int32_t* position, std::int64_t max_context, float scale,
                   float* out, void* workspace, cudaStream_t stream);

// Workspace for mla_attention with these sizes (0 when one split suffices). Throws
// std::invalid_argument for negative sizes.
std::size_t mla_attention_workspace_bytes(std::int64_t tokens, std::int64_t heads, std::int64_t latent_dim,
                                          std::int64_t max_context);

// Multi-head latent attention in the absorbed form (DeepSeek), as cpu::mla_attention: the key of a
// position is [its latent | its rope key], shared by every head, and its value is the latent.
// Device pointers, queued on `stream`:
//   q_latent: [tokens, heads, latent_dim] f32; q_rope: [tokens, heads, rope_dim] f32;
//   latent_cache: [max_context, latent_dim] and rope_cache: [max_context, rope_dim] of cache_dtype;
//   out_latent: [tokens, heads, latent_dim] f32;
//   workspace: mla_attention_workspace_bytes(tokens, heads, latent_dim, max_context) bytes.
// latent_dim in [1, 1024], rope_dim in [0, 128] (DeepSeek-V2/V3: 512 and 64). Throws
// std::invalid_argument, before launching, for other sizes or a missing workspace/position.
void mla_attention(const float* q_latent, const float* q_rope, std::int64_t tokens, std::int64_t heads,
                   std::int64_t latent_dim, std::int64_t rope_dim, const void* latent_cache,
                   const void* rope_cache, DType cache_dtype, const std::int32_t* position,
                   std::int64_t max_context, float scale, float* out_latent, void* workspace, cudaStream_t stream);

}  // namespace switchyard::cuda
