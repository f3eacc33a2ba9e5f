#include "operators/cuda/argmax.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "operators/cuda/launch.cuh"

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

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* x, int n, std::int32_t* out, NextStep next) {
  begin_after_previous_grid();
  __shared__ Best warps[kThreads / kWarp];
  Best best{-INFINITY, n};
  for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) best = better(best, Best{x[i], i});
  best = warp_best(best);
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  if (lane == 0) warps[warp] = best;
  __syncthreads();
  if (warp != 0) return;
  best = lane < kThreads / kWarp ? warps[lane] : Best{-INFINITY, n};
  best = warp_best(best);
  // The CPU's scan starts from element 0 and only a larger value replaces it: a NaN there stays,
  // and so does 0 when every value is NaN.
  if (lane != 0) return;
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

}  // namespace

void argmax(const float* x, std::int64_t n, std::int32_t* out, cudaStream_t stream, const NextStep& next) {
  if (n < 1 || n > std::numeric_limits<int>::max() - 1 || x == nullptr || out == nullptr)
    throw std::invalid_argument("cuda::argmax: " + std::to_string(n) +
                                " values (1 to 2^31 - 2) and non-null pointers are needed");
  if (next.tokens != nullptr && next.step == nullptr)
    throw std::invalid_argument("cuda::argmax: token slots without a step record to advance");
  launch_kernel(argmax_kernel, 1, kThreads, 0, stream, x, static_cast<int>(n), out, next);
}

}  // namespace switchyard::cuda
