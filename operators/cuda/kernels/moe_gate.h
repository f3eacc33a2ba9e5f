#pragma once
// MoE routing on the GPU: every scheme of operators/ops/moe_gate_config.h (DeepSeek-V3 noaux_tc,
// DeepSeek-V2 greedy and group_limited_greedy, Qwen3-MoE, Mixtral), the same algorithm step by step
// in f32 with the same tie rule (the lower index wins) and output order (descending choice).
// One thread block per token, one thread per expert.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "operators/ops/moe_gate_config.h"

namespace switchyard::cuda {

// The most experts one token's block routes among.
constexpr int kMaxGateExperts = 512;

// Device pointers. logits: [tokens, n_experts] f32; expert_ids: [tokens, top_k] int32;
// weights: [tokens, top_k] f32. config.score_correction_bias, when set, must point to DEVICE
// memory ([n_experts] f32): on the GPU the bias is a weight like any other. Queued on `stream`.
// Throws std::invalid_argument for a config check_moe_gate_config refuses, or n_experts > 512.
//
// hand_off (one token only, else std::invalid_argument): the same launch then hands the token to
// CPU experts: x [hidden] f32, its ids and weights are copied to host-mapped memory (device
// views), and after a system-wide fence the host-mapped flag `ready` is set to 1, which is what
// write_to_host and a stream write of the flag do in two more operations.
struct GateHandOff {
  const float* x = nullptr;
  std::int64_t hidden = 0;
  float* x_host = nullptr;
  std::int32_t* ids_host = nullptr;
  float* weights_host = nullptr;
  std::uint32_t* ready = nullptr;
};
void moe_gate(const MoeGateConfig& config, const float* logits, std::int64_t tokens, std::int32_t* expert_ids,
              float* weights, cudaStream_t stream, const GateHandOff* hand_off = nullptr);

// Decode's router and gate in one launch, for one token: logits = router x (router: [n_experts,
// hidden] f32, x: [hidden] f32, accumulated in f32), then moe_gate on them, with the same outputs
// (logits [n_experts] too) and hand-off. One block per expert computes its logit; the last block
// to count in on `counter` copies x to the host when handing off, routes, and leaves the counter
// zero. counter: one device int32, zero before the launch (a
// GpuRuntime::zeroed_counters counter). Throws std::invalid_argument as moe_gate does, and when
// !router_gate_supports.
//
// side (optional): a one-token SwiGLU that needs the same x but not the routing (the shared
// experts' h = silu(gate x) * up x, as gemv_swiglu computes it), run by extra blocks of the same
// launch. The expert blocks come first in the grid, so the hand-off is not held back; the next
// launch then waits for one kernel instead of two in a row.
struct SideSwiglu {
  const void* gate = nullptr;  // [rows, in], bf16 or f32 as `dtype`
  const void* up = nullptr;
  DType dtype = DType::bf16;
  std::int64_t in = 0, rows = 0;
  const float* x = nullptr;  // [in] f32
  float* h = nullptr;        // [rows] f32
};
bool router_gate_supports(std::int64_t hidden, const float* router, const float* x);
// Whether router_gate can take `side` beside `config`'s experts.
bool router_gate_side_supports(const MoeGateConfig& config, const SideSwiglu& side);
void router_gate(const MoeGateConfig& config, const float* router, std::int64_t hidden, const float* x,
                 float* logits, std::int32_t* expert_ids, float* weights, std::int32_t* counter, cudaStream_t stream,
                 const GateHandOff* hand_off = nullptr, const SideSwiglu* side = nullptr);

}  // namespace switchyard::cuda
