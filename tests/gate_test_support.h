#pragma once
// Shared by the gate tests: whether random router logits are far enough apart that float rounding
// cannot reorder a token's choices or group scores (so exact expert ids can be compared with the
// double-precision reference), and a case of every gate preset.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "operators/cpu/kernels/moe_gate.h"
#include "tests/gate_presets.h"
#include "tests/operators/cpu/kernels/reference.h"

namespace switchyard::gate_testing {

inline bool separated(std::vector<double> values, double gap) {
  std::sort(values.begin(), values.end());
  for (std::size_t i = 1; i < values.size(); ++i)
    if (values[i] - values[i - 1] < gap) return false;
  return true;
}

inline bool well_separated(const switchyard::MoeGateConfig& c, const float* logits) {
  if (c.scoring == switchyard::GateScoring::softmax && !c.score_correction_bias)
    return separated(std::vector<double>(logits, logits + c.n_experts), 1e-4);
  std::vector<double> choice(static_cast<std::size_t>(c.n_experts));
  if (c.scoring == switchyard::GateScoring::softmax) {
    cpu::reference::softmax(logits, 1, c.n_experts, choice.data());
  } else {
    for (int e = 0; e < c.n_experts; ++e) choice[e] = 1 / (1 + std::exp(-static_cast<double>(logits[e])));
  }
  if (c.score_correction_bias)
    for (int e = 0; e < c.n_experts; ++e) choice[e] += c.score_correction_bias[e];
  if (!separated(choice, 1e-5)) return false;
  if (c.group_score == switchyard::GroupScore::none) return true;
  const int size = c.n_experts / c.n_group;
  std::vector<double> group_scores;
  for (int g = 0; g < c.n_group; ++g) {
    std::vector<double> members(choice.begin() + g * size, choice.begin() + (g + 1) * size);
    std::sort(members.rbegin(), members.rend());
    group_scores.push_back(c.group_score == switchyard::GroupScore::max ? members[0] : members[0] + members[1]);
  }
  return separated(group_scores, 1e-5);
}

// Correction biases in [-spread, spread).
inline std::vector<float> biases(int count, float spread, std::mt19937& random) {
  std::uniform_real_distribution<float> value(-spread, spread);
  std::vector<float> out(static_cast<std::size_t>(count));
  for (float& v : out) v = value(random);
  return out;
}

struct GateCase {
  const char* name;
  switchyard::MoeGateConfig config;
  std::vector<float> bias;  // host copy; config.score_correction_bias points here
};

inline std::vector<GateCase> gate_cases(std::mt19937& random) {
  std::vector<GateCase> cases;
  auto add = [&](const char* name, switchyard::MoeGateConfig config, std::vector<float> bias = {}) {
    cases.push_back({name, config, std::move(bias)});
  };
  add("DeepSeek-V3 noaux_tc 256/8 groups/4 kept/top-8", gate_presets::deepseek_v3_gate(256, 8, 8, 4, nullptr, true, 2.5f),
      biases(256, 0.1f, random));
  add("DeepSeek-V3 noaux_tc unnormalised 64/4/2/top-6", gate_presets::deepseek_v3_gate(64, 6, 4, 2, nullptr, false, 1.5f),
      biases(64, 0.3f, random));
  switchyard::MoeGateConfig v3_inf = gate_presets::deepseek_v3_gate(512, 8, 16, 4, nullptr, true, 2.5f);
  v3_inf.masked_choice = -INFINITY;
  add("DeepSeek-V3 512 experts, -inf mask", v3_inf, biases(512, 0.1f, random));
  add("DeepSeek-V2 greedy 64/top-6", gate_presets::deepseek_v2_gate(64, 6, 0, 0, 16.0f));
  add("DeepSeek-V2 group_limited_greedy 160/8/3/top-6", gate_presets::deepseek_v2_gate(160, 6, 8, 3, 16.0f));
  switchyard::MoeGateConfig v2_remote = gate_presets::deepseek_v2_gate(64, 6, 0, 0, 16.0f);
  v2_remote.normalize = true, v2_remote.normalize_epsilon = 1e-20f, v2_remote.scale_when_normalized = false;
  add("DeepSeek-V2 remote code, normalised", v2_remote);
  add("Qwen3-MoE 128/top-8 normalised", gate_presets::qwen3_moe_gate(128, 8, true));
  add("Qwen3-MoE 128/top-8 raw", gate_presets::qwen3_moe_gate(128, 8, false));
  add("Mixtral 8/top-2", gate_presets::mixtral_gate(8, 2));
  add("Mixtral-like 33/top-33", gate_presets::mixtral_gate(33, 33));
  for (GateCase& c : cases)
    if (!c.bias.empty()) c.config.score_correction_bias = c.bias.data();
  return cases;
}

}  // namespace switchyard::gate_testing
