#include "operators/cuda/kernels/prefill_attention.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kSoftmaxThreads = 256;
constexpr int kRowsPerBlock = kSoftmaxThreads / kWarp;

// One warp per score row (head h, chunk query r; rows_per_head of them a head): p = softmax over
// the row's first `visible` scores, visible = first_visible + r; the rest of the row becomes 0.
// scores: [rows, width].
__global__ void __launch_bounds__(kSoftmaxThreads)
    causal_softmax_rows(float* scores, std::int64_t rows, std::int64_t rows_per_head, std::int64_t width,
                        std::int64_t first_visible) {
  begin_after_previous_grid();
  const std::int64_t row = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  float* s = scores + row * width;
  const std::int64_t visible = min(first_visible + row % rows_per_head, width);
  float top = -INFINITY;
  for (std::int64_t c = lane; c < visible; c += kWarp) top = fmaxf(top, s[c]);
  top = warp_max(top);
  float sum = 0.0f;
  for (std::int64_t c = lane; c < visible; c += kWarp) {
    const float e = expf(s[c] - top);
    s[c] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  const float inverse = 1.0f / sum;
  for (std::int64_t c = lane; c < width; c += kWarp) s[c] = c < visible ? s[c] * inverse : 0.0f;
}

[[noreturn]] void refuse(const std::string& message) {
  throw std::invalid_argument("cuda::prefill_attention: " + message);
}

// Queries per chunk: as many as keep heads * chunk * context floats within kPrefillScoreBytes.
std::int64_t chunk_of(std::int64_t tokens, std::int64_t heads, std::int64_t context) {
  const auto per_query = static_cast<std::size_t>(heads * context) * sizeof(float);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(kPrefillScoreBytes / per_query), 1, tokens);
}

int as_int(std::int64_t value) { return static_cast<int>(value); }

}  // namespace

std::size_t prefill_attention_workspace_bytes(std::int64_t tokens, std::int64_t heads, std::int64_t position) {
  if (tokens < 1 || heads < 1 || position < 0)
    refuse("tokens and heads must be at least 1 and position not negative, got " + std::to_string(tokens) + ", " +
           std::to_string(heads) + " and " + std::to_string(position));
  const std::int64_t context = position + tokens;
  return static_cast<std::size_t>(heads * chunk_of(tokens, heads, context) * context) * sizeof(float);
}

void prefill_attention(DeviceContext& context, const float* q, std::int64_t tokens, std::int64_t heads,
                       std::int64_t qk_dim, std::int64_t v_dim, const float* k_cache, const float* v_cache,
                       std::int64_t kv_heads, std::int64_t position, float scale, float* out, void* workspace,
                       std::size_t workspace_bytes) {
  const std::size_t required = prefill_attention_workspace_bytes(tokens, heads, position);
  if (qk_dim < 1 || v_dim < 1 || kv_heads < 1 || heads % kv_heads != 0)
    refuse("qk_dim, v_dim and kv_heads must be at least 1 and heads (" + std::to_string(heads) +
           ") a multiple of kv_heads (" + std::to_string(kv_heads) + ")");
  const std::int64_t keys = position + tokens;
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  if (keys > kIntMax || heads * qk_dim > kIntMax || heads * v_dim > kIntMax)
    refuse("the context (" + std::to_string(keys) + ") and heads * widths must fit cuBLAS's 32-bit sizes");
  if (q == nullptr || k_cache == nullptr || v_cache == nullptr || out == nullptr || workspace == nullptr)
    refuse("q, the caches, out and the workspace must not be null");
  if (workspace_bytes < required)
    refuse("the workspace of " + std::to_string(workspace_bytes) + " bytes is smaller than the " +
           std::to_string(required) + " this call needs; size it with prefill_attention_workspace_bytes");

  const cudaStream_t stream = context.stream();
  const cublasHandle_t cublas = context.cublas();
  const std::int64_t group = heads / kv_heads, chunk = chunk_of(tokens, heads, keys);
  auto* scores = static_cast<float*>(workspace);
  const float one = 1.0f, zero = 0.0f;
  for (std::int64_t first = 0; first < tokens; first += chunk) {
    const std::int64_t rows = std::min(chunk, tokens - first);
    const std::int64_t width = position + first + rows;  // the keys the chunk's last query sees
    const long long head_scores = rows * width;
    // Scores, column-major per head: S_h^T [width x rows] = K_kv [width x qk] Q_h^T, for the heads
    // i, i + group, ... of each kv head in one batch (constant strides).
    for (std::int64_t i = 0; i < group; ++i)
      SWITCHYARD_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          cublas, CUBLAS_OP_T, CUBLAS_OP_N, as_int(width), as_int(rows), as_int(qk_dim), &scale, k_cache,
          CUDA_R_32F, as_int(kv_heads * qk_dim), qk_dim, q + (first * heads + i) * qk_dim, CUDA_R_32F,
          as_int(heads * qk_dim), group * qk_dim, &zero, scores + i * head_scores, CUDA_R_32F, as_int(width),
          group * head_scores, as_int(kv_heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    const std::int64_t score_rows = heads * rows;
    launch_kernel(causal_softmax_rows, static_cast<unsigned>((score_rows + kRowsPerBlock - 1) / kRowsPerBlock),
                  kSoftmaxThreads, 0, stream, scores, score_rows, rows, width, position + first + 1);
    // out_h^T [v x rows] = V_kv^T [v x width] P_h^T [width x rows].
    for (std::int64_t i = 0; i < group; ++i)
      SWITCHYARD_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          cublas, CUBLAS_OP_N, CUBLAS_OP_N, as_int(v_dim), as_int(rows), as_int(width), &one, v_cache, CUDA_R_32F,
          as_int(kv_heads * v_dim), v_dim, scores + i * head_scores, CUDA_R_32F, as_int(width), group * head_scores,
          &zero, out + (first * heads + i) * v_dim, CUDA_R_32F, as_int(heads * v_dim), group * v_dim,
          as_int(kv_heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace switchyard::cuda
