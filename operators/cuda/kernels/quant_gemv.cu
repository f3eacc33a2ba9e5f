#include "operators/cuda/kernels/quant_gemv.h"

#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/gemv_rows.cuh"
#include "operators/cuda/kernels/launch.cuh"
#include "operators/cuda/kernels/quant_rows.cuh"

namespace switchyard::cuda {
namespace {

// The byte address of weight `element` (a block boundary) of a row-major matrix of blocks.
template <DType D>
__device__ inline const std::uint8_t* at_element(const std::uint8_t* weight, std::int64_t element) {
  return weight + (element / QuantRow<D>::kElements) * QuantRow<D>::kBytes;
}

// Pieces of 8 weights a lane decodes before waiting for the previous kernel, for one token: the
// weights are constant, so their loads and decoding overlap the kernel that produces x.
template <int T>
constexpr int kStagedPieces = T == 1 ? 2 : 0;

// A warp per output row as gemv_kernel: lane l takes the row's pieces l, l + 32, ... (8 weights
// each), so a warp's loads cover neighbouring bytes of the same blocks.
template <DType D, int T>
__global__ void __launch_bounds__(kGemvWarps * 32, T == 1 ? 4 : 2)
    quant_gemv_kernel(GemvRows s, const std::uint8_t* weight, const float* x, float* y) {
  constexpr int kStaged = kStagedPieces<T>;
  const int lane = threadIdx.x % 32;
  const std::int64_t r = std::int64_t{blockIdx.x} * kGemvWarps + threadIdx.x / 32;
  if (r >= s.rows) return;
  const std::int64_t g = r / s.rows_per_group, j = r % s.rows_per_group;
  const std::uint8_t* row = at_element<D>(weight, g * s.weight_group_stride + s.weight_row_offset + j * s.in);
  const auto in = static_cast<int>(s.in);  // quant_gemv_supports: below 2^31
  float staged[kStaged > 0 ? kStaged : 1][8];
#pragma unroll
  for (int u = 0; u < kStaged; ++u) {
    const int k = lane * 8 + u * static_cast<int>(kChunkStride);
    if (k < in) load8_blocks<D>(row, k, staged[u]);
  }
  begin_after_previous_grid();
  const float* xg = x + g * s.x_group_stride;
  float acc[T];
#pragma unroll
  for (int t = 0; t < T; ++t) acc[t] = 0.0f;
#pragma unroll
  for (int u = 0; u < kStaged; ++u) {
    const int k = lane * 8 + u * static_cast<int>(kChunkStride);
    if (k >= in) break;
    accumulate(staged[u], xg, s.x_token_stride, k, acc);
  }
  float w[8];
#pragma unroll 2
  for (int k = lane * 8 + kStaged * static_cast<int>(kChunkStride); k < in; k += static_cast<int>(kChunkStride)) {
    load8_blocks<D>(row, k, w);
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

// swiglu_rows (gemv_rows.cuh) on rows of blocks: h[t, j] = silu(gate_j . x_t) * (up_j . x_t).
template <DType D, int T>
__global__ void __launch_bounds__(kGemvWarps * 32, T == 1 ? 3 : 2)
    quant_swiglu_kernel(int in, std::int64_t rows, const std::uint8_t* gate, const std::uint8_t* up,
                        const float* x, float* h) {
  constexpr int kStaged = kStagedPieces<T>;
  const int lane = threadIdx.x % 32;
  const std::int64_t r = std::int64_t{blockIdx.x} * kGemvWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const std::uint8_t* gate_row = at_element<D>(gate, r * std::int64_t{in});
  const std::uint8_t* up_row = at_element<D>(up, r * std::int64_t{in});
  float staged_gate[kStaged > 0 ? kStaged : 1][8], staged_up[kStaged > 0 ? kStaged : 1][8];
#pragma unroll
  for (int u = 0; u < kStaged; ++u) {
    const int k = lane * 8 + u * static_cast<int>(kChunkStride);
    if (k < in) {
      load8_blocks<D>(gate_row, k, staged_gate[u]);
      load8_blocks<D>(up_row, k, staged_up[u]);
    }
  }
  begin_after_previous_grid();
  float g_acc[T], u_acc[T];
#pragma unroll
  for (int t = 0; t < T; ++t) g_acc[t] = u_acc[t] = 0.0f;
#pragma unroll
  for (int u = 0; u < kStaged; ++u) {
    const int k = lane * 8 + u * static_cast<int>(kChunkStride);
    if (k >= in) break;
    accumulate(staged_gate[u], x, in, k, g_acc);
    accumulate(staged_up[u], x, in, k, u_acc);
  }
  float wg[8], wu[8];
  for (int k = lane * 8 + kStaged * static_cast<int>(kChunkStride); k < in; k += static_cast<int>(kChunkStride)) {
    load8_blocks<D>(gate_row, k, wg);
    load8_blocks<D>(up_row, k, wu);
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

// A thread per 8 weights: decoded, rounded to bf16, stored as 16 bytes.
template <DType D>
__global__ void dequantize_bf16_kernel(const std::uint8_t* blocks, std::int64_t rows, std::int64_t in,
                                       uint4* out) {
  begin_after_previous_grid();
  const std::int64_t pieces_per_row = in / 8;
  const std::int64_t row_bytes = in / QuantRow<D>::kElements * QuantRow<D>::kBytes;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < rows * pieces_per_row;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = i / pieces_per_row, k = (i % pieces_per_row) * 8;
    float w[8];
    load8_blocks<D>(blocks + row * row_bytes, static_cast<int>(k), w);
    uint4 packed;
    auto* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
    for (int p = 0; p < 4; ++p) pairs[p] = __floats2bfloat162_rn(w[2 * p], w[2 * p + 1]);
    out[i] = packed;
  }
}

bool aligned_to(const void* p, int alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

template <typename F>
void for_block_type(DType dtype, const char* what, F&& f) {
  if (!visit_block_type(dtype, f))
    throw std::invalid_argument(std::string(what) + ": " + dtype_name(dtype) + " is not a block type");
}

}  // namespace

bool quant_gemv_dtype(DType dtype) {
  bool known = false;
  visit_block_type(dtype, [&] <DType>() { known = true; });
  return known;
}

bool quant_gemv_supports(const GemvShape& shape, DType dtype, const void* weight, const float* x) {
  if (shape.tokens < 1 || shape.tokens > kGemvMaxTokens || shape.in <= 0 || shape.rows <= 0) return false;
  if (shape.in >= (std::int64_t{1} << 31) - kChunkStride) return false;  // 32-bit offsets within a row
  bool ok = false;
  visit_block_type(dtype, [&] <DType D>() {
    using Q = QuantRow<D>;
    const GemvRows s = gemv_rows_of(shape);
    ok = s.in % Q::kElements == 0 && s.weight_group_stride % Q::kElements == 0 &&
         s.weight_row_offset % Q::kElements == 0 && aligned_to(weight, Q::kAlign) && aligned_16(x) &&
         s.x_group_stride % 4 == 0 && s.x_token_stride % 4 == 0;
  });
  return ok;
}

void quant_gemv(const GemvShape& shape, const void* weight, DType dtype, const float* x, float* y,
                cudaStream_t stream) {
  if (!quant_gemv_supports(shape, dtype, weight, x))
    throw std::invalid_argument("cuda::gemv: unsupported shape or alignment for " + std::string(dtype_name(dtype)));
  const GemvRows s = gemv_rows_of(shape);
  const auto blocks = static_cast<unsigned>((s.rows + kGemvWarps - 1) / kGemvWarps);
  const auto* w = static_cast<const std::uint8_t*>(weight);
  for_block_type(dtype, "cuda::gemv", [&] <DType D>() {
    switch (shape.tokens) {
#define SWITCHYARD_QUANT_GEMV_CASE(T) \
  case T: launch_kernel(quant_gemv_kernel<D, T>, blocks, kGemvWarps * 32, 0, stream, s, w, x, y); break;
      SWITCHYARD_QUANT_GEMV_CASE(1)
      SWITCHYARD_QUANT_GEMV_CASE(2)
      SWITCHYARD_QUANT_GEMV_CASE(3)
      SWITCHYARD_QUANT_GEMV_CASE(4)
      SWITCHYARD_QUANT_GEMV_CASE(5)
      SWITCHYARD_QUANT_GEMV_CASE(6)
      SWITCHYARD_QUANT_GEMV_CASE(7)
      SWITCHYARD_QUANT_GEMV_CASE(8)
#undef SWITCHYARD_QUANT_GEMV_CASE
      default: throw std::invalid_argument("cuda::gemv: tokens " + std::to_string(shape.tokens));
    }
  });
}

bool quant_gemv_swiglu_supports(std::int64_t tokens, std::int64_t in, DType dtype, const void* gate, const void* up,
                                const float* x) {
  GemvShape shape;
  shape.tokens = tokens;
  shape.in = in;
  shape.rows = 1;
  return quant_gemv_supports(shape, dtype, gate, x) && quant_gemv_supports(shape, dtype, up, x);
}

void quant_gemv_swiglu(std::int64_t tokens, std::int64_t in, std::int64_t rows, const void* gate, const void* up,
                       DType dtype, const float* x, float* h, cudaStream_t stream) {
  if (!quant_gemv_swiglu_supports(tokens, in, dtype, gate, up, x))
    throw std::invalid_argument("cuda::gemv_swiglu: unsupported shape or alignment for " +
                                std::string(dtype_name(dtype)));
  if (rows <= 0) return;
  const auto blocks = static_cast<unsigned>((rows + kGemvWarps - 1) / kGemvWarps);
  const auto* g = static_cast<const std::uint8_t*>(gate);
  const auto* u = static_cast<const std::uint8_t*>(up);
  for_block_type(dtype, "cuda::gemv_swiglu", [&] <DType D>() {
    switch (tokens) {
#define SWITCHYARD_QUANT_SWIGLU_CASE(T) \
  case T: launch_kernel(quant_swiglu_kernel<D, T>, blocks, kGemvWarps * 32, 0, stream, static_cast<int>(in), rows, g, u, x, h); break;
      SWITCHYARD_QUANT_SWIGLU_CASE(1)
      SWITCHYARD_QUANT_SWIGLU_CASE(2)
      SWITCHYARD_QUANT_SWIGLU_CASE(3)
      SWITCHYARD_QUANT_SWIGLU_CASE(4)
      SWITCHYARD_QUANT_SWIGLU_CASE(5)
      SWITCHYARD_QUANT_SWIGLU_CASE(6)
      SWITCHYARD_QUANT_SWIGLU_CASE(7)
      SWITCHYARD_QUANT_SWIGLU_CASE(8)
#undef SWITCHYARD_QUANT_SWIGLU_CASE
      default: throw std::invalid_argument("cuda::gemv_swiglu: tokens " + std::to_string(tokens));
    }
  });
}

void dequantize_to_bf16(DType dtype, const void* blocks, std::int64_t rows, std::int64_t in, std::uint16_t* out,
                        cudaStream_t stream) {
  if (rows <= 0 || in <= 0) return;
  if (!aligned_16(out)) throw std::invalid_argument("cuda::dequantize_to_bf16: out is not 16-byte aligned");
  for_block_type(dtype, "cuda::dequantize_to_bf16", [&] <DType D>() {
    if (in % QuantRow<D>::kElements != 0 || !aligned_to(blocks, QuantRow<D>::kAlign))
      throw std::invalid_argument("cuda::dequantize_to_bf16: rows of " + std::to_string(in) + " " + dtype_name(dtype) +
                                  " weights are not whole aligned blocks");
    const std::int64_t pieces = rows * (in / 8);
    constexpr int kThreads = 256;
    const auto grid = static_cast<unsigned>(std::min<std::int64_t>((pieces + kThreads - 1) / kThreads, 65535));
    launch_kernel(dequantize_bf16_kernel<D>, grid, kThreads, 0, stream, static_cast<const std::uint8_t*>(blocks), rows,
                  in, reinterpret_cast<uint4*>(out));
  });
}

}  // namespace switchyard::cuda
