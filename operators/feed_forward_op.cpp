#include "operators/feed_forward_op.h"

#include <algorithm>

#include "operators/cpu/silu_and_mul.h"

namespace switchyard {
namespace {

// Mixtral names its projections w1 (gate), w3 (up), w2 (down).
bool mixtral_names(const ModuleTree& tree) { return tree.config().arch == Architecture::mixtral; }

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

}  // namespace

MlpOp::MlpOp(const BuildContext& context, const Module& mlp, const char* gate, const char* up, const char* down)
    : gate_(context, context.child(mlp, gate)), up_(context, context.child(mlp, up)), down_(context, context.child(mlp, down)) {
  context.require_cpu(mlp);
}

void MlpOp::forward(const float* x, std::int64_t tokens, float* out) {
  const std::int64_t width = gate_.out_features();
  std::vector<float> g(static_cast<std::size_t>(tokens * width)), u(g.size());
  gate_.forward(x, tokens, g.data());
  up_.forward(x, tokens, u.data());
  cpu::silu_and_mul(g.data(), u.data(), tokens * width, g.data());
  down_.forward(g.data(), tokens, out);
}

RoutedExperts::RoutedExperts(const BuildContext& context, const Module& experts) {
  context.require_cpu(experts);
  const bool w = mixtral_names(context.tree);
  for (int e : experts.children) {
    const Module& expert = context.tree.at(e);
    experts_.push_back(Expert{LinearOp(context, context.child(expert, w ? "w1" : "gate_proj")),
                              LinearOp(context, context.child(expert, w ? "w3" : "up_proj")),
                              LinearOp(context, context.child(expert, w ? "w2" : "down_proj"))});
  }
  hidden_ = context.tree.config().hidden_size;
}

RoutedExperts::RoutedExperts(std::vector<Expert> experts) : experts_(std::move(experts)) {
  hidden_ = experts_.empty() ? 0 : experts_.front().gate.in_features();
}

void RoutedExperts::forward(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights,
                            int top_k, float* out) const {
  std::fill(out, out + tokens * hidden_, 0.0f);
  // Group the (token, slot) pairs by expert, so each expert's weights are read once.
  std::vector<std::vector<std::int64_t>> routed(experts_.size());
  for (std::int64_t i = 0; i < tokens * top_k; ++i) routed[static_cast<std::size_t>(ids[i])].push_back(i);
  std::vector<float> xs, g, u, y;
  for (std::size_t e = 0; e < experts_.size(); ++e) {
    const auto& slots = routed[e];
    if (slots.empty()) continue;
    const Expert& expert = experts_[e];
    const auto n = static_cast<std::int64_t>(slots.size());
    const std::int64_t width = expert.gate.out_features();
    xs.resize(static_cast<std::size_t>(n * hidden_));
    for (std::int64_t r = 0; r < n; ++r)
      std::copy_n(x + (slots[static_cast<std::size_t>(r)] / top_k) * hidden_, hidden_, xs.data() + r * hidden_);
    g.resize(static_cast<std::size_t>(n * width));
    u.resize(g.size());
    y.resize(xs.size());
    expert.gate.forward(xs.data(), n, g.data());
    expert.up.forward(xs.data(), n, u.data());
    cpu::silu_and_mul(g.data(), u.data(), n * width, g.data());
    expert.down.forward(g.data(), n, y.data());
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t slot = slots[static_cast<std::size_t>(r)];
      float* row = out + (slot / top_k) * hidden_;
      const float w = weights[slot];
      for (std::int64_t i = 0; i < hidden_; ++i) row[i] += w * y[static_cast<std::size_t>(r * hidden_ + i)];
    }
  }
}

MoeOp::MoeOp(const BuildContext& context, const Module& moe)
    : tracer_(context.tracer), layer_(moe.layer), router_(context, context.child(moe, "gate")), experts_(context, context.child(moe, "experts")) {
  const ModelConfig& c = context.tree.config();
  context.require_cpu(moe);
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

std::unique_ptr<FeedForwardOp> make_feed_forward(const BuildContext& context, const Module& mlp) {
  if (mlp.cls->role == ModuleRole::moe) return std::make_unique<MoeOp>(context, mlp);
  return std::make_unique<MlpOp>(context, mlp);
}

}  // namespace switchyard
