#pragma once
// Multi-head latent attention of ONE decode token (DeepSeek, absorbed form), one kernel launch: the
// same result as cuda::mla_attention (attention.h) with tokens == 1, built for the decode step.
//
// The token sits at position P = *position and sees cache rows [0, min(P + 1, max_context)); its
// head h scores row j as scale * (q_latent[h] . latent_j + q_rope[h] . rope_j) and its output is
// softmax(scores) . latent rows, in f32 (expf). Rows past the visible ones are never read: they may
// hold anything, NaN included. The caches are f32 or bf16 (`cache_dtype`, core/kv_cache_layout.h):
// rows are bulk-copied into shared memory as they are stored (a bf16 cache moves half the bytes of
// an f32 one) and widened to f32 as they are scored and summed; the grid, block and workspace are
// the same for both types, the shared memory of the key tiles half as large for bf16.
//
// For CUDA graphs: `position` is a device pointer to ONE int32, read by the kernel; the launch
// (grid, shared memory, workspace layout) depends only on the host arguments and the device, so a
// call captured once replays at any position. A P outside [0, max_context - 1] is the caller's error:
// the kernel still reads and writes nothing out of bounds (a P < 0 sees no row and gets NaN).
//
// Both launches read *position, and the decode launch the cache rows before P, before they wait for
// the kernel queued just before them (launch.cuh): that kernel must not write them. A decode step
// writes the position before its first kernel and row P alone just before this launch
// (write_mla_caches); the rows before P were written by earlier steps. Row P and the queries are
// read after the wait, so the loads that do not depend on the previous kernel overlap it.
//
// Design (flash-decoding, combine in the same launch):
//   - grid: (head tiles, splits). A block takes a tile of 4 heads (8 from 64 heads on; 2 up to 16
//     heads with max_context <= 4096; 1 or 2 when there are only that many) and one split of the
//     keys; blocks of one split run side by side, so each cache row comes from memory once and from
//     L2 for the other tiles.
//   - The number of splits S is fixed at launch from heads and max_context (one wave of blocks on an
//     H100/H200: 132 / head tiles, at most 128 and max_context / 32); on the device each split covers
//     max(32, ceil(visible / S)) keys rounded up to 16, and splits that start past the visible keys
//     exit at once. The keys stream through shared memory 32 (or 16) at a time by bulk copies (the
//     copy engine, TMA), the next tile loading while the block scores the current one; a warp scores
//     two keys for 4 (or 2) heads at once and the block keeps an online softmax per head.
//   - Combine: with one active split its block writes the output. Otherwise each block writes its
//     unnormalised partial (accumulator, max, sum) to the workspace and counts itself in on an int32
//     counter of its head tile; the last of up to 16 splits combines them (max-rescaled), and, when
//     more than 16 splits are active, the last of those group combiners combines the groups. The
//     last block of each level resets its counter to 0, so the counters are zero again when the
//     kernel ends. Decode in a model uses the variant below instead (mla_decode_partials +
//     mla_expand_partials): the expansion that follows combines the partials in all its blocks at
//     once, and the decode launch has no serial tail (on an H200, V2-Lite at context ~500: the GPU
//     side of a layer ~3 us shorter, docs/performance.md).
//
// Needs compute capability 9.0 or later (Hopper: bulk copies, mbarriers); launched with programmatic
// dependent launch like the other kernels (launch.cuh).
//
// Agreement with the CPU kernel: as mla_attention (attention.h): the same f32 rounding steps in a
// different order; tests/operators/cuda/kernels/test_mla_decode.cpp holds it to the bound of tests/operators/cuda/kernels/test_attention.cpp.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace switchyard::cuda {

// True when mla_decode_attention takes these sizes and pointers: heads >= 1, latent_dim a multiple of
// 4 in [4, 1024], rope_dim a multiple of 4 in [0, 128] (both multiples of 8 for a bf16 cache: rows
// move in 16-byte units), max_context >= 1, an f32 or bf16 cache, and every pointer 16-byte aligned
// (cudaMalloc's and the memory pool's are). A null pointer counts as aligned, so a caller may ask
// about the sizes alone, before it has buffers. Otherwise use mla_attention (attention.h).
bool mla_decode_supports(std::int64_t heads, std::int64_t latent_dim, std::int64_t rope_dim, std::int64_t max_context,
                         DType cache_dtype, const float* q_latent = nullptr, const float* q_rope = nullptr,
                         const void* latent_cache = nullptr, const void* rope_cache = nullptr,
                         const float* out_latent = nullptr);

// Workspace bytes for mla_decode_attention with these sizes: the partials of the splits (0 when one
// split suffices; then the workspace may be null). Throws std::invalid_argument for sizes
// mla_decode_supports refuses.
std::size_t mla_decode_workspace_bytes(std::int64_t heads, std::int64_t latent_dim, std::int64_t max_context);

// How many int32 counters mla_decode_attention needs for `heads` heads. The caller allocates them
// once, zeroes them once (cudaMemset) and may reuse them for every layer and step on the same stream:
// the kernel leaves them zero when it ends. Two launches that may run at the same time (on different
// streams) need their own counters and workspaces. After a launch that failed (a CUDA error), zero
// them again. Throws std::invalid_argument for heads < 1.
std::int64_t mla_decode_counter_count(std::int64_t heads);

// Device pointers, queued on `stream`:
//   q_latent: [heads, latent_dim] f32 (q_nope already multiplied into the latent space);
//   q_rope: [heads, rope_dim] f32; latent_cache: [max_context, latent_dim] and
//   rope_cache: [max_context, rope_dim] of cache_dtype; position: one int32, P;
//   out_latent: [heads, latent_dim] f32;
//   workspace: mla_decode_workspace_bytes(heads, latent_dim, max_context) bytes;
//   counters: mla_decode_counter_count(heads) int32, zero (see above); may be null only when the
//   workspace size is 0.
// q_rope and rope_cache may be null when rope_dim == 0. Throws std::invalid_argument, before
// launching, for what mla_decode_supports refuses, a missing pointer, or a GPU before Hopper.
void mla_decode_attention(const float* q_latent, const float* q_rope, std::int64_t heads, std::int64_t latent_dim,
                          std::int64_t rope_dim, const void* latent_cache, const void* rope_cache, DType cache_dtype,
                          const std::int32_t* position, std::int64_t max_context, float scale, float* out_latent,
                          void* workspace, std::int32_t* counters, cudaStream_t stream);

// The combine moved into the value expansion (decode's next step), so that no block of the decode
// launch combines alone while the others have finished: mla_decode_partials is
// mla_decode_attention without the combine (every active split writes its partial to the workspace;
// no counters, no out_latent), and mla_expand_partials then computes, per head h, the latent output
// from those partials (as the decode kernel's combine would) and out[h, j] = value row j of head h .
// that output, as gemv would (f32 accumulation of exactly widened weights). Several blocks per head
// each combine the head's partials (a few KiB each from L2) and take 32 of its rows.
// Needs more than one split at launch (mla_decode_workspace_bytes > 0); both launches take the same
// sizes, workspace and position.
struct ValueRows {
  const void* weight = nullptr;  // head h's row j at weight + h * head_stride + row_offset + j * latent_dim
  DType dtype = DType::bf16;     // bf16 or f32
  std::int64_t head_stride = 0, row_offset = 0;  // elements
  std::int64_t v_dim = 0;                        // rows a head
};
void mla_decode_partials(const float* q_latent, const float* q_rope, std::int64_t heads, std::int64_t latent_dim,
                         std::int64_t rope_dim, const void* latent_cache, const void* rope_cache, DType cache_dtype,
                         const std::int32_t* position, std::int64_t max_context, float scale, void* workspace,
                         cudaStream_t stream);
// Whether mla_expand_partials takes these (latent_dim a multiple of 8, 16-byte aligned rows, more
// than one split); a null pointer counts as aligned.
bool mla_expand_supports(std::int64_t heads, std::int64_t latent_dim, std::int64_t max_context, const ValueRows& rows,
                         const float* out = nullptr);
// out: [heads, v_dim] f32. Throws std::invalid_argument for what mla_expand_supports refuses or a
// null pointer.
void mla_expand_partials(const void* workspace, std::int64_t heads, std::int64_t latent_dim, std::int64_t max_context,
                         const std::int32_t* position, const ValueRows& rows, float* out, cudaStream_t stream);

}  // namespace switchyard::cuda
