#pragma once
// Shared by the CPU and CUDA gate tests: whether random router logits are far enough apart that
// float rounding cannot reorder a token's choices or group scores (so exact expert ids can be
// compared with the double-precision reference).
#include <algorithm>
#include <cmath>
#include <vector>

#include "operators/cpu/moe_gate.h"
#include "operators/cpu/reference.h"

namespace switchyard::gate_testing {

inline bool separated(std::vector<double> values, double gap) {
  std::sort(values.begin(), values.end());
  for (std::size_t i = 1; i < values.size(); ++i)
    if (values[i] - values[i - 1] < gap) return false;
  return true;
}

inline bool well_separated(const cpu::MoeGateConfig& c, const float* logits) {
  if (c.scoring == cpu::GateScoring::softmax && !c.score_correction_bias)
    return separated(std::vector<double>(logits, logits + c.n_experts), 1e-4);
  std::vector<double> choice(static_cast<std::size_t>(c.n_experts));
  if (c.scoring == cpu::GateScoring::softmax) {
    cpu::reference::softmax(logits, 1, c.n_experts, choice.data());
  } else {
    for (int e = 0; e < c.n_experts; ++e) choice[e] = 1 / (1 + std::exp(-static_cast<double>(logits[e])));
  }
  if (c.score_correction_bias)
    for (int e = 0; e < c.n_experts; ++e) choice[e] += c.score_correction_bias[e];
  if (!separated(choice, 1e-5)) return false;
  if (c.group_score == cpu::GroupScore::none) return true;
  const int size = c.n_experts / c.n_group;
  std::vector<double> group_scores;
  for (int g = 0; g < c.n_group; ++g) {
    std::vector<double> members(choice.begin() + g * size, choice.begin() + (g + 1) * size);
    std::sort(members.rbegin(), members.rend());
    group_scores.push_back(c.group_score == cpu::GroupScore::max ? members[0] : members[0] + members[1]);
  }
  return separated(group_scores, 1e-5);
}

}  // namespace switchyard::gate_testing
