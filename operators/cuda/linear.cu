#include "operators/cuda/linear.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "operators/cuda/cuda_check.h"
#include "operators/cuda/gemv.h"
#include "operators/cuda/launch.cuh"

namespace switchyard::cuda {
namespace {

constexpr int kThreads = 256;

// Round to nearest even, as the CPU's f32_to_bf16 and torch's .to(bfloat16). kQuads: four values a
// step (x 16-byte and out 8-byte aligned), the last count % 4 one by one.
template <bool kQuads>
__global__ void round_to_bf16(const float* x, std::int64_t count, __nv_bfloat16* out) {
  begin_after_previous_grid();
  const std::int64_t first = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  std::int64_t done = 0;
  if constexpr (kQuads) {
    const std::int64_t quads = count / 4;
    for (std::int64_t i = first; i < quads; i += stride) {
      const float4 v = reinterpret_cast<const float4*>(x)[i];
      auto* pair = reinterpret_cast<__nv_bfloat162*>(out + 4 * i);
      pair[0] = __floats2bfloat162_rn(v.x, v.y);
      pair[1] = __floats2bfloat162_rn(v.z, v.w);
    }
    done = quads * 4;
  }
  for (std::int64_t i = done + first; i < count; i += stride) out[i] = __float2bfloat16_rn(x[i]);
}

void check_size(std::int64_t value, const char* name) {
  if (value > std::numeric_limits<int>::max())
    throw std::invalid_argument(std::string("cuda::linear: ") + name + " = " + std::to_string(value) +
                                " exceeds cuBLAS's 32-bit sizes");
}

}  // namespace

bool linear_supports(DType weight_dtype) { return weight_dtype == DType::f32 || weight_dtype == DType::bf16; }

void linear(DeviceContext& context, const float* x, std::int64_t tokens, std::int64_t in, const void* weight,
            DType weight_dtype, std::int64_t out, float* y) {
  if (!linear_supports(weight_dtype))
    throw std::invalid_argument(std::string("cuda::linear: weights of dtype ") + dtype_name(weight_dtype) +
                                " are not supported (f32 and bf16 are)");
  if (tokens <= 0 || out <= 0) return;
  if (in <= 0) {
    const auto bytes = static_cast<std::size_t>(tokens * out) * sizeof(float);
    SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, context.stream()));
    return;
  }
  GemvShape shape;
  shape.tokens = tokens;
  shape.in = in;
  shape.rows = out;
  if (gemv_supports(shape, weight_dtype, weight, x)) {  // decode: a bandwidth-bound matrix-vector product
    gemv(shape, weight, weight_dtype, x, y, context.stream());
    return;
  }
  check_size(tokens, "tokens");
  check_size(in, "in");
  check_size(out, "out");
  // Row-major y[tokens, out] is column-major Y[out, tokens] = W[in, out]^T X[in, tokens], where the
  // column-major W and X are the row-major weight and x read as they lie.
  const int m = static_cast<int>(out), n = static_cast<int>(tokens), k = static_cast<int>(in);
  const float alpha = 1.0f, beta = 0.0f;
  if (weight_dtype == DType::f32) {
    SWITCHYARD_CUBLAS_CHECK(cublasGemmEx(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, weight,
                                         CUDA_R_32F, k, x, CUDA_R_32F, k, &beta, y, CUDA_R_32F, m,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  const std::int64_t count = tokens * in;
  DeviceBuffer x_bf16 = context.allocate(static_cast<std::size_t>(count) * sizeof(__nv_bfloat16),
                                         "the bf16 copy of a linear layer's input");
  const bool quads = aligned_16(x) && aligned_16(x_bf16.data());
  const std::int64_t steps = quads ? (count + 3) / 4 : count;
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>((steps + kThreads - 1) / kThreads, 1, 65536));
  launch_kernel(quads ? round_to_bf16<true> : round_to_bf16<false>, blocks, kThreads, 0, context.stream(), x, count,
                x_bf16.as<__nv_bfloat16>());
  SWITCHYARD_CUBLAS_CHECK(cublasGemmEx(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, weight,
                                       CUDA_R_16BF, k, x_bf16.data(), CUDA_R_16BF, k, &beta, y, CUDA_R_32F, m,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  // x_bf16 returns to the pool here; the next user of the block runs on the same stream, after
  // this GEMM.
}

}  // namespace switchyard::cuda
