#pragma once
// The MoE gate's configuration for each family's routing, as transformers computes it (the steps
// are operators/cpu/kernels/moe_gate.h's). The product builds its gates from the families' gate
// schemes (core/models/, operators/ops/feed_forward_op.h's gate_config); the tests check those
// and the kernels against these. Sources (transformers main, early 2026):
//   DeepSeek-V3  modeling_deepseek_v3.py DeepseekV3TopkRouter.get_topk_indices / forward
//                (v5: DeepseekV3MoE.route_tokens_to_experts), topk_method "noaux_tc".
//   DeepSeek-V2  modular_deepseek_v2.py DeepseekV2Moe.route_tokens_to_experts, "greedy" and
//                "group_limited_greedy".
//   Qwen3-MoE    Qwen3MoeSparseMoeBlock / Qwen3MoeTopKRouter.
//   Mixtral      MixtralSparseMoeBlock / MixtralTopKRouter.
#include "operators/cpu/kernels/moe_gate.h"

namespace switchyard::gate_presets {

// DeepSeek-V3 "noaux_tc": sigmoid, bias, groups by sum of top-2, weights without bias,
// normalised (+1e-20) when norm_topk_prob, then scaled.
inline switchyard::MoeGateConfig deepseek_v3_gate(int n_experts, int top_k, int n_group, int topk_group,
                                           const float* correction_bias, bool norm_topk_prob,
                                           float routed_scaling_factor) {
  switchyard::MoeGateConfig c;
  c.n_experts = n_experts;
  c.top_k = top_k;
  c.scoring = switchyard::GateScoring::sigmoid;
  c.score_correction_bias = correction_bias;
  c.group_score = switchyard::GroupScore::sum_of_top2;
  c.n_group = n_group;
  c.topk_group = topk_group;
  c.weights_from_scores = true;
  c.normalize = norm_topk_prob;
  c.normalize_epsilon = 1e-20f;
  c.routed_scaling_factor = routed_scaling_factor;
  return c;
}

// DeepSeek-V2 "greedy" (n_group = 0) or "group_limited_greedy": softmax, groups by max, scaled.
// transformers' native DeepseekV2Moe ignores norm_topk_prob, and so does this preset. DeepSeek's
// remote code (modeling_deepseek.py) normalises instead of scaling when top_k > 1 and
// norm_topk_prob: set normalize = true, normalize_epsilon = 1e-20, scale_when_normalized = false.
// Every released V2 checkpoint has norm_topk_prob false, where all of these agree.
inline switchyard::MoeGateConfig deepseek_v2_gate(int n_experts, int top_k, int n_group, int topk_group,
                                           float routed_scaling_factor) {
  switchyard::MoeGateConfig c;
  c.n_experts = n_experts;
  c.top_k = top_k;
  c.scoring = switchyard::GateScoring::softmax;
  if (n_group > 0) {
    c.group_score = switchyard::GroupScore::max;
    c.n_group = n_group;
    c.topk_group = topk_group;
  }
  c.routed_scaling_factor = routed_scaling_factor;
  return c;
}

// Qwen3-MoE: softmax, top-k, weights divided by their sum (no epsilon) when norm_topk_prob.
inline switchyard::MoeGateConfig qwen3_moe_gate(int n_experts, int top_k, bool norm_topk_prob) {
  switchyard::MoeGateConfig c;
  c.n_experts = n_experts;
  c.top_k = top_k;
  c.normalize = norm_topk_prob;
  return c;
}

// Mixtral: softmax, top-k, weights always divided by their sum.
inline switchyard::MoeGateConfig mixtral_gate(int n_experts, int top_k) { return qwen3_moe_gate(n_experts, top_k, true); }

}  // namespace switchyard::gate_presets
