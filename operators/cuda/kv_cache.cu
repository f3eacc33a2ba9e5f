#include "operators/cuda/kv_cache.h"

#include <stdexcept>
#include <string>

#include "operators/cuda/cuda_check.h"

namespace switchyard::cuda {
namespace {

// One block per token row.
__global__ void copy_rows_at(float* cache, std::int64_t width, const float* source, std::int64_t source_stride,
                             const std::int32_t* position, std::int64_t max_context) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t row = std::int64_t{*position} + t;
  if (row < 0 || row >= max_context) return;
  float* destination = cache + row * width;
  const float* from = source + t * source_stride;
  for (std::int64_t i = threadIdx.x; i < width; i += blockDim.x) destination[i] = from[i];
}

}  // namespace

void write_cache_rows(float* cache, std::int64_t width, const float* source, std::int64_t source_stride,
                      std::int64_t tokens, const std::int32_t* position, std::int64_t max_context,
                      cudaStream_t stream) {
  if (width < 1 || tokens < 0 || source_stride < 0 || max_context < 0)
    throw std::invalid_argument("cuda::write_cache_rows: width " + std::to_string(width) + ", tokens " +
                                std::to_string(tokens) + ", source stride " + std::to_string(source_stride) +
                                ", max_context " + std::to_string(max_context) +
                                ": the width must be positive, the others non-negative");
  if (tokens > 0x7fffffff) throw std::invalid_argument("cuda::write_cache_rows: more than 2^31 - 1 tokens");
  if (position == nullptr)
    throw std::invalid_argument("cuda::write_cache_rows: no position (a device pointer to one int32)");
  if (tokens == 0 || max_context == 0) return;
  const int threads = width >= 1024 ? 512 : width >= 256 ? 256 : 128;
  copy_rows_at<<<static_cast<unsigned>(tokens), threads, 0, stream>>>(cache, width, source, source_stride, position,
                                                                       max_context);
  SWITCHYARD_CUDA_CHECK_LAUNCH();
}

}  // namespace switchyard::cuda
