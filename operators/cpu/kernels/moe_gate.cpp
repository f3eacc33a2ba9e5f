#include "operators/cpu/kernels/moe_gate.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "operators/cpu/kernels/softmax.h"
#include "operators/ops/select_top_k.h"

namespace switchyard::cpu {
namespace {

float group_score(const MoeGateConfig& c, const float* choice) {
  const int size = c.n_experts / c.n_group;
  if (c.group_score == GroupScore::max) {
    float best = choice[0];
    for (int i = 1; i < size; ++i) best = std::fmax(best, choice[i]);
    return best;
  }
  std::int32_t top2[2];
  select_top_k(choice, size, 2, top2);
  return choice[top2[0]] + choice[top2[1]];
}

// Sets the choices of every expert outside the topk_group best groups to masked_choice.
void mask_groups(const MoeGateConfig& c, float* choice, std::vector<float>& group_scores,
                 std::vector<std::int32_t>& kept) {
  const int size = c.n_experts / c.n_group;
  for (int g = 0; g < c.n_group; ++g) group_scores[g] = group_score(c, choice + g * size);
  select_top_k(group_scores.data(), c.n_group, c.topk_group, kept.data());
  std::vector<bool> keep(c.n_group, false);
  for (int i = 0; i < c.topk_group; ++i) keep[kept[i]] = true;
  for (int g = 0; g < c.n_group; ++g)
    if (!keep[g])
      for (int i = 0; i < size; ++i) choice[g * size + i] = c.masked_choice;
}

}  // namespace

void moe_gate(const MoeGateConfig& c, const float* logits, std::int64_t tokens, std::int32_t* expert_ids,
              float* weights) {
  check_moe_gate_config(c);
  const int n = c.n_experts, k = c.top_k;
  std::vector<float> scores(n), choice(n), group_scores(c.n_group);
  std::vector<std::int32_t> kept(c.n_group);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * n;
    if (c.scoring == GateScoring::softmax)
      softmax(row, 1, n, scores.data());
    else
      for (int e = 0; e < n; ++e) scores[e] = 1.0f / (1.0f + std::exp(-row[e]));
    for (int e = 0; e < n; ++e)
      choice[e] = c.score_correction_bias ? scores[e] + c.score_correction_bias[e] : scores[e];
    if (c.group_score != GroupScore::none) mask_groups(c, choice.data(), group_scores, kept);

    std::int32_t* ids = expert_ids + t * k;
    float* w = weights + t * k;
    select_top_k(choice.data(), n, k, ids);
    for (int i = 0; i < k; ++i) w[i] = c.weights_from_scores ? scores[ids[i]] : choice[ids[i]];
    if (c.normalize) {
      float sum = 0;
      for (int i = 0; i < k; ++i) sum += w[i];
      const float denominator = sum + c.normalize_epsilon;
      for (int i = 0; i < k; ++i) w[i] /= denominator;
    }
    if (!c.normalize || c.scale_when_normalized)
      for (int i = 0; i < k; ++i) w[i] *= c.routed_scaling_factor;
  }
}

}  // namespace switchyard::cpu
