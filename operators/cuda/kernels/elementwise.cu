#include "operators/cuda/kernels/elementwise.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/host_flag.cuh"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t count) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((count + kThreads - 1) / kThreads, 1, 65536));
}

// Grid-stride loops: any count with a bounded grid.
#define SWITCHYARD_FOR_EACH(i, count) \
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < (count); \
       i += std::int64_t{gridDim.x} * blockDim.x)

__global__ void add_in_place_kernel(float* y, const float* x, std::int64_t count) {
  begin_after_previous_grid();
  SWITCHYARD_FOR_EACH(i, count) y[i] += x[i];
}

__global__ void add_bias_kernel(float* y, const float* bias, std::int64_t count, std::int64_t cols) {
  begin_after_previous_grid();
  SWITCHYARD_FOR_EACH(i, count) y[i] += bias[i % cols];
}

__global__ void copy_rows_kernel(const float* source, std::int64_t source_stride, std::int64_t width,
                                 std::int64_t count, float* destination, std::int64_t destination_stride) {
  begin_after_previous_grid();
  SWITCHYARD_FOR_EACH(i, count) {
    const std::int64_t r = i / width, c = i % width;
    destination[r * destination_stride + c] = source[r * source_stride + c];
  }
}

// kQuads: four values a step (x 16-byte and out 8-byte aligned), the last count % 4 one by one:
// 3.8 us against 6.6 one value a step for a 512 x 2048 prefill input on an H200 (docs/performance.md).
template <bool kQuads>
__global__ void round_to_bf16_kernel(const float* x, std::int64_t count, __nv_bfloat16* out) {
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

__global__ void assemble_mla_kernel(const float* kv, const float* rope_keys, std::int64_t heads, std::int64_t nope,
                                    std::int64_t rope, std::int64_t v_dim, std::int64_t count, float* keys,
                                    float* values) {
  begin_after_previous_grid();
  const std::int64_t kv_width = nope + v_dim, k_width = nope + rope;
  const std::int64_t row_width = k_width + v_dim;  // one (position, head): its key then its value
  SWITCHYARD_FOR_EACH(i, count) {
    const std::int64_t row = i / row_width, c = i % row_width;  // row = position * heads + head
    const std::int64_t position = row / heads;
    if (c < nope) keys[row * k_width + c] = kv[row * kv_width + c];
    else if (c < k_width) keys[row * k_width + c] = rope_keys[position * rope + (c - nope)];
    else values[row * v_dim + (c - k_width)] = kv[row * kv_width + nope + (c - k_width)];
  }
}

__global__ void write_to_host_kernel(const float* x, std::int64_t count_x, const std::int32_t* ids,
                                     const float* weights, std::int64_t count_k, float* host_x,
                                     std::int32_t* host_ids, float* host_weights) {
  begin_after_previous_grid();
  SWITCHYARD_FOR_EACH(i, count_x) host_x[i] = x[i];
  SWITCHYARD_FOR_EACH(i, count_k) {
    host_ids[i] = ids[i];
    host_weights[i] = weights[i];
  }
}

// `quads`: every pointer 16-byte aligned and count a multiple of 4, so the host is read 16 bytes
// a request (a quarter of the PCIe reads, each a round trip). `wait_first` (one block): thread 0
// spins until the host sets the flag, before any thread reads the host's values.
__global__ void add_from_host_kernel(const float* host, const float* add, std::int64_t count, float* out,
                                     std::uint32_t* clear_flag, bool quads, bool wait_first) {
  begin_after_previous_grid();
  if (wait_first) take_host_flag(clear_flag);
  else if (clear_flag != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<volatile std::uint32_t*>(clear_flag) = 0;
  if (!quads) {
    SWITCHYARD_FOR_EACH(i, count) out[i] = __ldcv(host + i) + (add != nullptr ? add[i] : 0.0f);
    return;
  }
  SWITCHYARD_FOR_EACH(i, count / 4) {
    float4 v = __ldcv(reinterpret_cast<const float4*>(host) + i);
    if (add != nullptr) {
      const float4 a = reinterpret_cast<const float4*>(add)[i];
      v.x += a.x, v.y += a.y, v.z += a.z, v.w += a.w;
    }
    reinterpret_cast<float4*>(out)[i] = v;
  }
}

#undef SWITCHYARD_FOR_EACH

}  // namespace

void add_in_place(float* y, const float* x, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  launch_kernel(add_in_place_kernel, blocks_for(count), kThreads, 0, stream, y, x, count);
}

void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  launch_kernel(add_bias_kernel, blocks_for(rows * cols), kThreads, 0, stream, y, bias, rows * cols, cols);
}

void copy_rows(const float* source, std::int64_t source_stride, std::int64_t rows, std::int64_t width,
               float* destination, std::int64_t destination_stride, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  launch_kernel(copy_rows_kernel, blocks_for(rows * width), kThreads, 0, stream, source, source_stride, width,
                rows * width, destination, destination_stride);
}

void round_to_bf16(const float* x, std::int64_t count, std::uint16_t* out, cudaStream_t stream) {
  if (count <= 0) return;
  const bool quads = aligned_16(x) && reinterpret_cast<std::uintptr_t>(out) % 8 == 0;
  launch_kernel(quads ? round_to_bf16_kernel<true> : round_to_bf16_kernel<false>,
                blocks_for(quads ? (count + 3) / 4 : count), kThreads, 0, stream, x, count,
                reinterpret_cast<__nv_bfloat16*>(out));
}

void write_to_host(const float* x, std::int64_t count_x, const std::int32_t* ids, const float* weights,
                   std::int64_t count_k, float* host_x, std::int32_t* host_ids, float* host_weights,
                   cudaStream_t stream) {
  if (count_x <= 0 && count_k <= 0) return;
  launch_kernel(write_to_host_kernel, blocks_for(std::max(count_x, count_k)), kThreads, 0, stream, x, count_x, ids,
                weights, count_k, host_x, host_ids, host_weights);
}

void add_from_host(const float* host, const float* add, std::int64_t count, float* out, cudaStream_t stream,
                   std::uint32_t* clear_flag, bool wait_first) {
  if (wait_first && clear_flag == nullptr)
    throw std::invalid_argument("cuda::add_from_host: waiting for a flag needs the flag");
  if (count <= 0 && clear_flag == nullptr) return;
  const bool quads = count % 4 == 0 && aligned_16(host) && aligned_16(add) && aligned_16(out);
  // Waiting takes one block (every block of a grid would have to see the flag before one clears it).
  const unsigned blocks = wait_first ? 1 : blocks_for(std::max<std::int64_t>(quads ? count / 4 : count, 1));
  launch_kernel(add_from_host_kernel, blocks, wait_first ? 1024 : kThreads, 0, stream, host, add, count, out,
                clear_flag, quads, wait_first);
}

void assemble_mla_keys_values(const float* kv, const float* rope_keys, std::int64_t context, std::int64_t heads,
                              std::int64_t nope, std::int64_t rope, std::int64_t v_dim, float* keys, float* values,
                              cudaStream_t stream) {
  const std::int64_t count = context * heads * (nope + rope + v_dim);
  if (count <= 0) return;
  launch_kernel(assemble_mla_kernel, blocks_for(count), kThreads, 0, stream, kv, rope_keys, heads, nope, rope, v_dim,
                count, keys, values);
}

}  // namespace switchyard::cuda
