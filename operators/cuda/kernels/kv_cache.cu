#include "operators/cuda/kernels/kv_cache.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/cache_element.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/gemv_rows.cuh"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

// One block per token row.
template <typename C>
__global__ void copy_rows_at(C* cache, std::int64_t width, const float* source, std::int64_t source_stride,
                             const std::int32_t* position, std::int64_t max_context) {
  begin_after_previous_grid();
  const std::int64_t t = blockIdx.x;
  const std::int64_t row = std::int64_t{*position} + t;
  if (row < 0 || row >= max_context) return;
  C* destination = cache + row * width;
  const float* from = source + t * source_stride;
  for (std::int64_t i = threadIdx.x; i < width; i += blockDim.x) store_cache(destination + i, from[i]);
}

// grid-stride over rows * width elements.
template <typename C>
__global__ void widen_rows(const C* cache, std::int64_t elements, float* out) {
  begin_after_previous_grid();
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < elements;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = load_cache(cache + i);
}

__device__ inline float norm_weight_at(const float* weight, std::int64_t i) { return weight[i]; }
__device__ inline float norm_weight_at(const unsigned short* weight, std::int64_t i) {
  return bf16_to_float(weight[i]);
}

// A pair (a, b) of a rope vector rotated by (c, s): transformers' order, (x * cos) + (rotate_half(x)
// * sin), each product rounded, as rotate_heads does it; stored as an element of Out (f32, or a
// bf16 cache's, rounded).
template <typename Out>
__device__ inline void rotate_pair(const float* in, Out* out, std::int64_t j, std::int64_t half, float c, float s,
                                   RopeLayout layout) {
  const bool pairs_in = layout != RopeLayout::half_split;
  const bool pairs_out = layout == RopeLayout::interleaved;
  const float a = pairs_in ? in[2 * j] : in[j];
  const float b = pairs_in ? in[2 * j + 1] : in[j + half];
  store_cache(out + (pairs_out ? 2 * j : j), __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
  store_cache(out + (pairs_out ? 2 * j + 1 : j + half), __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
}

// The absorbed queries' share of a launch: `lanes` lanes per weight row (in / 8 rounded down to a
// power of two, at most 32), 32 / lanes rows per warp and pass, kAbsorbPasses passes whose first
// 16-byte chunks load before the wait for the previous kernel (the weights are constant).
constexpr int kAbsorbPasses = 4;

struct AbsorbLaunch {
  MlaAbsorb a;
  int lanes = 0;
  std::int64_t first_block = 0;  // blockIdx.y of the first absorbing block
};

template <typename W>
__device__ void absorb_queries(const AbsorbLaunch& launch) {
  const MlaAbsorb& a = launch.a;
  const int lanes = launch.lanes, lane = threadIdx.x % 32, sublane = lane % lanes;
  const int rows_per_pass = 32 / lanes;
  const std::int64_t warp = (blockIdx.y - launch.first_block) * (blockDim.x / 32) + threadIdx.x / 32;
  const std::int64_t total = a.heads * a.rows;
  const auto* weight = static_cast<const W*>(a.weight);
  std::int64_t row[kAbsorbPasses];
  float w[kAbsorbPasses][8];
#pragma unroll
  for (int p = 0; p < kAbsorbPasses; ++p) {
    row[p] = (warp * kAbsorbPasses + p) * rows_per_pass + lane / lanes;
    if (row[p] < total) load8(weight + row[p] * a.in, sublane * 8, w[p]);
  }
  begin_after_previous_grid();
#pragma unroll
  for (int p = 0; p < kAbsorbPasses; ++p) {
    float acc[1] = {0.0f};
    if (row[p] < total) {
      const float* q = a.q + row[p] / a.rows * a.head_stride;
      accumulate(w[p], q, 0, sublane * 8, acc);
      for (std::int64_t k = sublane * 8 + lanes * 8; k < a.in; k += lanes * 8) {
        float more[8];
        load8(weight + row[p] * a.in, k, more);
        accumulate(more, q, 0, k, acc);
      }
    }
    for (int offset = lanes / 2; offset > 0; offset /= 2) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], offset);
    if (sublane == 0 && row[p] < total) a.out[row[p]] = acc[0];
  }
}

// grid (tokens, 1 + query blocks + absorbing blocks). blockIdx.y == 0: the token's caches, the
// latent's RMSNorm (as rms_norm_rows), then the rope key's rotation (as rotate_heads for one head).
// Then a group of the token's query heads per block, rotated into queries.out; then the absorbed
// queries (one token).
template <typename W, typename C>
__global__ void write_mla_caches_kernel(const float* ckv, std::int64_t latent, std::int64_t rope, const W* weight,
                                        float eps, const float* cos_table, const float* sin_table,
                                        RopeLayout layout, const std::int32_t* position,
                                        std::int64_t max_context, C* latent_cache, C* rope_cache,
                                        MlaQueryRope queries, AbsorbLaunch absorb) {
  if (absorb.lanes > 0 && blockIdx.y >= absorb.first_block) {
    if (absorb.a.dtype == DType::bf16) absorb_queries<__nv_bfloat16>(absorb);
    else absorb_queries<float>(absorb);
    return;
  }
  const std::int64_t t = blockIdx.x;
  const std::int64_t half = rope / 2;
  // Before the wait: the row (no kernel of a step writes the position: kv_cache.h) and what depends
  // on it and on constants alone, the RoPE tables' entries and the norm's weights. After it only the
  // previous kernel's output is loaded, once, so the wait hides the independent loads.
  const std::int64_t row = std::int64_t{*position} + t;
  const bool row_inside = row >= 0 && row < max_context;
  const std::int64_t j0 = blockIdx.y > 0 ? threadIdx.x % (half > 0 ? half : 1) : threadIdx.x;
  float c0 = 0.0f, s0 = 0.0f;
  if (row_inside && j0 < half) c0 = cos_table[row * half + j0], s0 = sin_table[row * half + j0];
  constexpr int kHeld = 4;  // latent values a thread keeps in registers (latent 512 with 128 threads)
  float held_weight[kHeld] = {}, held_in[kHeld] = {};
  if (blockIdx.y == 0)
#pragma unroll
    for (int k = 0; k < kHeld; ++k) {
      const std::int64_t i = threadIdx.x + std::int64_t{k} * blockDim.x;
      if (i < latent) held_weight[k] = norm_weight_at(weight, i);
    }
  begin_after_previous_grid();
  if (blockIdx.y > 0) {
    if (!row_inside || half == 0) return;
    const std::int64_t heads_per_block = blockDim.x / half;  // as the host computed it
    const std::int64_t h = (blockIdx.y - 1) * heads_per_block + threadIdx.x / half;
    if (h >= queries.heads || threadIdx.x / half >= heads_per_block) return;
    rotate_pair(queries.q + t * queries.token_stride + h * queries.head_stride,
                queries.out + (t * queries.heads + h) * rope, j0, half, c0, s0, layout);
    return;
  }
  // Each thread's elements in order: the partial sums of rms_norm_rows.
  const float* in = ckv + t * (latent + rope);
  float sum_squares = 0;
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const std::int64_t i = threadIdx.x + std::int64_t{k} * blockDim.x;
    if (i < latent) held_in[k] = in[i], sum_squares += held_in[k] * held_in[k];
  }
  for (std::int64_t i = threadIdx.x + std::int64_t{kHeld} * blockDim.x; i < latent; i += blockDim.x)
    sum_squares += in[i] * in[i];
  sum_squares = block_sum(sum_squares);
  if (!row_inside) return;  // uniform across the block, after its barriers
  const float variance = sum_squares / static_cast<float>(latent);
  const auto inverse_rms = static_cast<float>(1.0 / sqrt(static_cast<double>(variance + eps)));
  C* latent_out = latent_cache + row * latent;
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const std::int64_t i = threadIdx.x + std::int64_t{k} * blockDim.x;
    if (i < latent) store_cache(latent_out + i, held_weight[k] * (held_in[k] * inverse_rms));
  }
  for (std::int64_t i = threadIdx.x + std::int64_t{kHeld} * blockDim.x; i < latent; i += blockDim.x)
    store_cache(latent_out + i, norm_weight_at(weight, i) * (in[i] * inverse_rms));
  for (std::int64_t j = threadIdx.x; j < half; j += blockDim.x)
    rotate_pair(in + latent, rope_cache + row * rope, j, half, j == j0 ? c0 : cos_table[row * half + j],
                j == j0 ? s0 : sin_table[row * half + j], layout);
}

}  // namespace

bool mla_absorb_supported(const MlaAbsorb& absorb, std::int64_t tokens) {
  return tokens == 1 && absorb.weight != nullptr && absorb.q != nullptr && absorb.out != nullptr &&
         absorb.heads >= 1 && absorb.rows >= 1 && absorb.in >= 8 && absorb.in % 8 == 0 &&
         absorb.head_stride % 4 == 0 && aligned_16(absorb.weight) && aligned_16(absorb.q) &&
         (absorb.dtype == DType::bf16 || absorb.dtype == DType::f32);
}

void write_mla_caches(const float* ckv, std::int64_t tokens, std::int64_t latent, std::int64_t rope,
                      const void* norm_weight, DType norm_dtype, float eps, const float* cos_table,
                      const float* sin_table, RopeLayout layout, const std::int32_t* position,
                      std::int64_t max_context, void* latent_cache, void* rope_cache, DType cache_dtype,
                      cudaStream_t stream, const MlaQueryRope& queries, const MlaAbsorb& absorb) {
  if (norm_dtype != DType::f32 && norm_dtype != DType::bf16)
    throw std::invalid_argument("cuda::write_mla_caches: norm weights must be f32 or bf16");
  cache_element_bytes(cache_dtype, "cuda::write_mla_caches");
  if (latent < 1 || rope < 0 || rope % 2 != 0 || rope > 1024 || tokens < 0 || tokens > 0x7fffffff ||
      position == nullptr)
    throw std::invalid_argument("cuda::write_mla_caches: latent " + std::to_string(latent) + ", rope " +
                                std::to_string(rope) + ", tokens " + std::to_string(tokens) +
                                ": latent >= 1, rope even in [0, 1024], a position pointer");
  if (queries.q != nullptr && (queries.heads < 1 || queries.out == nullptr || queries.token_stride < 0 ||
                               queries.head_stride < 0))
    throw std::invalid_argument("cuda::write_mla_caches: query heads " + std::to_string(queries.heads) +
                                " must be at least 1, with an output and non-negative strides");
  if (tokens == 0 || max_context == 0) return;
  // The block size cuda::rms_norm picks for this width: the same partial sums, the same result.
  const int threads = latent >= 4096 ? 1024 : latent >= 1024 ? 512 : 128;
  std::int64_t query_blocks = 0;
  if (queries.q != nullptr && rope > 0) {
    const std::int64_t heads_per_block = std::max<std::int64_t>(1, threads / (rope / 2));
    if (rope / 2 > threads) throw std::invalid_argument("cuda::write_mla_caches: query rope wider than a block");
    query_blocks = (queries.heads + heads_per_block - 1) / heads_per_block;
  }
  AbsorbLaunch absorbing{absorb, 0, 1 + query_blocks};
  std::int64_t absorb_blocks = 0;
  if (absorb.weight != nullptr) {
    if (!mla_absorb_supported(absorb, tokens))
      throw std::invalid_argument("cuda::write_mla_caches: absorbing queries takes one token, f32 or bf16 weights, "
                                  "in a multiple of 8 and 16-byte aligned rows (tokens " + std::to_string(tokens) +
                                  ", in " + std::to_string(absorb.in) + ")");
    int lanes = 32;
    while (lanes > 1 && lanes * 8 > absorb.in) lanes /= 2;
    absorbing.lanes = lanes;
    const std::int64_t rows_per_block = threads / 32 * (32 / lanes) * kAbsorbPasses;
    absorb_blocks = (absorb.heads * absorb.rows + rows_per_block - 1) / rows_per_block;
  }
  if (1 + query_blocks + absorb_blocks >= 65535)
    throw std::invalid_argument("cuda::write_mla_caches: too many query heads");
  const dim3 blocks(static_cast<unsigned>(tokens), static_cast<unsigned>(1 + query_blocks + absorb_blocks));
  const auto launch = [&](auto weight, auto cache) {
    using C = std::remove_const_t<std::remove_pointer_t<decltype(cache)>>;
    launch_kernel(write_mla_caches_kernel<std::remove_const_t<std::remove_pointer_t<decltype(weight)>>, C>, blocks,
                  threads, 0, stream, ckv, latent, rope, weight, eps, cos_table, sin_table, layout, position,
                  max_context, static_cast<C*>(latent_cache), static_cast<C*>(rope_cache), queries, absorbing);
  };
  const auto with_weight = [&](auto weight) {
    if (cache_dtype == DType::f32) launch(weight, static_cast<float*>(nullptr));
    else launch(weight, static_cast<std::uint16_t*>(nullptr));
  };
  if (norm_dtype == DType::f32) with_weight(static_cast<const float*>(norm_weight));
  else with_weight(static_cast<const unsigned short*>(norm_weight));
}

void write_cache_rows(void* cache, DType cache_dtype, std::int64_t width, const float* source,
                      std::int64_t source_stride, std::int64_t tokens, const std::int32_t* position,
                      std::int64_t max_context, cudaStream_t stream) {
  cache_element_bytes(cache_dtype, "cuda::write_cache_rows");
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
  if (cache_dtype == DType::f32)
    launch_kernel(copy_rows_at<float>, static_cast<unsigned>(tokens), threads, 0, stream, static_cast<float*>(cache),
                  width, source, source_stride, position, max_context);
  else
    launch_kernel(copy_rows_at<std::uint16_t>, static_cast<unsigned>(tokens), threads, 0, stream,
                  static_cast<std::uint16_t*>(cache), width, source, source_stride, position, max_context);
}

void widen_cache_rows(const void* cache, DType cache_dtype, std::int64_t rows, std::int64_t width, float* out,
                      cudaStream_t stream) {
  cache_element_bytes(cache_dtype, "cuda::widen_cache_rows");
  if (rows < 0 || width < 0)
    throw std::invalid_argument("cuda::widen_cache_rows: rows " + std::to_string(rows) + " and width " +
                                std::to_string(width) + " must not be negative");
  const std::int64_t elements = rows * width;
  if (elements == 0) return;
  if (cache == nullptr || out == nullptr) throw std::invalid_argument("cuda::widen_cache_rows: a null pointer");
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((elements + kThreads - 1) / kThreads, 4096));
  if (cache_dtype == DType::f32)
    launch_kernel(widen_rows<float>, blocks, kThreads, 0, stream, static_cast<const float*>(cache), elements, out);
  else
    launch_kernel(widen_rows<std::uint16_t>, blocks, kThreads, 0, stream, static_cast<const std::uint16_t*>(cache),
                  elements, out);
}

}  // namespace switchyard::cuda
