#include "operators/cuda/gemv.h"

#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "operators/cuda/cuda_check.h"
#include "operators/cuda/launch.cuh"

namespace switchyard::cuda {
namespace {

constexpr int kWarps = 8;  // rows per block

struct Rows {
  std::int64_t in, rows, rows_per_group, weight_group_stride, weight_row_offset, x_group_stride, x_token_stride,
      y_token_stride;
};

__device__ inline void widen(const uint4& packed, float (&w)[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&packed);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    w[2 * i] = f.x;
    w[2 * i + 1] = f.y;
  }
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
// H200 (docs/perf-notes.md): gemv staging 32 registers at 4 blocks an SM ran 2x slower; SwiGLU
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

template <typename W, int T>
__global__ void __launch_bounds__(kWarps * 32, T == 1 ? 4 : 2) gemv_kernel(Rows s, const W* weight, const float* x, float* y) {
  constexpr int kStagedChunks = staged_chunks<W>(1, T, 16);
  const int lane = threadIdx.x % 32;
  const std::int64_t r = std::int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (r >= s.rows) return;
  const std::int64_t g = r / s.rows_per_group, j = r % s.rows_per_group;
  const W* row = weight + g * s.weight_group_stride + s.weight_row_offset + j * s.in;
  WeightChunk<W> staged[kStagedChunks > 0 ? kStagedChunks : 1];
#pragma unroll
  for (int u = 0; u < kStagedChunks; ++u) {
    const std::int64_t k = lane * 8 + u * kChunkStride;
    if (k < s.in) staged[u].load(row, k);
  }
  begin_after_previous_grid();
  const float* xg = x + g * s.x_group_stride;
  float acc[T];
#pragma unroll
  for (int t = 0; t < T; ++t) acc[t] = 0.0f;
  float w[8];
#pragma unroll
  for (int u = 0; u < kStagedChunks; ++u) {
    const std::int64_t k = lane * 8 + u * kChunkStride;
    if (k >= s.in) break;
    staged[u].to_f32(w);
    accumulate(w, xg, s.x_token_stride, k, acc);
  }
#pragma unroll 2
  for (std::int64_t k = lane * 8 + kStagedChunks * kChunkStride; k < s.in; k += kChunkStride) {
    float v[8];
    load8(row, k, v);
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const float4 a = *reinterpret_cast<const float4*>(xg + t * s.x_token_stride + k);
      const float4 b = *reinterpret_cast<const float4*>(xg + t * s.x_token_stride + k + 4);
      acc[t] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y + v[6] * b.z + v[7] * b.w;
    }
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float v = acc[t];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) y[t * s.y_token_stride + r] = v;
  }
}

// Warp per row j: both dot products, then silu(g) * u as silu_and_mul computes it. The first
// chunks of both rows load before the wait, as in gemv_kernel.
template <typename W, int T>
__global__ void __launch_bounds__(kWarps * 32, T == 1 ? 3 : 2)
    swiglu_kernel(std::int64_t in, std::int64_t rows, const W* gate, const W* up, const float* x, float* h) {
  constexpr int kStagedChunks = staged_chunks<W>(2, T, 32);
  const int lane = threadIdx.x % 32;
  const std::int64_t r = std::int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
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
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const float4 a = *reinterpret_cast<const float4*>(x + t * in + k);
      const float4 b = *reinterpret_cast<const float4*>(x + t * in + k + 4);
      g_acc[t] += wg[0] * a.x + wg[1] * a.y + wg[2] * a.z + wg[3] * a.w + wg[4] * b.x + wg[5] * b.y + wg[6] * b.z +
                  wg[7] * b.w;
      u_acc[t] += wu[0] * a.x + wu[1] * a.y + wu[2] * a.z + wu[3] * a.w + wu[4] * b.x + wu[5] * b.y + wu[6] * b.z +
                  wu[7] * b.w;
    }
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

template <typename W>
void launch_swiglu(std::int64_t tokens, std::int64_t in, std::int64_t rows, const void* gate, const void* up,
                   const float* x, float* h, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const auto* g = static_cast<const W*>(gate);
  const auto* u = static_cast<const W*>(up);
  switch (tokens) {
#define SWITCHYARD_SWIGLU_CASE(T) \
  case T: launch_kernel(swiglu_kernel<W, T>, blocks, kWarps * 32, 0, stream, in, rows, g, u, x, h); break;
    SWITCHYARD_SWIGLU_CASE(1)
    SWITCHYARD_SWIGLU_CASE(2)
    SWITCHYARD_SWIGLU_CASE(3)
    SWITCHYARD_SWIGLU_CASE(4)
    SWITCHYARD_SWIGLU_CASE(5)
    SWITCHYARD_SWIGLU_CASE(6)
    SWITCHYARD_SWIGLU_CASE(7)
    SWITCHYARD_SWIGLU_CASE(8)
#undef SWITCHYARD_SWIGLU_CASE
    default: throw std::invalid_argument("cuda::gemv_swiglu: tokens " + std::to_string(tokens));
  }
}

template <typename W>
void launch(const Rows& s, std::int64_t tokens, const void* weight, const float* x, float* y, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((s.rows + kWarps - 1) / kWarps);
  const auto* w = static_cast<const W*>(weight);
  switch (tokens) {
#define SWITCHYARD_GEMV_CASE(T) \
  case T: launch_kernel(gemv_kernel<W, T>, blocks, kWarps * 32, 0, stream, s, w, x, y); break;
    SWITCHYARD_GEMV_CASE(1)
    SWITCHYARD_GEMV_CASE(2)
    SWITCHYARD_GEMV_CASE(3)
    SWITCHYARD_GEMV_CASE(4)
    SWITCHYARD_GEMV_CASE(5)
    SWITCHYARD_GEMV_CASE(6)
    SWITCHYARD_GEMV_CASE(7)
    SWITCHYARD_GEMV_CASE(8)
#undef SWITCHYARD_GEMV_CASE
    default: throw std::invalid_argument("cuda::gemv: tokens " + std::to_string(tokens));
  }
}

Rows rows_of(const GemvShape& shape) {
  return Rows{shape.in,
              shape.rows,
              shape.rows_per_group > 0 ? shape.rows_per_group : shape.rows,
              shape.weight_group_stride,
              shape.weight_row_offset,
              shape.x_group_stride,
              shape.x_token_stride > 0 ? shape.x_token_stride : shape.in,
              shape.y_token_stride > 0 ? shape.y_token_stride : shape.rows};
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

bool gemv_supports(const GemvShape& shape, DType weight_dtype, const void* weight, const float* x) {
  if (shape.tokens < 1 || shape.tokens > kGemvMaxTokens || shape.in <= 0 || shape.rows <= 0) return false;
  if (weight_dtype != DType::bf16 && weight_dtype != DType::f32) return false;
  const Rows s = rows_of(shape);
  const std::int64_t element = weight_dtype == DType::bf16 ? 2 : 4;
  auto multiple = [](std::int64_t v, std::int64_t m) { return v % m == 0; };
  return multiple(s.in, 8) && aligned16(weight) && aligned16(x) && multiple(s.weight_group_stride * element, 16) &&
         multiple(s.weight_row_offset * element, 16) && multiple(s.x_group_stride, 4) && multiple(s.x_token_stride, 4);
}

void gemv(const GemvShape& shape, const void* weight, DType weight_dtype, const float* x, float* y,
          cudaStream_t stream) {
  if (!gemv_supports(shape, weight_dtype, weight, x))
    throw std::invalid_argument("cuda::gemv: unsupported shape, dtype or alignment");
  const Rows s = rows_of(shape);
  if (weight_dtype == DType::bf16) launch<__nv_bfloat16>(s, shape.tokens, weight, x, y, stream);
  else launch<float>(s, shape.tokens, weight, x, y, stream);
}

bool gemv_swiglu_supports(std::int64_t tokens, std::int64_t in, DType weight_dtype, const void* gate, const void* up,
                          const float* x) {
  return tokens >= 1 && tokens <= kGemvMaxTokens && in > 0 && in % 8 == 0 &&
         (weight_dtype == DType::bf16 || weight_dtype == DType::f32) && aligned16(gate) && aligned16(up) &&
         aligned16(x);
}

void gemv_swiglu(std::int64_t tokens, std::int64_t in, std::int64_t rows, const void* gate, const void* up,
                 DType weight_dtype, const float* x, float* h, cudaStream_t stream) {
  if (!gemv_swiglu_supports(tokens, in, weight_dtype, gate, up, x))
    throw std::invalid_argument("cuda::gemv_swiglu: unsupported shape, dtype or alignment");
  if (rows <= 0) return;
  if (weight_dtype == DType::bf16) launch_swiglu<__nv_bfloat16>(tokens, in, rows, gate, up, x, h, stream);
  else launch_swiglu<float>(tokens, in, rows, gate, up, x, h, stream);
}

}  // namespace switchyard::cuda
