#include "operators/cuda/kernels/moe_gate.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/gemv.h"
#include "operators/cuda/kernels/gemv_rows.cuh"
#include "operators/ops/select_top_k.h"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {


__device__ inline float negative_infinity() { return __int_as_float(0xff800000); }

__device__ float group_score(const MoeGateConfig& c, const float* choice, int size) {
  if (c.group_score == GroupScore::max) {
    float best = choice[0];
    for (int i = 1; i < size; ++i) best = fmaxf(best, choice[i]);
    return best;
  }
  std::int32_t top2[2];
  select_top_k(choice, size, 2, top2);
  return choice[top2[0]] + choice[top2[1]];
}

// Steps 1-6 of the CPU kernel for one token's logits [n]: thread e for expert e (blockDim.x, a
// multiple of 32, at least n). Writes the token's ids and weights ([k] each) and leaves them in
// `chosen_ids` / `chosen_weights` (shared memory) for a hand-off.
__device__ void route(const MoeGateConfig& c, const float* logits, std::int32_t* expert_ids, float* weights,
                      std::int32_t* chosen_ids, float* chosen_weights) {
  __shared__ float scores[kMaxGateExperts], choice[kMaxGateExperts], group_scores[kMaxGateExperts];
  __shared__ bool kept[kMaxGateExperts];
  const int n = c.n_experts, k = c.top_k, e = threadIdx.x;
  const bool expert = e < n;
  const float logit = expert ? __ldcg(logits + e) : negative_infinity();

  // 1-2. Scores as the CPU's softmax (f32 exponentials, their sum in double) or sigmoid; choices.
  float score;
  if (c.scoring == GateScoring::softmax) {
    const float max = block_max(logit);
    const float exponential = expert ? expf(logit - max) : 0.0f;
    const double sum = block_sum(static_cast<double>(exponential));
    score = exponential * static_cast<float>(1.0 / sum);
  } else {
    score = 1.0f / (1.0f + expf(-logit));
  }
  if (expert) {
    scores[e] = score;
    choice[e] = c.score_correction_bias ? score + c.score_correction_bias[e] : score;
  }
  __syncthreads();

  // 3. Group-limited routing: thread g scores group g; thread 0 keeps the best topk_group.
  if (c.group_score != GroupScore::none) {
    const int size = n / c.n_group;
    if (e < c.n_group) {
      group_scores[e] = group_score(c, choice + e * size, size);
      kept[e] = false;
    }
    __syncthreads();
    if (e == 0) {
      std::int32_t best[kMaxGateExperts];
      select_top_k(group_scores, c.n_group, c.topk_group, best);
      for (int i = 0; i < c.topk_group; ++i) kept[best[i]] = true;
    }
    __syncthreads();
    if (expert && !kept[e / size]) choice[e] = c.masked_choice;
    __syncthreads();
  }

  // 4-5. Expert e's place in the order (descending choice, lower index first among equals).
  if (expert) {
    const float mine = choice[e];
    int rank = 0;
    for (int i = 0; i < n; ++i) rank += choice[i] > mine || (choice[i] == mine && i < e);
    if (rank < k) {
      expert_ids[rank] = e;
      chosen_ids[rank] = e;
      chosen_weights[rank] = c.weights_from_scores ? scores[e] : mine;
    }
  }
  __syncthreads();

  // 6. Normalise and scale in the CPU's order.
  if (e == 0) {
    float denominator = 1.0f;
    if (c.normalize) {
      float sum = 0;
      for (int i = 0; i < k; ++i) sum += chosen_weights[i];
      denominator = sum + c.normalize_epsilon;
    }
    const bool scale = !c.normalize || c.scale_when_normalized;
    for (int i = 0; i < k; ++i) {
      float value = chosen_weights[i];
      if (c.normalize) value /= denominator;
      if (scale) value *= c.routed_scaling_factor;
      weights[i] = value;
      chosen_weights[i] = value;
    }
  }
  __syncthreads();
}

// x[begin, end) to the hand-off's host copy, the block's threads striding over it, four loads in
// flight per thread.
__device__ void copy_to_host(const GateHandOff& hand_off, std::int64_t begin, std::int64_t end) {
  const float* __restrict__ x = hand_off.x;
  float* __restrict__ x_host = hand_off.x_host;
  const std::int64_t stride = blockDim.x;
  std::int64_t i = begin + threadIdx.x;
  for (; i + 3 * stride < end; i += 4 * stride) {
    const float a = x[i], b = x[i + stride], d = x[i + 2 * stride], f = x[i + 3 * stride];
    x_host[i] = a, x_host[i + stride] = b, x_host[i + 2 * stride] = d, x_host[i + 3 * stride] = f;
  }
  for (; i < end; i += stride) x_host[i] = x[i];
}

// The rest of the hand-off once x is on the host: ids and weights, a system-wide fence by every
// writer, then the ready flag.
__device__ void publish(const GateHandOff& hand_off, int k, const std::int32_t* chosen_ids,
                        const float* chosen_weights) {
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    hand_off.ids_host[i] = chosen_ids[i];
    hand_off.weights_host[i] = chosen_weights[i];
  }
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) *reinterpret_cast<volatile std::uint32_t*>(hand_off.ready) = 1;
}

// One block per token (see route).
__global__ void route_tokens(MoeGateConfig c, const float* logits, std::int32_t* expert_ids, float* weights,
                             GateHandOff hand_off) {
  begin_after_previous_grid();
  __shared__ std::int32_t chosen_ids[kMaxGateExperts];
  __shared__ float chosen_weights[kMaxGateExperts];
  const std::int64_t token = blockIdx.x;
  route(c, logits + token * c.n_experts, expert_ids + token * c.top_k, weights + token * c.top_k, chosen_ids,
        chosen_weights);
  if (hand_off.ready == nullptr) return;
  copy_to_host(hand_off, 0, hand_off.hidden);
  publish(hand_off, c.top_k, chosen_ids, chosen_weights);
}

// Rows of the router a thread loads before waiting for x (the weights are constant).
constexpr int kStagedRouterLoads = 4;

// Blocks of a side SwiGLU: kGemvWarps * 32 threads, as many blocks an SM as gemv_swiglu's launch.
constexpr int kSideThreads = kGemvWarps * 32;
constexpr int kSideBlocksPerSm = 3;

// One token, block e < n_experts for expert e: the router's logit e (its f32 row times x); the last
// expert block to count in hands x to the host when handing off, routes the token, finishes the
// hand-off and leaves the counter at zero. Blocks from n_experts on are the side SwiGLU's (W: its
// weights; none without one).
template <typename W, bool kSide>
__global__ void __launch_bounds__(kSide ? kSideThreads : kMaxGateExperts, kSide ? kSideBlocksPerSm : 1)
    route_one_token(MoeGateConfig c, const float* router, std::int64_t hidden, const float* x, float* logits,
                    std::int32_t* expert_ids, float* weights, std::int32_t* counter, GateHandOff hand_off,
                    SideSwiglu side) {
  if constexpr (kSide) {
    if (blockIdx.x >= static_cast<unsigned>(c.n_experts)) {
      swiglu_rows<W, 1>(blockIdx.x - c.n_experts, side.in, side.rows, static_cast<const W*>(side.gate),
                        static_cast<const W*>(side.up), side.x, side.h);
      return;
    }
  }
  const auto* row = reinterpret_cast<const float4*>(router + blockIdx.x * hidden);
  const std::int64_t quads = hidden / 4;
  float4 staged[kStagedRouterLoads];
#pragma unroll
  for (int u = 0; u < kStagedRouterLoads; ++u) {
    const std::int64_t i = threadIdx.x + std::int64_t{u} * blockDim.x;
    if (i < quads) staged[u] = __ldg(row + i);
  }
  begin_after_previous_grid();
  const bool handing_off = hand_off.ready != nullptr;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  float sum = 0.0f;
  auto add = [&](const float4& w, std::int64_t i) {
    const float4 v = x4[i];
    sum += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
  };
#pragma unroll
  for (int u = 0; u < kStagedRouterLoads; ++u) {
    const std::int64_t i = threadIdx.x + std::int64_t{u} * blockDim.x;
    if (i < quads) add(staged[u], i);
  }
  for (std::int64_t i = threadIdx.x + std::int64_t{kStagedRouterLoads} * blockDim.x; i < quads; i += blockDim.x)
    add(__ldg(row + i), i);
  sum = block_sum(sum);
  if (threadIdx.x == 0) logits[blockIdx.x] = sum;
  __threadfence();
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) last = atomicAdd(counter, 1) == c.n_experts - 1;
  __syncthreads();
  if (!last) return;
  if (threadIdx.x == 0) *counter = 0;  // for the next launch
  __threadfence();
  __shared__ std::int32_t chosen_ids[kMaxGateExperts];
  __shared__ float chosen_weights[kMaxGateExperts];
  // Handing off: all of x goes to the host before the routing, so that its writes cross PCIe while
  // the block routes, and publish's one system fence finds them done (a share per expert block,
  // each fenced before its count-in, would put a second system fence on this path).
  if (handing_off) copy_to_host(hand_off, 0, hidden);
  route(c, logits, expert_ids, weights, chosen_ids, chosen_weights);
  if (handing_off) publish(hand_off, c.top_k, chosen_ids, chosen_weights);
}

void check_config(const MoeGateConfig& config, const char* who) {
  check_moe_gate_config(config);
  if (config.n_experts > kMaxGateExperts)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(config.n_experts) + " experts; at most " +
                                std::to_string(kMaxGateExperts) + " are supported");
}

void check_hand_off(const GateHandOff* hand_off, std::int64_t tokens, const char* who) {
  if (hand_off != nullptr &&
      (tokens != 1 || hand_off->ready == nullptr || hand_off->x == nullptr || hand_off->x_host == nullptr ||
       hand_off->ids_host == nullptr || hand_off->weights_host == nullptr || hand_off->hidden < 0))
    throw std::invalid_argument(std::string(who) + ": a hand-off takes one token (" + std::to_string(tokens) +
                                " given) and every buffer");
}

}  // namespace

void moe_gate(const MoeGateConfig& config, const float* logits, std::int64_t tokens, std::int32_t* expert_ids,
              float* weights, cudaStream_t stream, const GateHandOff* hand_off) {
  check_config(config, "cuda::moe_gate");
  if (tokens <= 0) return;
  if (tokens > 0x7fffffff) throw std::invalid_argument("cuda::moe_gate: more than 2^31 - 1 tokens");
  check_hand_off(hand_off, tokens, "cuda::moe_gate");
  const int threads = (config.n_experts + 31) / 32 * 32;
  launch_kernel(route_tokens, static_cast<unsigned>(tokens), threads, 0, stream, config, logits, expert_ids, weights,
                hand_off != nullptr ? *hand_off : GateHandOff{});
}

bool router_gate_supports(std::int64_t hidden, const float* router, const float* x) {
  return hidden > 0 && hidden % 4 == 0 && aligned_16(router) && aligned_16(x);
}

bool router_gate_side_supports(const MoeGateConfig& config, const SideSwiglu& side) {
  // The side rows run as swiglu_rows on bf16 or f32 weights; blocks go to gemv_swiglu's own launch.
  return (side.dtype == DType::bf16 || side.dtype == DType::f32) && config.n_experts <= kSideThreads && side.rows > 0 && side.h != nullptr && side.gate != nullptr &&
         side.up != nullptr && side.x != nullptr &&
         gemv_swiglu_supports(1, side.in, side.dtype, side.gate, side.up, side.x);
}

void router_gate(const MoeGateConfig& config, const float* router, std::int64_t hidden, const float* x,
                 float* logits, std::int32_t* expert_ids, float* weights, std::int32_t* counter, cudaStream_t stream,
                 const GateHandOff* hand_off, const SideSwiglu* side) {
  check_config(config, "cuda::router_gate");
  check_hand_off(hand_off, 1, "cuda::router_gate");
  if (!router_gate_supports(hidden, router, x) || counter == nullptr)
    throw std::invalid_argument("cuda::router_gate: hidden " + std::to_string(hidden) +
                                " must be a multiple of 4, the router and x 16-byte aligned, with a counter");
  if (side != nullptr && !router_gate_side_supports(config, *side))
    throw std::invalid_argument("cuda::router_gate: a side SwiGLU it cannot take (" +
                                std::to_string(config.n_experts) + " experts, in " + std::to_string(side->in) +
                                ", rows " + std::to_string(side->rows) + ")");
  const GateHandOff handing = hand_off != nullptr ? *hand_off : GateHandOff{};
  const auto experts = static_cast<unsigned>(config.n_experts);
  if (side == nullptr) {
    const int threads = std::max(256, (config.n_experts + 31) / 32 * 32);
    launch_kernel(route_one_token<float, false>, experts, threads, 0, stream, config, router, hidden, x, logits,
                  expert_ids, weights, counter, handing, SideSwiglu{});
    return;
  }
  const auto blocks = experts + static_cast<unsigned>((side->rows + kGemvWarps - 1) / kGemvWarps);
  if (side->dtype == DType::bf16)
    launch_kernel(route_one_token<__nv_bfloat16, true>, blocks, kSideThreads, 0, stream, config, router, hidden, x,
                  logits, expert_ids, weights, counter, handing, *side);
  else
    launch_kernel(route_one_token<float, true>, blocks, kSideThreads, 0, stream, config, router, hidden, x, logits,
                  expert_ids, weights, counter, handing, *side);
}

}  // namespace switchyard::cuda
