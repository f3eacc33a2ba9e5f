#include "operators/cuda/rms_norm.h"

#include <stdexcept>
#include <string>

#include "operators/cuda/block_reduce.cuh"
#include "operators/cuda/cuda_check.h"
#include "operators/cuda/launch.cuh"

namespace switchyard::cuda {
namespace {

__device__ inline float weight_at(const float* weight, std::int64_t i) { return weight[i]; }
__device__ inline float weight_at(const unsigned short* weight, std::int64_t i) { return bf16_to_float(weight[i]); }

// One block per row; with `delta`, the row is first updated in place (x += delta). Thread i owns
// elements i, i + blockDim.x, ... and adds their squares in that order (the same partial sums as
// the CPU's reference order tests bound). Rows of up to kStaged elements per thread are loaded into
// registers at once, the weights with them, so the block waits for memory once, not per element.
constexpr int kStaged = 8;

template <typename W>
__global__ void rms_norm_rows(float* x, const float* delta, std::int64_t dim, const W* weight, float eps, float* out) {
  begin_after_previous_grid();
  float* in = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  const std::int64_t stride = blockDim.x;
  if (dim <= kStaged * stride) {
    float v[kStaged], w[kStaged];
#pragma unroll
    for (int k = 0; k < kStaged; ++k) {
      const std::int64_t i = threadIdx.x + k * stride;
      v[k] = i < dim ? in[i] : 0.0f;
      w[k] = i < dim ? weight_at(weight, i) : 0.0f;
      if (delta != nullptr && i < dim) v[k] += delta[blockIdx.x * dim + i];
    }
    float sum_squares = 0;
#pragma unroll
    for (int k = 0; k < kStaged; ++k)
      if (threadIdx.x + k * stride < dim) sum_squares += v[k] * v[k];
    sum_squares = block_sum(sum_squares);
    const float variance = sum_squares / static_cast<float>(dim);
    const auto inverse_rms = static_cast<float>(1.0 / sqrt(static_cast<double>(variance + eps)));
#pragma unroll
    for (int k = 0; k < kStaged; ++k) {
      const std::int64_t i = threadIdx.x + k * stride;
      if (i >= dim) continue;
      if (delta != nullptr) in[i] = v[k];
      o[i] = w[k] * (v[k] * inverse_rms);
    }
    return;
  }
  float sum_squares = 0;
  if (delta != nullptr) {
    const float* d = delta + blockIdx.x * dim;
    for (std::int64_t i = threadIdx.x; i < dim; i += stride) {
      in[i] += d[i];
      sum_squares += in[i] * in[i];
    }
  } else {
    for (std::int64_t i = threadIdx.x; i < dim; i += stride) sum_squares += in[i] * in[i];
  }
  sum_squares = block_sum(sum_squares);
  const float variance = sum_squares / static_cast<float>(dim);
  // As the CPU kernel: 1 / sqrt of the f32 variance + eps, rounded once.
  const auto inverse_rms = static_cast<float>(1.0 / sqrt(static_cast<double>(variance + eps)));
  for (std::int64_t i = threadIdx.x; i < dim; i += stride) o[i] = weight_at(weight, i) * (in[i] * inverse_rms);
}

void launch_rms_norm(float* x, const float* delta, std::int64_t rows, std::int64_t dim, const void* weight,
                     DType weight_dtype, float eps, float* out, cudaStream_t stream) {
  if (weight_dtype != DType::f32 && weight_dtype != DType::bf16)
    throw std::invalid_argument(std::string("cuda::rms_norm: weights of dtype ") + dtype_name(weight_dtype) +
                                " are not supported (f32 and bf16 are)");
  if (rows <= 0 || dim <= 0) return;
  if (rows > 0x7fffffff) throw std::invalid_argument("cuda::rms_norm: more than 2^31 - 1 rows");
  const int threads = dim >= 4096 ? 1024 : dim >= 1024 ? 512 : 128;
  const auto blocks = static_cast<unsigned>(rows);
  if (weight_dtype == DType::f32)
    launch_kernel(rms_norm_rows<float>, blocks, threads, 0, stream, x, delta, dim, static_cast<const float*>(weight),
                  eps, out);
  else
    launch_kernel(rms_norm_rows<unsigned short>, blocks, threads, 0, stream, x, delta, dim,
                  static_cast<const unsigned short*>(weight), eps, out);
}

}  // namespace

void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight, DType weight_dtype, float eps,
              float* out, cudaStream_t stream) {
  // Not written without a delta.
  launch_rms_norm(const_cast<float*>(x), nullptr, rows, dim, weight, weight_dtype, eps, out, stream);
}

void add_rms_norm(float* x, const float* delta, std::int64_t rows, std::int64_t dim, const void* weight,
                  DType weight_dtype, float eps, float* out, cudaStream_t stream) {
  launch_rms_norm(x, delta, rows, dim, weight, weight_dtype, eps, out, stream);
}

}  // namespace switchyard::cuda
