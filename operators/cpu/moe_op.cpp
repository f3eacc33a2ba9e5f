#include "operators/cpu/moe_op.h"

#include "core/error.h"

namespace switchyard {

MoeOp::MoeOp(const BuildContext& context, const Module& moe)
    : tracer_(context.tracer),
      layer_(moe.layer),
      router_(context, context.child(moe, "gate"), Device::cpu()),
      experts_(context, context.child(moe, "experts")) {
  const ModelConfig& c = context.tree.config();
  require_same_device(context, moe, context.child(moe, "gate"));
  const Module& experts = context.child(moe, "experts");
  const PhaseImplementations routed = context.implementation(experts);
  for (const Implementation implementation : {routed.generate, routed.prefill})
    if (implementation != Implementation::experts_cpu)
      throw InputError("the profile runs " + std::string(moe.name) + " on the CPU but its routed experts as " +
                       implementation_name(implementation) + " on " +
                       (implementation == routed.generate ? context.generate_device(experts)
                                                          : context.prefill_device(experts))
                           .str() +
                       "; a MoE block on the CPU runs its experts there too (experts.cpu)");
  context.record(experts, routed);
  const Module& gate = context.child(moe, "gate");
  for (const Parameter& p : gate.params)
    if (p.name == "e_score_correction_bias") correction_bias_ = context.param_f32(gate, "e_score_correction_bias");
  gate_ = gate_config(c, correction_bias_.empty() ? nullptr : correction_bias_.data());
  for (int child : moe.children)
    if (context.tree.at(child).local_name() == "shared_experts")
      shared_ = std::make_unique<MlpOp>(context, context.tree.at(child));
}

void MoeOp::forward(const float* x, std::int64_t tokens, float* out) {
  const int top_k = gate_.top_k;
  std::vector<float> logits(static_cast<std::size_t>(tokens * gate_.n_experts));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * top_k));
  std::vector<float> weights(ids.size());
  {
    const Tracer::Scope scope(tracer_, Region::moe_gate, layer_);
    router_.forward(x, tokens, logits.data());
    cpu::moe_gate(gate_, logits.data(), tokens, ids.data(), weights.data());
  }
  {
    const Tracer::Scope scope(tracer_, Region::routed_experts, layer_);
    experts_.forward(x, tokens, ids.data(), weights.data(), top_k, out);
  }
  if (!shared_) return;
  const Tracer::Scope scope(tracer_, Region::shared_experts, layer_);
  std::vector<float> shared(static_cast<std::size_t>(tokens * router_.in_features()));
  shared_->forward(x, tokens, shared.data());
  for (std::size_t i = 0; i < shared.size(); ++i) out[i] += shared[i];
}

}  // namespace switchyard
