#include "operators/ops/attention_op.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "operators/ops/feed_forward_op.h"

namespace switchyard {

RopeFrequencies rope_frequencies(const ModelConfig& c, int rope_dim) {
  if (!c.rope_scaling || c.rope_scaling->type != "yarn") {
    if (c.rope_scaling && c.rope_scaling->type != "default")
      throw InputError(c.source + ": rope scaling '" + c.rope_scaling->type + "' is not supported yet (yarn is)");
    return rope_frequencies_default(rope_dim, c.rope_theta);
  }
  const RopeScaling& r = *c.rope_scaling;
  YarnConfig y;
  y.rope_dim = rope_dim;
  y.theta = c.rope_theta;
  y.factor = r.factor;
  y.original_max_position_embeddings = static_cast<double>(r.original_max_position_embeddings);
  y.beta_fast = r.beta_fast;
  y.beta_slow = r.beta_slow;
  y.mscale = r.mscale;
  y.mscale_all_dim = r.mscale_all_dim;
  return rope_frequencies_yarn(y);
}

float mla_softmax_scale(const ModelConfig& c) {
  // 1/sqrt(q head width), times YaRN's mscale(factor, mscale_all_dim)^2.
  double scale = 1.0 / std::sqrt(static_cast<double>(c.qk_nope_head_dim + c.qk_rope_head_dim));
  if (c.rope_scaling && c.rope_scaling->type == "yarn" && c.rope_scaling->mscale_all_dim != 0.0) {
    const double m = yarn_get_mscale(c.rope_scaling->factor, c.rope_scaling->mscale_all_dim);
    scale *= m * m;
  }
  return static_cast<float>(scale);
}

void check_context(std::int64_t position, std::int64_t tokens, std::int64_t max_context) {
  if (position + tokens > max_context)
    throw InputError("the KV cache holds " + std::to_string(max_context) + " tokens, but position " +
                     std::to_string(position + tokens) + " was asked for; raise --max_context");
}

MlaProjections::MlaProjections(const BuildContext& context, const Module& self_attn) {
  const ModelConfig& c = context.tree.config();
  heads_ = c.num_attention_heads;
  nope_ = c.qk_nope_head_dim;
  rope_ = c.qk_rope_head_dim;
  v_dim_ = c.v_head_dim;
  latent_ = c.kv_lora_rank;
  has_q_lora_ = c.q_lora_rank.has_value();
  const float eps = static_cast<float>(c.rms_norm_eps);
  if (has_q_lora_) {
    q_a_ = LinearOp(context, context.child(self_attn, "q_a_proj"));
    q_a_norm_ = NormOp(context, context.child(self_attn, "q_a_layernorm"), eps);
    q_b_ = LinearOp(context, context.child(self_attn, "q_b_proj"));
  } else {
    q_ = LinearOp(context, context.child(self_attn, "q_proj"));
  }
  kv_a_ = LinearOp(context, context.child(self_attn, "kv_a_proj_with_mqa"));
  kv_a_norm_ = NormOp(context, context.child(self_attn, "kv_a_layernorm"), eps);
  o_ = LinearOp(context, context.child(self_attn, "o_proj"));
  scale_ = mla_softmax_scale(c);
}

GqaProjections::GqaProjections(const BuildContext& context, const Module& self_attn) {
  const ModelConfig& c = context.tree.config();
  heads_ = c.num_attention_heads;
  kv_heads_ = c.num_key_value_heads;
  head_dim_ = c.head_dim;
  rope_dim_ = c.rope_dim();
  q_ = LinearOp(context, context.child(self_attn, "q_proj"));
  k_ = LinearOp(context, context.child(self_attn, "k_proj"));
  v_ = LinearOp(context, context.child(self_attn, "v_proj"));
  o_ = LinearOp(context, context.child(self_attn, "o_proj"));
  if (c.qk_norm) {
    const float eps = static_cast<float>(c.rms_norm_eps);
    q_norm_ = std::make_unique<NormOp>(context, context.child(self_attn, "q_norm"), eps);
    k_norm_ = std::make_unique<NormOp>(context, context.child(self_attn, "k_norm"), eps);
  }
  scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
}

}  // namespace switchyard
