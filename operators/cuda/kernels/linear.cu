#include "operators/cuda/kernels/linear.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/quant_formats.h"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/kernels/gemv.h"
#include "operators/cuda/kernels/quant_gemv.h"

namespace switchyard::cuda {
namespace {

void check_size(std::int64_t value, const char* name) {
  if (value > std::numeric_limits<int>::max())
    throw std::invalid_argument(std::string("cuda::linear: ") + name + " = " + std::to_string(value) +
                                " exceeds cuBLAS's 32-bit sizes");
}

}  // namespace

bool linear_supports(DType weight_dtype) {
  return weight_dtype == DType::f32 || weight_dtype == DType::bf16 || quant_gemv_dtype(weight_dtype);
}

void linear(DeviceContext& context, const float* x, std::int64_t tokens, std::int64_t in, const void* weight,
            DType weight_dtype, std::int64_t out, float* y) {
  if (!linear_supports(weight_dtype))
    throw std::invalid_argument(std::string("cuda::linear: weights of dtype ") + dtype_name(weight_dtype) +
                                " are not supported (f32, bf16 and ggml's block types are)");
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
  round_to_bf16(x, count, x_bf16.as<std::uint16_t>(), context.stream());  // as the CPU's f32_to_bf16
  if (weight_dtype != DType::bf16) {
    // Blocks: a chunk of rows at a time (quant::dequantize_chunk_rows, which the memory estimate
    // counts) is decoded to bf16, bit for bit the CPU's dequantize_rows_to_bf16, so the product is
    // the bf16 path's on those weights, and multiplied into its rows of Y. The scratch is reused
    // per chunk, in stream order.
    const std::int64_t chunk_rows = quant::dequantize_chunk_rows(out, in);
    DeviceBuffer rows_bf16 = context.allocate(static_cast<std::size_t>(chunk_rows * in) * sizeof(__nv_bfloat16),
                                              "dequantized weight rows of a linear layer");
    const std::size_t row_bytes = storage_bytes(weight_dtype, static_cast<std::uint64_t>(in));
    for (std::int64_t r0 = 0; r0 < out; r0 += chunk_rows) {
      const std::int64_t rows = std::min(chunk_rows, out - r0);
      dequantize_to_bf16(weight_dtype, static_cast<const std::uint8_t*>(weight) + static_cast<std::size_t>(r0) * row_bytes,
                         rows, in, rows_bf16.as<std::uint16_t>(), context.stream());
      SWITCHYARD_CUBLAS_CHECK(cublasGemmEx(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), n, k,
                                           &alpha, rows_bf16.data(), CUDA_R_16BF, k, x_bf16.data(), CUDA_R_16BF, k,
                                           &beta, y + r0, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    return;
  }
  SWITCHYARD_CUBLAS_CHECK(cublasGemmEx(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, weight,
                                       CUDA_R_16BF, k, x_bf16.data(), CUDA_R_16BF, k, &beta, y, CUDA_R_32F, m,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  // x_bf16 returns to the pool here; the next user of the block runs on the same stream, after
  // this GEMM.
}

}  // namespace switchyard::cuda
