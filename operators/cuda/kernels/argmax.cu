#include "operators/cuda/kernels/argmax.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarp = 32;

// (value, index) pairs: b replaces a when larger, or equal with a lower index. NaN is never larger
// nor equal, so it never replaces; the index `n` marks "none yet".
struct Best {
  float value;
  int index;
};
__device__ inline Best better(Best a, Best b) {
  return b.value > a.value || (b.value == a.value && b.index < a.index) ? b : a;
}

__device__ inline Best warp_best(Best best) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    best = better(best, Best{__shfl_xor_sync(0xffffffffu, best.value, offset),
                             __shfl_xor_sync(0xffffffffu, best.index, offset)});
  return best;
}

// The choice from the best (value, index) of all of x, by one thread: the CPU's scan starts from
// element 0 and only a larger value replaces it, so a NaN there stays, and so does 0 when every value
// is NaN. Then the hand-over to the next step (NextStep).
__device__ void choose(const float* x, int n, Best best, std::int32_t* out, const NextStep& next) {
  const std::int32_t id = isnan(x[0]) || best.index >= n ? 0 : best.index;
  *out = id;
  if (next.step == nullptr) return;
  // Every earlier kernel of the step has ended (each waits for the one before it), so none reads
  // the record any more; the next step's kernels start after this one ends.
  const std::int32_t position = next.step[0] + 1;
  next.step[0] = position;
  next.step[1] = id;
  if (next.tokens == nullptr) return;
  const std::uint64_t value = token_slot_value(position, id);
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(next.tokens + (position & 1)), "l"(value) : "memory");
}

// The block's best, in warp 0 (lane 0 holds it); the other warps' values are undefined.
template <int kBlockThreads>
__device__ Best block_best(Best best) {
  __shared__ Best warps[kBlockThreads / kWarp];
  best = warp_best(best);
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  if (lane == 0) warps[warp] = best;
  __syncthreads();
  best = lane < kBlockThreads / kWarp ? warps[lane] : Best{-INFINITY, INT_MAX};
  return warp_best(best);
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* x, int n, std::int32_t* out, NextStep next) {
  begin_after_previous_grid();
  Best best{-INFINITY, n};
  for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) best = better(best, Best{x[i], i});
  best = block_best<kThreads>(best);
  if (threadIdx.x == 0) choose(x, n, best, out, next);
}

// Many blocks: each thread keeps four loads in flight, each block leaves its best among
// `candidates`, and the last block to count in chooses from them and leaves the counter at zero.
constexpr int kManyThreads = 256;
__global__ void __launch_bounds__(kManyThreads)
    argmax_blocks_kernel(const float* x, int n, std::int32_t* out, NextStep next, float2* candidates,
                         std::int32_t* counter) {
  begin_after_previous_grid();
  Best best{-INFINITY, n};
  const std::int64_t stride = std::int64_t{gridDim.x} * kManyThreads;
  std::int64_t i = std::int64_t{blockIdx.x} * kManyThreads + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const float a = x[i], b = x[i + stride], c = x[i + 2 * stride], d = x[i + 3 * stride];
    best = better(best, Best{a, static_cast<int>(i)});
    best = better(best, Best{b, static_cast<int>(i + stride)});
    best = better(best, Best{c, static_cast<int>(i + 2 * stride)});
    best = better(best, Best{d, static_cast<int>(i + 3 * stride)});
  }
  for (; i < n; i += stride) best = better(best, Best{x[i], static_cast<int>(i)});
  best = block_best<kManyThreads>(best);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    candidates[blockIdx.x] = make_float2(best.value, __int_as_float(best.index));
    __threadfence();
    last = atomicAdd(counter, 1) == static_cast<int>(gridDim.x) - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x >= kWarp) return;
  best = Best{-INFINITY, n};
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kWarp) {
    const float2 candidate = __ldcg(candidates + b);
    best = better(best, Best{candidate.x, __float_as_int(candidate.y)});
  }
  best = warp_best(best);
  if (threadIdx.x != 0) return;
  *counter = 0;  // for the next launch
  choose(x, n, best, out, next);
}

}  // namespace

void argmax(const float* x, std::int64_t n, std::int32_t* out, cudaStream_t stream, const NextStep& next,
            const ArgmaxScratch* scratch) {
  if (n < 1 || n > std::numeric_limits<int>::max() - 1 || x == nullptr || out == nullptr)
    throw std::invalid_argument("cuda::argmax: " + std::to_string(n) +
                                " values (1 to 2^31 - 2) and non-null pointers are needed");
  if (next.tokens != nullptr && next.step == nullptr)
    throw std::invalid_argument("cuda::argmax: token slots without a step record to advance");
  if (scratch == nullptr) {
    launch_kernel(argmax_kernel, 1, kThreads, 0, stream, x, static_cast<int>(n), out, next);
    return;
  }
  if (scratch->candidates == nullptr || scratch->counter == nullptr)
    throw std::invalid_argument("cuda::argmax: scratch without its candidates or counter");
  // About four loads a thread, at most kArgmaxBlocks blocks.
  const std::int64_t blocks = std::clamp<std::int64_t>((n + 4 * kManyThreads - 1) / (4 * kManyThreads), 1, kArgmaxBlocks);
  launch_kernel(argmax_blocks_kernel, static_cast<unsigned>(blocks), kManyThreads, 0, stream, x, static_cast<int>(n),
                out, next, static_cast<float2*>(scratch->candidates), scratch->counter);
}

}  // namespace switchyard::cuda
