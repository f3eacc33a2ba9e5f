#pragma once
// One decoder layer: input norm, attention, post-attention norm and the feed-forward block (a
// dense MLP or a MoE block), each built by the implementation the plan gives it
// (operators/model/implementation_builders.h). The residual stream comes to the layer's device (the
// transfer_map's) first; the two halves may sit on different devices, and the stream moves to the
// feed-forward half's before it runs.
#include <cstdint>
#include <memory>

#include "operators/ops/attention_op.h"
#include "operators/ops/build_context.h"
#include "operators/ops/feed_forward_op.h"
#include "operators/ops/linear_op.h"
#include "operators/model/residual_stream.h"

namespace switchyard {

class DecoderLayer {
 public:
  DecoderLayer(const BuildContext& context, const Module& layer);
  // Runs the layer on the stream's tokens (both residual additions), moving it to each half's
  // device first.
  void forward(ResidualStream& stream, std::int64_t tokens, std::int64_t position);
  const AttentionOp& attention() const { return *attention_; }
  Device attention_device() const { return attention_->device(); }
  Device feed_forward_device() const { return feed_forward_->device(); }

 private:
  Tracer* tracer_;
  int layer_;
  Device device_;  // the plan's layer_device: where the residual stream comes to for this layer
  bool moe_;
  std::int64_t hidden_size_;
  std::unique_ptr<AttentionOp> attention_;
  std::unique_ptr<FeedForwardOp> feed_forward_;
  DeviceRuntime *attention_gpu_ = nullptr, *feed_forward_gpu_ = nullptr;  // nullptr: the CPU
  NormOp input_norm_, post_attention_norm_;  // on their half's device
};

}  // namespace switchyard
