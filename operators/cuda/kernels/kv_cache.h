#pragma once
// Writing new tokens' keys and values into a KV cache on the GPU, at a position read from device
// memory, so that a captured CUDA graph replays at any position; and reading a cache's first rows
// back as f32 for a prompt's attention. A cache holds f32 or bf16 (`cache_dtype`,
// core/kv_cache_layout.h): an f32 cache gets exact copies, a bf16 cache the values rounded to
// nearest even (as cpu::f32_to_bf16 for finite values); reading widens exactly.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "operators/ops/rope_tables.h"

namespace switchyard::cuda {

// Device pointers. Writes `tokens` rows of `width` floats, source row t at source + t * source_stride,
// to rows [*position, *position + tokens) of cache: [max_context, width] of cache_dtype. `position`
// is a device pointer to one int32, the position of the first token; the launch depends only on the
// host arguments. Rows outside [0, max_context) are not written: the host checks the bound, the
// kernel only never writes out of bounds. Throws std::invalid_argument for a width < 1, negative
// tokens or strides, no position, or a cache dtype other than f32 and bf16. Queued on `stream`.
void write_cache_rows(void* cache, DType cache_dtype, std::int64_t width, const float* source,
                      std::int64_t source_stride, std::int64_t tokens, const std::int32_t* position,
                      std::int64_t max_context, cudaStream_t stream);

// Device pointers. out [rows, width] f32 = rows [0, rows) of cache [>= rows, width] of cache_dtype,
// widened (a prompt's attention reads a bf16 cache through this copy; an f32 cache needs none).
// Throws std::invalid_argument for negative sizes, null pointers with rows > 0, or a dtype other
// than f32 and bf16. Queued on `stream`.
void widen_cache_rows(const void* cache, DType cache_dtype, std::int64_t rows, std::int64_t width, float* out,
                      cudaStream_t stream);

// DeepSeek MLA's compressed KV of new tokens into its two caches in one launch (what
// copy_rows + rms_norm + write_cache_rows for the latent and copy_rows + apply_rope_at +
// write_cache_rows for the rope key do in six): ckv: [tokens, latent + rope] from kv_a_proj_with_mqa;
// the latent part is RMS-normalised with `norm_weight` ([latent], f32 or bf16) exactly as
// cuda::rms_norm does it (same block size, same summation order, so bit-identical), the rope part
// is rotated by the table rows *position + t exactly as apply_rope_at; they land in rows
// [*position, *position + tokens) of latent_cache [max_context, latent] and rope_cache
// [max_context, rope], both of cache_dtype (f32: those bits; bf16: them rounded as
// write_cache_rows rounds). rope must be even and at most 1024. Queued on `stream`. The launch reads
// *position (and the RoPE tables' rows and norm weights it picks) before it waits for the kernel
// queued just before it (launch.cuh), which must not write the position: a decode step writes it
// before its first kernel.
//
// `queries` (optional, when q is set): the new tokens' query rope parts in the same launch, head h
// of token t at q + t * token_stride + h * head_stride (rope floats, not yet rotated), rotated by
// the same table rows exactly as apply_rope_at would and written to out [tokens, heads, rope]; q
// itself is left as it is. (Decode: what apply_rope_at on q and copy_rows to the attention's
// rope queries do in two more launches.)
struct MlaQueryRope {
  const float* q = nullptr;
  std::int64_t heads = 0, token_stride = 0, head_stride = 0;
  float* out = nullptr;
};
//
// `absorb` (optional, one token only): decode's absorbed queries in the same launch, out[h * rows + c]
// = sum_i weight[(h * rows + c) * in + i] * q[h * head_stride + i] for heads h, rows c (weight:
// W_UK^T per head, [heads, rows, in], bf16 or f32), accumulated in f32: what cuda::gemv with one
// group per head computes, in another summation order. `in` a multiple of 8; weight and q 16-byte
// aligned, head_stride a multiple of 4.
struct MlaAbsorb {
  const void* weight = nullptr;
  DType dtype = DType::f32;
  const float* q = nullptr;
  std::int64_t heads = 0, rows = 0, in = 0, head_stride = 0;
  float* out = nullptr;
};
// Whether write_mla_caches takes `absorb` with `tokens` tokens (the conditions above); it throws
// std::invalid_argument for one it does not take.
bool mla_absorb_supported(const MlaAbsorb& absorb, std::int64_t tokens);
void write_mla_caches(const float* ckv, std::int64_t tokens, std::int64_t latent, std::int64_t rope,
                      const void* norm_weight, DType norm_dtype, float eps, const float* cos_table,
                      const float* sin_table, RopeLayout layout, const std::int32_t* position,
                      std::int64_t max_context, void* latent_cache, void* rope_cache, DType cache_dtype,
                      cudaStream_t stream, const MlaQueryRope& queries = {}, const MlaAbsorb& absorb = {});

}  // namespace switchyard::cuda
