#include "operators/cuda/kernels/rope.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

// How token t finds its row of the cos/sin tables.
struct TokenRow {  // apply_rope: per-call tables, row t
  __device__ std::int64_t operator()(std::int64_t t) const { return t; }
};
struct PositionRow {  // apply_rope_at: whole tables, row *position + t (read on the device)
  const std::int32_t* position;
  __device__ std::int64_t operator()(std::int64_t t) const { return std::int64_t{*position} + t; }
};

// threadIdx.x: the pair j; threadIdx.y: a head among the block's heads_per_block. Every thread
// reads its pair before any writes (the interleaved_to_half_split layout writes where other
// threads read), so a head's threads all live in one block and meet at a barrier.
template <typename Row>
__global__ void rotate_heads(float* x, std::int64_t heads, int head_groups, std::int64_t token_stride,
                             std::int64_t head_stride, int half, const float* cos, const float* sin,
                             RopeLayout layout, Row row_of) {
  begin_after_previous_grid();
  const std::int64_t t = blockIdx.x / head_groups;
  const std::int64_t h = std::int64_t{blockIdx.x % head_groups} * blockDim.y + threadIdx.y;
  const int j = threadIdx.x;
  const bool active = h < heads && j < half;
  float* v = x + t * token_stride + h * head_stride;
  const bool pairs_in = layout != RopeLayout::half_split;
  const bool pairs_out = layout == RopeLayout::interleaved;
  float a = 0, b = 0;
  if (active) {
    a = pairs_in ? v[2 * j] : v[j];
    b = pairs_in ? v[2 * j + 1] : v[j + half];
  }
  __syncthreads();
  if (!active) return;
  const std::int64_t row = row_of(t);
  const float c = cos[row * half + j], s = sin[row * half + j];
  // transformers' order: (x * cos) + (rotate_half(x) * sin), each product rounded.
  const float first = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  const float second = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  v[pairs_out ? 2 * j : j] = first;
  v[pairs_out ? 2 * j + 1 : j + half] = second;
}

template <typename Row>
void rotate(const char* name, float* x, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride,
            std::int64_t head_stride, int rope_dim, const float* cos, const float* sin, RopeLayout layout, Row row_of,
            cudaStream_t stream) {
  if (rope_dim <= 0 || rope_dim % 2 != 0 || rope_dim > 1024)
    throw std::invalid_argument(std::string(name) + ": rope_dim " + std::to_string(rope_dim) +
                                " must be even, in [2, 1024]");
  if (tokens <= 0 || heads <= 0) return;
  const int half = rope_dim / 2;
  const int pair_threads = (half + 31) / 32 * 32;
  const int heads_per_block = static_cast<int>(std::min<std::int64_t>(std::max(1, 256 / pair_threads), heads));
  const auto head_groups = static_cast<int>((heads + heads_per_block - 1) / heads_per_block);
  const std::int64_t blocks = tokens * head_groups;
  if (blocks > 0x7fffffff) throw std::invalid_argument(std::string(name) + ": too many tokens and heads for one launch");
  const dim3 threads(static_cast<unsigned>(pair_threads), static_cast<unsigned>(heads_per_block));
  launch_kernel(rotate_heads<Row>, static_cast<unsigned>(blocks), threads, 0, stream, x, heads, head_groups,
                token_stride, head_stride, half, cos, sin, layout, row_of);
}

}  // namespace

void apply_rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride,
                std::int64_t head_stride, int rope_dim, const float* cos, const float* sin, RopeLayout layout,
                cudaStream_t stream) {
  rotate("cuda::apply_rope", x, tokens, heads, token_stride, head_stride, rope_dim, cos, sin, layout, TokenRow{},
         stream);
}

void apply_rope_at(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride,
                   std::int64_t head_stride, int rope_dim, const float* cos_table, const float* sin_table,
                   const std::int32_t* position, RopeLayout layout, cudaStream_t stream) {
  if (position == nullptr) throw std::invalid_argument("cuda::apply_rope_at: no position (a device pointer to one int32)");
  rotate("cuda::apply_rope_at", x, tokens, heads, token_stride, head_stride, rope_dim, cos_table, sin_table, layout,
         PositionRow{position}, stream);
}

}  // namespace switchyard::cuda
