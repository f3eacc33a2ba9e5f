#pragma once
// MoE routing, as every backend's gate kernel runs it: from router logits to each token's top-k
// experts and their weights, for every routing scheme of the models we run: one configurable
// algorithm, which each family's gate scheme fills in (core/models/, the gate_config of
// operators/ops/feed_forward_op.h) the way transformers routes that family (DeepSeek-V3's
// "noaux_tc", DeepSeek-V2's "greedy" and "group_limited_greedy", Qwen3-MoE's and Mixtral's softmax
// top-k; tests/gate_presets.h cites the sources).
//
// The algorithm, per token:
//   1. scores = softmax(logits) or sigmoid(logits), f32.
//   2. choice = scores + score_correction_bias (when given).
//   3. Group-limited routing: experts form n_group equal groups in index order; a group's score is
//      the max of its choices (V2) or the sum of its two largest (V3); the topk_group best groups
//      are kept and every expert of the others gets choice = masked_choice. transformers fills
//      0.0 there (masked_fill(..., 0.0)), not -inf: when choices can be negative (V3's bias), a
//      masked expert at 0.0 can beat a kept one whose choice is below 0 and so be routed to.
//      DeepSeek's own inference code uses -inf, which never picks outside the kept groups.
//   4. ids = the top_k experts by choice, best first.
//   5. weights = the scores at ids, without bias or mask, when weights_from_scores (V3:
//      `scores.gather`); otherwise the masked choices at ids (V2 keeps topk's values).
//   6. If normalize: weights /= sum(weights) + normalize_epsilon. Then, if scale_when_normalized or
//      not normalize: weights *= routed_scaling_factor.
// Ties (top-k of experts and of groups): the lower index wins, as torch.topk does on the CPU in
// practice; outputs are ordered by descending choice, which torch (sorted=False) leaves open.
#include <cstdint>

namespace switchyard {

enum class GateScoring { softmax, sigmoid };
enum class GroupScore { none, max, sum_of_top2 };

struct MoeGateConfig {
  int n_experts = 0;
  int top_k = 0;
  GateScoring scoring = GateScoring::softmax;
  const float* score_correction_bias = nullptr;  // [n_experts] f32, or nullptr
  GroupScore group_score = GroupScore::none;
  int n_group = 1;
  int topk_group = 1;
  float masked_choice = 0.0f;  // transformers; -infinity for DeepSeek's inference code
  bool weights_from_scores = false;
  bool normalize = false;
  float normalize_epsilon = 0.0f;
  float routed_scaling_factor = 1.0f;
  bool scale_when_normalized = true;
};

// std::invalid_argument ("moe_gate: ...") for an inconsistent config: top_k > n_experts, groups
// that do not divide the experts, fewer than 2 experts per group for sum_of_top2, kept groups
// holding fewer than top_k experts.
void check_moe_gate_config(const MoeGateConfig& config);

}  // namespace switchyard
