#pragma once
// RoPE on the CPU (operators/ops/rope_tables.h has the frequencies, tables and layouts).
#include <cstdint>

#include "operators/ops/rope_tables.h"

namespace switchyard::cpu {

// Rotates, in place, the rope_dim values of each head of each token at
// x[t * token_stride + h * head_stride + i] (so q's rope part inside [tokens, heads, nope + rope]
// is x = q + nope, head_stride = nope + rope). cos, sin: [tokens, rope_dim / 2], token t's row.
// rope_dim must be even and at most 1024 (throws std::invalid_argument otherwise).
void apply_rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride, std::int64_t head_stride,
                int rope_dim, const float* cos, const float* sin, RopeLayout layout);

}  // namespace switchyard::cpu
