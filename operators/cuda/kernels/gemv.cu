#include "operators/cuda/kernels/gemv.h"

#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/async_copy.cuh"
#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_facts.h"
#include "operators/cuda/kernels/gemv_rows.cuh"
#include "operators/cuda/kernels/launch.cuh"
#include "operators/cuda/kernels/quant_gemv.h"

namespace switchyard::cuda {
namespace {

template <typename W, int T>
__global__ void __launch_bounds__(kGemvWarps * 32, T == 1 ? 4 : 2) gemv_kernel(GemvRows s, const W* weight, const float* x, float* y) {
  constexpr int kStagedChunks = staged_chunks<W>(1, T, 16);
  const int lane = threadIdx.x % 32;
  const std::int64_t r = std::int64_t{blockIdx.x} * kGemvWarps + threadIdx.x / 32;
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
    load8(row, k, w);
    accumulate(w, xg, s.x_token_stride, k, acc);
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float v = acc[t];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) y[t * s.y_token_stride + r] = v;
  }
}

// One token, bf16 rows of at most kSharedRowBytes: every weight of the block's rows is copied to
// shared memory before the wait (cp.async), so the whole matrix streams in while the kernel that
// produces x still runs, where gemv_kernel stages 16 registers a lane. After the wait each lane
// reads back the pieces it copied itself (no barrier) and sums as gemv_kernel does. On an H200:
// q + kv_a 5.17 us against 5.81, shared down 4.33 against 5.38, and the GPU side of a V2-Lite
// layer ~1.4 us shorter (docs/performance.md).
constexpr std::int64_t kSharedRowBytes = 6 * 1024;  // 8 rows: 48 KiB, the static limit

__global__ void __launch_bounds__(kGemvWarps * 32, 4)
    gemv_shared_kernel(GemvRows s, const __nv_bfloat16* weight, const float* x, float* y) {
  extern __shared__ uint4 staged_rows[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::int64_t r = std::int64_t{blockIdx.x} * kGemvWarps + warp;
  const int pieces = static_cast<int>(s.in / 8);  // 16-byte pieces a row
  uint4* mine = staged_rows + warp * pieces;
  const std::int64_t g = r / s.rows_per_group, j = r % s.rows_per_group;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (r < s.rows) {
    const auto* row =
        reinterpret_cast<const uint4*>(weight + g * s.weight_group_stride + s.weight_row_offset + j * s.in);
    for (int p = lane; p < pieces; p += 32) copy_16_async(mine + p, row + p);
  }
  commit_copies();
#endif
  begin_after_previous_grid();
  if (r >= s.rows) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  wait_copies<0>();
#endif
  const float* xg = x + g * s.x_group_stride;
  float acc[1] = {0.0f};
  float w[8];
  for (int p = lane; p < pieces; p += 32) {
    widen(mine[p], w);
    accumulate(w, xg, 0, std::int64_t{p} * 8, acc);
  }
  const float v = warp_sum(acc[0]);
  if (lane == 0) y[r] = v;
}

template <typename W, int T>
__global__ void __launch_bounds__(kGemvWarps * 32, T == 1 ? 3 : 2)
    swiglu_kernel(std::int64_t in, std::int64_t rows, const W* gate, const W* up, const float* x, float* h) {
  swiglu_rows<W, T>(blockIdx.x, in, rows, gate, up, x, h);
}

template <typename W>
void launch_swiglu(std::int64_t tokens, std::int64_t in, std::int64_t rows, const void* gate, const void* up,
                   const float* x, float* h, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((rows + kGemvWarps - 1) / kGemvWarps);
  const auto* g = static_cast<const W*>(gate);
  const auto* u = static_cast<const W*>(up);
  switch (tokens) {
#define SWITCHYARD_SWIGLU_CASE(T) \
  case T: launch_kernel(swiglu_kernel<W, T>, blocks, kGemvWarps * 32, 0, stream, in, rows, g, u, x, h); break;
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
void launch(const GemvRows& s, std::int64_t tokens, const void* weight, const float* x, float* y, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((s.rows + kGemvWarps - 1) / kGemvWarps);
  const auto* w = static_cast<const W*>(weight);
  if constexpr (sizeof(W) == 2) {
    const std::int64_t row_bytes = s.in * 2;
    if (tokens == 1 && row_bytes <= kSharedRowBytes) {
      // Four blocks an SM need 4 * 8 rows of shared memory: the largest carveout.
      prefer_shared_memory_carveout(reinterpret_cast<const void*>(gemv_shared_kernel));
      launch_kernel(gemv_shared_kernel, blocks, kGemvWarps * 32, static_cast<std::size_t>(row_bytes * kGemvWarps),
                    stream, s, w, x, y);
      return;
    }
  }
  switch (tokens) {
#define SWITCHYARD_GEMV_CASE(T) \
  case T: launch_kernel(gemv_kernel<W, T>, blocks, kGemvWarps * 32, 0, stream, s, w, x, y); break;
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

}  // namespace

bool gemv_supports(const GemvShape& shape, DType weight_dtype, const void* weight, const float* x) {
  if (quant_gemv_dtype(weight_dtype)) return quant_gemv_supports(shape, weight_dtype, weight, x);
  if (shape.tokens < 1 || shape.tokens > kGemvMaxTokens || shape.in <= 0 || shape.rows <= 0) return false;
  if (weight_dtype != DType::bf16 && weight_dtype != DType::f32) return false;
  const GemvRows s = gemv_rows_of(shape);
  const std::int64_t element = weight_dtype == DType::bf16 ? 2 : 4;
  auto multiple = [](std::int64_t v, std::int64_t m) { return v % m == 0; };
  return multiple(s.in, 8) && aligned_16(weight) && aligned_16(x) && multiple(s.weight_group_stride * element, 16) &&
         multiple(s.weight_row_offset * element, 16) && multiple(s.x_group_stride, 4) && multiple(s.x_token_stride, 4);
}

void gemv(const GemvShape& shape, const void* weight, DType weight_dtype, const float* x, float* y,
          cudaStream_t stream) {
  if (quant_gemv_dtype(weight_dtype)) return quant_gemv(shape, weight, weight_dtype, x, y, stream);
  if (!gemv_supports(shape, weight_dtype, weight, x))
    throw std::invalid_argument("cuda::gemv: unsupported shape, dtype or alignment");
  const GemvRows s = gemv_rows_of(shape);
  if (weight_dtype == DType::bf16) launch<__nv_bfloat16>(s, shape.tokens, weight, x, y, stream);
  else launch<float>(s, shape.tokens, weight, x, y, stream);
}

bool gemv_swiglu_supports(std::int64_t tokens, std::int64_t in, DType weight_dtype, const void* gate, const void* up,
                          const float* x) {
  if (quant_gemv_dtype(weight_dtype)) return quant_gemv_swiglu_supports(tokens, in, weight_dtype, gate, up, x);
  return tokens >= 1 && tokens <= kGemvMaxTokens && in > 0 && in % 8 == 0 &&
         (weight_dtype == DType::bf16 || weight_dtype == DType::f32) && aligned_16(gate) && aligned_16(up) &&
         aligned_16(x);
}

void gemv_swiglu(std::int64_t tokens, std::int64_t in, std::int64_t rows, const void* gate, const void* up,
                 DType weight_dtype, const float* x, float* h, cudaStream_t stream) {
  if (quant_gemv_dtype(weight_dtype)) return quant_gemv_swiglu(tokens, in, rows, gate, up, weight_dtype, x, h, stream);
  if (!gemv_swiglu_supports(tokens, in, weight_dtype, gate, up, x))
    throw std::invalid_argument("cuda::gemv_swiglu: unsupported shape, dtype or alignment");
  if (rows <= 0) return;
  if (weight_dtype == DType::bf16) launch_swiglu<__nv_bfloat16>(tokens, in, rows, gate, up, x, h, stream);
  else launch_swiglu<float>(tokens, in, rows, gate, up, x, h, stream);
}

}  // namespace switchyard::cuda
