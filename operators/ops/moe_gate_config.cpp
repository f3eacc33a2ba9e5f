#include "operators/ops/moe_gate_config.h"

#include <stdexcept>
#include <string>

namespace switchyard {

void check_moe_gate_config(const MoeGateConfig& c) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("moe_gate: " + what); };
  if (c.n_experts <= 0 || c.top_k <= 0 || c.top_k > c.n_experts)
    fail("top_k " + std::to_string(c.top_k) + " must be in [1, n_experts = " + std::to_string(c.n_experts) + "]");
  if (c.group_score == GroupScore::none) return;
  if (c.n_group <= 0 || c.n_experts % c.n_group != 0)
    fail("n_group " + std::to_string(c.n_group) + " must divide n_experts " + std::to_string(c.n_experts));
  if (c.topk_group <= 0 || c.topk_group > c.n_group)
    fail("topk_group " + std::to_string(c.topk_group) + " must be in [1, n_group = " + std::to_string(c.n_group) + "]");
  if (c.group_score == GroupScore::sum_of_top2 && c.n_experts / c.n_group < 2)
    fail("sum_of_top2 group scores need at least 2 experts per group");
  if (c.topk_group * (c.n_experts / c.n_group) < c.top_k)
    fail("the " + std::to_string(c.topk_group) + " kept groups hold fewer than top_k = " + std::to_string(c.top_k) +
         " experts");
}

}  // namespace switchyard
