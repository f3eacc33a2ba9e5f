#include "operators/cuda/moe_gate.h"

#include <stdexcept>
#include <string>

#include "operators/cuda/block_reduce.cuh"
#include "operators/cuda/cuda_check.h"
#include "operators/cpu/select_top_k.h"
#include "operators/cuda/launch.cuh"

namespace switchyard::cuda {
namespace {

using cpu::GateScoring;
using cpu::GroupScore;
using cpu::select_top_k;

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

// One block per token, thread e for expert e (blockDim.x: n_experts rounded up to a warp).
__global__ void route_tokens(MoeGateConfig c, const float* logits, std::int32_t* expert_ids, float* weights,
                             GateHandOff hand_off) {
  begin_after_previous_grid();
  __shared__ float scores[kMaxGateExperts], choice[kMaxGateExperts], group_scores[kMaxGateExperts];
  __shared__ float chosen_weights[kMaxGateExperts];
  __shared__ std::int32_t chosen_ids[kMaxGateExperts];
  __shared__ bool kept[kMaxGateExperts];
  const int n = c.n_experts, k = c.top_k, e = threadIdx.x;
  const bool expert = e < n;
  const float logit = expert ? logits[blockIdx.x * std::int64_t{n} + e] : negative_infinity();

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
      expert_ids[blockIdx.x * std::int64_t{k} + rank] = e;
      chosen_ids[rank] = e;
      chosen_weights[rank] = c.weights_from_scores ? scores[e] : mine;
    }
  }
  __syncthreads();

  // 6. Normalise and scale in the CPU's order.
  if (e == 0) {
    float* w = weights + blockIdx.x * std::int64_t{k};
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
      w[i] = value;
      chosen_weights[i] = value;
    }
  }
  if (hand_off.ready == nullptr) return;

  // 7. The hand-off to the CPU experts (one token): x, ids, weights to host memory, each thread
  // fencing its own writes, then the flag.
  __syncthreads();
  for (int i = e; i < k; i += blockDim.x) {
    hand_off.ids_host[i] = chosen_ids[i];
    hand_off.weights_host[i] = chosen_weights[i];
  }
  const float* __restrict__ x = hand_off.x;
  float* __restrict__ x_host = hand_off.x_host;
  const std::int64_t stride = blockDim.x;
  std::int64_t i = e;
  for (; i + 3 * stride < hand_off.hidden; i += 4 * stride) {  // four loads in flight per thread
    const float a = x[i], b = x[i + stride], d = x[i + 2 * stride], f = x[i + 3 * stride];
    x_host[i] = a, x_host[i + stride] = b, x_host[i + 2 * stride] = d, x_host[i + 3 * stride] = f;
  }
  for (; i < hand_off.hidden; i += stride) x_host[i] = x[i];
  __threadfence_system();
  __syncthreads();
  if (e == 0) *reinterpret_cast<volatile std::uint32_t*>(hand_off.ready) = 1;
}

}  // namespace

void moe_gate(const MoeGateConfig& config, const float* logits, std::int64_t tokens, std::int32_t* expert_ids,
              float* weights, cudaStream_t stream, const GateHandOff* hand_off) {
  // The CPU kernel's checks: with no tokens it validates the config and touches nothing else.
  cpu::moe_gate(config, nullptr, 0, nullptr, nullptr);
  if (config.n_experts > kMaxGateExperts)
    throw std::invalid_argument("cuda::moe_gate: " + std::to_string(config.n_experts) + " experts; at most " +
                                std::to_string(kMaxGateExperts) + " are supported");
  if (tokens <= 0) return;
  if (tokens > 0x7fffffff) throw std::invalid_argument("cuda::moe_gate: more than 2^31 - 1 tokens");
  if (hand_off != nullptr &&
      (tokens != 1 || hand_off->ready == nullptr || hand_off->x == nullptr || hand_off->x_host == nullptr ||
       hand_off->ids_host == nullptr || hand_off->weights_host == nullptr || hand_off->hidden < 0))
    throw std::invalid_argument("cuda::moe_gate: a hand-off takes one token (" + std::to_string(tokens) +
                                " given) and every buffer");
  const int threads = (config.n_experts + 31) / 32 * 32;
  launch_kernel(route_tokens, static_cast<unsigned>(tokens), threads, 0, stream, config, logits, expert_ids, weights,
                hand_off != nullptr ? *hand_off : GateHandOff{});
}

}  // namespace switchyard::cuda
