#pragma once
// Writing new tokens' keys and values into a KV cache on the GPU, at a position read from device
// memory, so that a captured CUDA graph replays at any position. Exact copies.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace switchyard::cuda {

// Device pointers. Copies `tokens` rows of `width` floats, source row t at source + t * source_stride,
// to rows [*position, *position + tokens) of cache: [max_context, width]. `position` is a device
// pointer to one int32, the position of the first token; the launch depends only on the host
// arguments. Rows outside [0, max_context) are not written: the host checks the bound, the kernel
// only never writes out of bounds. Throws std::invalid_argument for a width < 1, negative tokens or
// strides, or no position. Queued on `stream`.
void write_cache_rows(float* cache, std::int64_t width, const float* source, std::int64_t source_stride,
                      std::int64_t tokens, const std::int32_t* position, std::int64_t max_context,
                      cudaStream_t stream);

}  // namespace switchyard::cuda
