#pragma once
// CausalLM: the placed model as operators. The model operator calls its decoder layers, each
// layer calls its attention and feed-forward operators, and those call their projections: the
// same tree the rules were written against, built from the PlacementPlan (there is no second
// path around the rules) with weights from the checkpoint.
#include <memory>
#include <span>
#include <vector>

#include "operators/attention_op.h"
#include "operators/build_context.h"
#include "operators/feed_forward_op.h"
#include "operators/linear_op.h"

namespace switchyard {

class DecoderLayer {
 public:
  DecoderLayer(const BuildContext& context, const Module& layer);
  // hidden: [tokens, hidden_size] f32, updated in place (both residual additions)
  void forward(float* hidden, std::int64_t tokens, std::int64_t position);
  const AttentionOp& attention() const { return *attention_; }

 private:
  Tracer* tracer_;
  int layer_;
  bool moe_;
  NormOp input_norm_, post_attention_norm_;
  std::unique_ptr<AttentionOp> attention_;
  std::unique_ptr<FeedForwardOp> feed_forward_;
  std::int64_t hidden_size_;
};

class CausalLM {
 public:
  explicit CausalLM(const BuildContext& context);

  // Runs `ids` at positions [position, position + ids.size()) and returns the logits of the last
  // token ([vocab]) or, with all_logits, of every token ([tokens, vocab]).
  std::vector<float> forward(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits = false);
  std::int64_t vocab_size() const { return vocab_; }
  std::int64_t max_context() const { return max_context_; }
  std::size_t kv_cache_bytes() const;

 private:
  Tracer* tracer_;
  Tensor embedding_;  // [vocab, hidden] f32 | bf16 | f16
  std::vector<std::unique_ptr<DecoderLayer>> layers_;
  NormOp final_norm_;
  LinearOp lm_head_;
  std::int64_t vocab_, hidden_, max_context_;
};

}  // namespace switchyard
