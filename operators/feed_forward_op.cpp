#include "operators/feed_forward_op.h"

#include "core/error.h"

namespace switchyard {

ExpertNames expert_names(const ModelConfig& config) {
  if (config.arch == Architecture::mixtral) return {"w1", "w3", "w2"};
  return {"gate_proj", "up_proj", "down_proj"};
}

cpu::MoeGateConfig gate_config(const ModelConfig& c, const float* bias) {
  switch (c.arch) {
    case Architecture::deepseek_v3:
      return cpu::deepseek_v3_gate(c.n_routed_experts, c.num_experts_per_tok, c.n_group, c.topk_group, bias,
                                   c.norm_topk_prob, static_cast<float>(c.routed_scaling_factor));
    case Architecture::deepseek_v2:
      return cpu::deepseek_v2_gate(c.n_routed_experts, c.num_experts_per_tok,
                                   c.topk_method == "group_limited_greedy" ? c.n_group : 0, c.topk_group,
                                   static_cast<float>(c.routed_scaling_factor));
    case Architecture::qwen3_moe: return cpu::qwen3_moe_gate(c.n_routed_experts, c.num_experts_per_tok, c.norm_topk_prob);
    case Architecture::mixtral: return cpu::mixtral_gate(c.n_routed_experts, c.num_experts_per_tok);
  }
  return {};
}

void require_same_device(const BuildContext& context, const Module& block, const Module& part) {
  const Device outer = context.device_of(block), inner = context.device_of(part);
  if (outer == inner) return;
  throw InputError("the profile runs " + std::string(block.name) + " on " + outer.str() + " but " +
                   std::string(part.name) + " on " + inner.str() +
                   "; the parts of an attention or MLP block run where the block does (only routed experts may "
                   "differ)");
}

}  // namespace switchyard
