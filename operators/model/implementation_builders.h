#pragma once
// The builders of the implementations a rule can choose (placement/implementation.h): the model
// asks the plan which implementation runs each attention and feed-forward block and builds it
// with the builder a backend registered for it (operators/ops/backend.h). There is no other choice
// by device or architecture: a block whose implementation has no builder in this build (a GPU
// implementation without the CUDA backend) is an error naming it.
#include <memory>

#include "operators/ops/attention_op.h"
#include "operators/ops/build_context.h"
#include "operators/ops/feed_forward_op.h"

namespace switchyard {

// The layer's attention (an Attention-role module: MLA or GQA, on the CPU or a GPU).
std::unique_ptr<AttentionOp> build_attention(const BuildContext& context, const Module& self_attn);
// The layer's feed-forward block: a dense MLP, or a MoE block (on the CPU, or on a GPU with its
// routed experts on the GPU or the CPU per phase).
std::unique_ptr<FeedForwardOp> build_feed_forward(const BuildContext& context, const Module& block);
// Whether this build has a builder for `implementation` (tests list them against the registry).
bool has_builder(Implementation implementation);

}  // namespace switchyard
