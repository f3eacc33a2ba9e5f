#include "operators/model/decoder_layer.h"

#include "core/error.h"
#include "operators/ops/activations.h"
#include "operators/model/implementation_builders.h"

namespace switchyard {

DecoderLayer::DecoderLayer(const BuildContext& context, const Module& layer)
    : tracer_(context.tracer), layer_(layer.layer), hidden_size_(context.tree.config().hidden_size) {
  const float eps = static_cast<float>(context.tree.config().rms_norm_eps);
  attention_ = build_attention(context, context.child(layer, "self_attn"));
  const Module& mlp = context.child(layer, context.tree.config().family->feed_forward_child);
  moe_ = mlp.cls->role == ModuleRole::moe;
  feed_forward_ = build_feed_forward(context, mlp);
  // The transfer_map's device for this layer is where the hidden state goes first; check refuses a
  // plan whose modules disagree with it, and a plan built without check gets the same refusal here.
  device_ = context.plan.layer_device(layer_);
  if (attention_->device() != device_)
    throw InputError(std::string(layer.name) + ".self_attn runs on " + attention_->device().str() + ", but the " +
                     (context.plan.transfer_map().empty() ? "model's device" : "transfer_map") + " puts layer " +
                     std::to_string(layer_) + " on " + device_.str(), 1);
  attention_gpu_ = context.gpu(attention_->device());
  feed_forward_gpu_ = context.gpu(feed_forward_->device());
  // A layer's norms run with the half they lead.
  input_norm_ = NormOp(context, context.child(layer, "input_layernorm"), eps, attention_->device());
  post_attention_norm_ = NormOp(context, context.child(layer, "post_attention_layernorm"), eps, feed_forward_->device());
}

void DecoderLayer::forward(ResidualStream& stream, std::int64_t tokens, std::int64_t position) {
  const std::int64_t n = tokens * hidden_size_;
  float* hidden = stream.on(device_);  // the hand-over the transfer_map names, where the layer begins
  CurrentDevice current(attention_gpu_);
  Scratch normed(attention_gpu_, n, "normalised hidden states"), delta(attention_gpu_, n, "attention output");
  // The previous layer's MLP output is added here, in the norm's launch.
  if (const PendingDelta previous = stream.take_delta(); !previous.empty())
    input_norm_.add_and_forward(hidden, previous, tokens, normed);
  else
    input_norm_.forward(hidden, tokens, normed);
  {
    const WorkScope scope(attention_gpu_, tracer_, Region::self_attention, layer_);
    attention_->forward(normed, tokens, position, delta);
  }
  const bool same_device = feed_forward_->device() == attention_->device();
  if (same_device) {
    post_attention_norm_.add_and_forward(hidden, PendingDelta{delta}, tokens, normed);  // residual + norm, one step
  } else {
    add_in_place(attention_gpu_, hidden, delta, n);
    hidden = stream.on(feed_forward_->device());
    current.switch_to(feed_forward_gpu_);
  }
  Scratch ff_normed(same_device ? nullptr : feed_forward_gpu_, same_device ? 0 : n, "normalised hidden states");
  float* ff_in = same_device ? normed.data() : ff_normed.data();
  if (!same_device) post_attention_norm_.forward(hidden, tokens, ff_in);
  // The output is added by the next norm (the next layer's, or the final one).
  float* ff_delta = stream.delta(feed_forward_->device());
  if (moe_) {
    // A MoE block times its own parts (gate, routed and shared experts, hand-offs).
    stream.defer_add(feed_forward_->forward_deferred(ff_in, tokens, ff_delta));
  } else {
    const WorkScope scope(feed_forward_gpu_, tracer_, Region::dense_mlp, layer_);
    stream.defer_add(feed_forward_->forward_deferred(ff_in, tokens, ff_delta));
  }
}

}  // namespace switchyard
