#pragma once
// The MoE gate on the CPU: operators/ops/moe_gate_config.h gives the algorithm.
#include <cstdint>

#include "operators/ops/moe_gate_config.h"

namespace switchyard::cpu {

// logits: [tokens, n_experts] f32; expert_ids: [tokens, top_k]; weights: [tokens, top_k] f32.
// Throws std::invalid_argument for an inconsistent config (check_moe_gate_config).
void moe_gate(const MoeGateConfig& config, const float* logits, std::int64_t tokens, std::int32_t* expert_ids,
              float* weights);

}  // namespace switchyard::cpu
