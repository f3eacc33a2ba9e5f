#include "operators/cuda/kernels/rms_norm.h"

#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/widen.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/host_flag.cuh"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

__device__ inline float weight_at(const float* weight, std::int64_t i) { return weight[i]; }
__device__ inline float weight_at(const unsigned short* weight, std::int64_t i) { return bf16_to_float(weight[i]); }

// One block per row; with `delta`, the row is first updated in place (x += delta). Thread i owns
// elements i, i + blockDim.x, ... and adds their squares in that order (the same partial sums as
// the CPU's reference order tests bound). Rows of up to kStaged elements per thread are loaded into
// registers at once, the weights with them, so the block waits for memory once, not per element.
//
// With `host` (one row, one block): the delta has a second part in mapped host memory, which the
// CPU writes before it sets *host_flag: x += host + delta. Thread 0 waits for the flag (and clears
// it); the block then reads the host's values into shared memory, 16 bytes a request where
// `host_quads` (aligned, dim a multiple of 4), all in one round. Both happen before the wait for
// the previous kernel: only the CPU writes the flag and the row (and only this launch clears the
// flag), so the two PCIe round trips overlap the kernels before (the shared experts' down
// projection) instead of following them. The CPU cannot overwrite the row before this launch
// ends: its next write needs the next layer's router, which runs after it.
//
// Loads before the wait, where the row fits the registers (kStaged a thread): the weights always
// (constant); with `host`, x too. The launch after a hybrid MoE block is the only one with a host
// addend, and the kernel before it (the shared experts' down projection, or the router) writes
// only its own output, never the residual x: x's last writer is an earlier norm, which completed
// before the kernel before this one passed its own wait, and so before this launch began (L2
// loads: no stale L1 line). Loaded after the wait, x and the weights queue behind the next GEMV's
// weight stream (4.6 us on an H200, by timestamps); loaded before it, the GPU side of a hybrid
// V2-Lite layer takes 54.0 us against 57.8 (docs/performance.md).
constexpr int kStaged = 8;

__device__ inline void stage_host_row(const float* host, std::int64_t dim, bool quads, float* shared) {
  if (quads) {
    for (std::int64_t i = threadIdx.x; i < dim / 4; i += blockDim.x)
      reinterpret_cast<float4*>(shared)[i] = __ldcv(reinterpret_cast<const float4*>(host) + i);
  } else {
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) shared[i] = __ldcv(host + i);
  }
  __syncthreads();
}

template <typename W>
__global__ void rms_norm_rows(float* x, const float* delta, std::int64_t dim, const W* weight, float eps, float* out,
                              const float* host, std::uint32_t* host_flag, bool host_quads) {
  extern __shared__ float4 host_staged[];
  float* in = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  const std::int64_t stride = blockDim.x;
  const bool staged = dim <= kStaged * stride;
  float v[kStaged], w[kStaged];
  // With a host addend the next launch (a GEMV, whose weights load before its own wait) may start
  // now: its wait still orders it after this launch.
  if (host != nullptr) allow_next_grid();
  if (staged) {
#pragma unroll
    for (int k = 0; k < kStaged; ++k) {
      const std::int64_t i = threadIdx.x + k * stride;
      w[k] = i < dim ? weight_at(weight, i) : 0.0f;
      if (host != nullptr) v[k] = i < dim ? __ldcg(in + i) : 0.0f;
    }
  }
  const float* host_row = nullptr;
  if (host != nullptr) {
    take_host_flag(host_flag);
    stage_host_row(host, dim, host_quads, reinterpret_cast<float*>(host_staged));
    host_row = reinterpret_cast<const float*>(host_staged);
  }
  begin_after_previous_grid();
  // The value added to element i: the host's part (first, as add_from_host sums) and the device's.
  auto addend = [&](std::int64_t i) {
    if (host_row == nullptr) return delta[blockIdx.x * dim + i];
    return delta != nullptr ? host_row[i] + delta[i] : host_row[i];
  };
  const bool adds = delta != nullptr || host_row != nullptr;
  if (staged) {
#pragma unroll
    for (int k = 0; k < kStaged; ++k) {
      const std::int64_t i = threadIdx.x + k * stride;
      if (host == nullptr) v[k] = i < dim ? in[i] : 0.0f;
      if (adds && i < dim) v[k] += addend(i);
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
      if (adds) in[i] = v[k];
      o[i] = w[k] * (v[k] * inverse_rms);
    }
    return;
  }
  float sum_squares = 0;
  if (adds) {
    for (std::int64_t i = threadIdx.x; i < dim; i += stride) {
      in[i] += addend(i);
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
                     DType weight_dtype, float eps, float* out, cudaStream_t stream, const HostAddend& host = {}) {
  if (weight_dtype != DType::f32 && weight_dtype != DType::bf16)
    throw std::invalid_argument(std::string("cuda::rms_norm: weights of dtype ") + dtype_name(weight_dtype) +
                                " are not supported (f32 and bf16 are)");
  if (host.values != nullptr && (host.flag == nullptr || rows != 1))
    throw std::invalid_argument("cuda::add_rms_norm: a host addend needs its flag and one row (got " +
                                std::to_string(rows) + ")");
  if (host.values != nullptr && dim > kMaxHostDim)
    throw std::invalid_argument("cuda::add_rms_norm: a host addend of " + std::to_string(dim) +
                                " values; at most " + std::to_string(kMaxHostDim));
  if (rows <= 0 || dim <= 0) return;
  if (rows > 0x7fffffff) throw std::invalid_argument("cuda::rms_norm: more than 2^31 - 1 rows");
  const int threads = dim >= 4096 ? 1024 : dim >= 1024 ? 512 : 128;
  const auto blocks = static_cast<unsigned>(rows);
  const bool quads = dim % 4 == 0 && aligned_16(host.values);
  const std::size_t shared = host.values != nullptr ? static_cast<std::size_t>(dim) * sizeof(float) : 0;
  if (weight_dtype == DType::f32)
    launch_kernel(rms_norm_rows<float>, blocks, threads, shared, stream, x, delta, dim,
                  static_cast<const float*>(weight), eps, out, host.values, host.flag, quads);
  else
    launch_kernel(rms_norm_rows<unsigned short>, blocks, threads, shared, stream, x, delta, dim,
                  static_cast<const unsigned short*>(weight), eps, out, host.values, host.flag, quads);
}

}  // namespace

void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight, DType weight_dtype, float eps,
              float* out, cudaStream_t stream) {
  // Not written without a delta.
  launch_rms_norm(const_cast<float*>(x), nullptr, rows, dim, weight, weight_dtype, eps, out, stream);
}

void add_rms_norm(float* x, const float* delta, std::int64_t rows, std::int64_t dim, const void* weight,
                  DType weight_dtype, float eps, float* out, cudaStream_t stream, const HostAddend& host) {
  launch_rms_norm(x, delta, rows, dim, weight, weight_dtype, eps, out, stream, host);
}

}  // namespace switchyard::cuda
