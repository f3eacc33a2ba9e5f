#pragma once
// Rotary position embeddings on the GPU, as operators/cpu/kernels/rope.h: the same three layouts and the
// same f32 arithmetic (each product rounded, no fused multiply-add), so for the same cos/sin
// tables the results are bit-identical to the CPU's. The tables are the CPU's too: computed on the
// host with rope_cos_sin (transformers' f32 angles) and copied.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "operators/ops/rope_tables.h"

namespace switchyard::cuda {

// Device pointers. Rotates, in place, the rope_dim values of each head of each token at
// x[t * token_stride + h * head_stride + i]; cos, sin: [tokens, rope_dim / 2], token t's row.
// rope_dim must be even and at most 1024 (throws std::invalid_argument otherwise). Queued on `stream`.
void apply_rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride,
                std::int64_t head_stride, int rope_dim, const float* cos, const float* sin, RopeLayout layout,
                cudaStream_t stream);

// As apply_rope, for CUDA graphs that replay at any position: cos_table, sin_table are whole tables
// [max_positions, rope_dim / 2] (rope_cos_sin from position 0), and token t uses row
// *position + t, where `position` is a device pointer to one int32, the position of the first token.
// The launch depends only on the host arguments. The caller keeps *position + tokens <= max_positions
// (the kernel reads those rows unchecked). Bit-identical to apply_rope given rows *position onward.
void apply_rope_at(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride,
                   std::int64_t head_stride, int rope_dim, const float* cos_table, const float* sin_table,
                   const std::int32_t* position, RopeLayout layout, cudaStream_t stream);

}  // namespace switchyard::cuda
