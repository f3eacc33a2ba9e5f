#pragma once
// The row kernels' building blocks (gemv.cu), for launches that run a GEMV's rows beside other
// work: a warp a row, kGemvWarps rows a block of kGemvWarps * 32 threads.
#include <cuda_bf16.h>

#include <cstdint>

#include "operators/cuda/kernels/gemv.h"
#include "operators/cuda/kernels/launch.cuh"
#include "operators/cuda/kernels/widen.cuh"

namespace switchyard::cuda {

constexpr int kGemvWarps = 8;  // rows per block

// GemvShape with its defaults filled in, passed to the kernels by value; offsets and strides in
// weights (elements) and floats, as GemvShape's.
struct GemvRows {
  std::int64_t in, rows, rows_per_group, weight_group_stride, weight_row_offset, x_group_stride, x_token_stride,
      y_token_stride;
};

inline GemvRows gemv_rows_of(const GemvShape& shape) {
  return GemvRows{shape.in,
                  shape.rows,
                  shape.rows_per_group > 0 ? shape.rows_per_group : shape.rows,
                  shape.weight_group_stride,
                  shape.weight_row_offset,
                  shape.x_group_stride,
                  shape.x_token_stride > 0 ? shape.x_token_stride : shape.in,
                  shape.y_token_stride > 0 ? shape.y_token_stride : shape.rows};
}

// 8 weights of a row at element k: loaded raw into registers, widened to f32 when used.
template <typename W>
struct WeightChunk;
template <>
struct WeightChunk<__nv_bfloat16> {
  uint4 raw;
  __device__ void load(const __nv_bfloat16* row, std::int64_t k) { raw = __ldg(reinterpret_cast<const uint4*>(row + k)); }
  __device__ void to_f32(float (&w)[8]) const { widen(raw, w); }
};
template <>
struct WeightChunk<float> {
  float4 a, b;
  __device__ void load(const float* row, std::int64_t k) {
    a = __ldg(reinterpret_cast<const float4*>(row + k));
    b = __ldg(reinterpret_cast<const float4*>(row + k + 4));
  }
  __device__ void to_f32(float (&w)[8]) const {
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
  }
};

// 8 weights at element k of the row, as f32.
template <typename W>
__device__ inline void load8(const W* row, std::int64_t k, float (&w)[8]) {
  WeightChunk<W> chunk;
  chunk.load(row, k);
  chunk.to_f32(w);
}

// Chunks a lane loads before waiting for the previous kernel (cuda/launch.cuh): the weights are
// constant, so the first chunks of each row stream in while the kernel that produces x still
// runs; the rest of the row loads after. `registers` of staged weights in all, for one token
// (decode); more tokens stage none. The launch bounds keep one token's kernels at 4 (gemv: 16
// registers) or 3 (SwiGLU: 32) blocks per SM without spilling. Measured with `bench gemv` on an
// H200 (docs/performance.md): gemv staging 32 registers at 4 blocks an SM ran 2x slower; SwiGLU
// staging 32 instead of 16 ran 12% faster.
template <typename W>
__host__ __device__ constexpr int staged_chunks(int rows, int tokens, int registers) {
  return tokens > 1 ? 0 : registers / rows / static_cast<int>(sizeof(WeightChunk<W>) / 4);
}
constexpr std::int64_t kChunkStride = 32 * 8;  // elements between a lane's chunks

// acc[t] += w . x_t[k, k + 8)
template <int T>
__device__ inline void accumulate(const float (&w)[8], const float* x, std::int64_t token_stride, std::int64_t k,
                                  float (&acc)[T]) {
#pragma unroll
  for (int t = 0; t < T; ++t) {
    const float4 a = *reinterpret_cast<const float4*>(x + t * token_stride + k);
    const float4 b = *reinterpret_cast<const float4*>(x + t * token_stride + k + 4);
    acc[t] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
  }
}

// Warp per row j: both dot products, then silu(g) * u as silu_and_mul computes it. The first
// chunks of both rows load before the wait, as in gemv_kernel.
template <typename W, int T>
__device__ inline void swiglu_rows(unsigned block, std::int64_t in, std::int64_t rows, const W* gate, const W* up,
                                   const float* x, float* h) {
  constexpr int kStagedChunks = staged_chunks<W>(2, T, 32);
  const int lane = threadIdx.x % 32;
  const std::int64_t r = std::int64_t{block} * kGemvWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const W* gate_row = gate + r * in;
  const W* up_row = up + r * in;
  WeightChunk<W> staged_gate[kStagedChunks > 0 ? kStagedChunks : 1], staged_up[kStagedChunks > 0 ? kStagedChunks : 1];
#pragma unroll
  for (int u = 0; u < kStagedChunks; ++u) {
    const std::int64_t k = lane * 8 + u * kChunkStride;
    if (k < in) {
      staged_gate[u].load(gate_row, k);
      staged_up[u].load(up_row, k);
    }
  }
  begin_after_previous_grid();
  float g_acc[T], u_acc[T];
#pragma unroll
  for (int t = 0; t < T; ++t) g_acc[t] = u_acc[t] = 0.0f;
  float wg[8], wu[8];
#pragma unroll
  for (int u = 0; u < kStagedChunks; ++u) {
    const std::int64_t k = lane * 8 + u * kChunkStride;
    if (k >= in) break;
    staged_gate[u].to_f32(wg);
    staged_up[u].to_f32(wu);
    accumulate(wg, x, in, k, g_acc);
    accumulate(wu, x, in, k, u_acc);
  }
  for (std::int64_t k = lane * 8 + kStagedChunks * kChunkStride; k < in; k += kChunkStride) {
    load8(gate_row, k, wg);
    load8(up_row, k, wu);
    accumulate(wg, x, in, k, g_acc);
    accumulate(wu, x, in, k, u_acc);
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float g = g_acc[t], u = u_acc[t];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      g += __shfl_xor_sync(0xffffffffu, g, offset);
      u += __shfl_xor_sync(0xffffffffu, u, offset);
    }
    if (lane == 0) h[t * rows + r] = g / (1.0f + expf(-g)) * u;
  }
}

}  // namespace switchyard::cuda
