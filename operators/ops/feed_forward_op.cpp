#include "operators/ops/feed_forward_op.h"

#include "core/error.h"

namespace switchyard {

ExpertNames expert_names(const ModelConfig& config) { return config.family->expert_projections; }

MoeGateConfig gate_config(const ModelConfig& c, const float* bias) {
  const GateScheme s = c.family->gate_scheme(c);
  MoeGateConfig g;
  g.n_experts = c.n_routed_experts;
  g.top_k = c.num_experts_per_tok;
  g.scoring = s.scoring == RouterScoring::sigmoid ? GateScoring::sigmoid : GateScoring::softmax;
  g.score_correction_bias = s.correction_bias ? bias : nullptr;
  switch (s.group_scoring) {
    case GroupScoring::none: g.group_score = GroupScore::none; break;
    case GroupScoring::max: g.group_score = GroupScore::max; break;
    case GroupScoring::sum_of_top2: g.group_score = GroupScore::sum_of_top2; break;
  }
  if (g.group_score != GroupScore::none) {
    g.n_group = s.n_group;
    g.topk_group = s.topk_group;
  }
  g.weights_from_scores = s.weights_from_scores;
  g.normalize = s.normalize;
  g.normalize_epsilon = s.normalize_epsilon;
  g.scale_when_normalized = s.scale_when_normalized;
  g.routed_scaling_factor = s.routed_scaling_factor;
  return g;
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
