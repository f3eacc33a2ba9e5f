#pragma once
// MoE routing on the GPU: every preset of operators/cpu/moe_gate.h (DeepSeek-V3 noaux_tc,
// DeepSeek-V2 greedy and group_limited_greedy, Qwen3-MoE, Mixtral), the same algorithm step by step
// in f32 with the same tie rule (the lower index wins) and output order (descending choice).
// One thread block per token, one thread per expert.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "operators/cpu/moe_gate.h"

namespace switchyard::cuda {

using cpu::MoeGateConfig;

// The most experts one token's block routes among.
constexpr int kMaxGateExperts = 512;

// Device pointers. logits: [tokens, n_experts] f32; expert_ids: [tokens, top_k] int32;
// weights: [tokens, top_k] f32. config.score_correction_bias, when set, must point to DEVICE
// memory ([n_experts] f32): on the GPU the bias is a weight like any other. Queued on `stream`.
// Throws std::invalid_argument for a config the CPU kernel refuses, or n_experts > 512.
void moe_gate(const MoeGateConfig& config, const float* logits, std::int64_t tokens, std::int32_t* expert_ids,
              float* weights, cudaStream_t stream);

}  // namespace switchyard::cuda
