#pragma once
// What the routed experts' decode kernels on floats (routed_experts.cu) and on ggml blocks
// (routed_experts_blocks.cu) share: the launch shape and kernel 2's skeleton, which spreads a
// block's (output row, slot) tasks over its warps and sums each row's slots in slot order.
#include <cstdint>

#include "operators/cuda/kernels/routed_experts.h"

namespace switchyard::cuda::decode_experts {

constexpr int kWarp = 32;
// 8 warps a block; kernel 2's tasks per block, rows_per_block * top_k = lcm(8, top_k), are at most
// 8 * kDecodeMaxSlots.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kMaxDownTasks = kWarps * static_cast<int>(kDecodeMaxSlots);

__device__ inline bool valid_expert(std::int32_t id, std::int64_t experts) { return id >= 0 && id < experts; }

// As silu_and_mul.cu: silu(g) * u = g / (1 + e^-g) * u.
__device__ inline float silu_times(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// Kernel 1's body, for grid (ceil(inter / 8), slots) of kThreads: warp w of block b takes
// intermediate row b * 8 + w of pair blockIdx.y and writes h[slot, row] = silu(g) * u, where
// gate_up(expert, row, token, lane) returns the warp's two dot products {g, u} to every lane
// (gate_e[row] . x[token], up_e[row] . x[token]). A pair with an invalid id writes nothing
// (kernel 2 skips it). ids: [slots]; h: [slots, inter].
struct GateUpDots {
  float gate, up;
};
template <class GateUp>
__device__ void gate_up_rows(GateUp gate_up, std::int64_t experts, std::int64_t inter, const std::int32_t* ids,
                             int top_k, float* h) {
  const int slot = blockIdx.y;
  const std::int32_t expert = ids[slot];
  if (!valid_expert(expert, experts)) return;
  const std::int64_t row = std::int64_t{blockIdx.x} * kWarps + threadIdx.x / kWarp;
  if (row >= inter) return;  // the whole warp leaves: the warp's sums need all 32 lanes
  const int lane = threadIdx.x % kWarp;
  const GateUpDots dots = gate_up(expert, row, std::int64_t{slot / top_k}, lane);
  if (lane == 0) h[std::int64_t{slot} * inter + row] = silu_times(dots.gate, dots.up);
}

// Kernel 2's body, for grid (ceil(hidden / rows_per_block), tokens) of kThreads: task
// r * top_k + k = (output row first_row + r, slot k of token t); a warp computes
// row_dot(expert, row, slot, lane) (returned to every lane; only for valid experts and rows),
// then thread r writes out[t, row] = sum over k, in slot order, of weights[slot] * dot.
// ids, weights: [tokens * top_k]; out: [tokens, hidden].
template <class RowDot>
__device__ void down_rows(RowDot row_dot, std::int64_t experts, std::int64_t hidden, const std::int32_t* ids,
                          const float* weights, int top_k, int rows_per_block, float* out) {
  __shared__ float dots[kMaxDownTasks];
  const std::int64_t token = blockIdx.y;
  const std::int64_t first_row = std::int64_t{blockIdx.x} * rows_per_block;
  const int tasks = rows_per_block * top_k;
  const int lane = threadIdx.x % kWarp;
  for (int task = threadIdx.x / kWarp; task < tasks; task += kWarps) {
    const std::int64_t row = first_row + task / top_k;
    const std::int64_t slot = token * top_k + task % top_k;
    const std::int32_t expert = ids[slot];
    float dot = 0.0f;
    if (row < hidden && valid_expert(expert, experts)) dot = row_dot(expert, row, slot, lane);  // warp-uniform
    if (lane == 0) dots[task] = dot;
  }
  __syncthreads();
  const int r = threadIdx.x;
  const std::int64_t row = first_row + r;
  if (r >= rows_per_block || row >= hidden) return;
  float sum = 0.0f;
  for (int k = 0; k < top_k; ++k) {
    const std::int64_t slot = token * top_k + k;
    if (valid_expert(ids[slot], experts)) sum = fmaf(weights[slot], dots[r * top_k + k], sum);
  }
  out[token * hidden + row] = sum;
}

}  // namespace switchyard::cuda::decode_experts
