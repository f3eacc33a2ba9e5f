#include "operators/cuda/kernels/silu_and_mul.h"

#include <algorithm>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline float silu_times(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// Element i of row t: gate at t * gate_row + i, up at t * gate_row + up_offset + i, out at
// t * width + i. Plain arrays are one row of `count`.
__global__ void silu_and_mul_rows(const float* gate, const float* up, std::int64_t rows, std::int64_t width,
                                  std::int64_t input_row, float* out) {
  begin_after_previous_grid();
  const std::int64_t total = rows * width;
  for (std::int64_t n = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; n < total;
       n += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t t = n / width, i = n % width;
    out[n] = silu_times(gate[t * input_row + i], up[t * input_row + i]);
  }
}

void launch(const float* gate, const float* up, std::int64_t rows, std::int64_t width, std::int64_t input_row,
            float* out, cudaStream_t stream) {
  const std::int64_t total = rows * width;
  if (total <= 0) return;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65536));
  launch_kernel(silu_and_mul_rows, blocks, kThreads, 0, stream, gate, up, rows, width, input_row, out);
}

}  // namespace

void silu_and_mul(const float* gate, const float* up, std::int64_t count, float* out, cudaStream_t stream) {
  launch(gate, up, 1, count, 0, out, stream);
}

void silu_and_mul_fused(const float* gate_up, std::int64_t tokens, std::int64_t width, float* out,
                        cudaStream_t stream) {
  launch(gate_up, gate_up + width, tokens, width, 2 * width, out, stream);
}

}  // namespace switchyard::cuda
