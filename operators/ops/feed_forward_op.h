#pragma once
// The feed-forward block of a decoder layer as the layer sees it (a dense MLP, operators/ops/mlp_op.h;
// a MoE block on the CPU, operators/cpu/moe_op.h, or on a GPU, operators/cuda/gpu_moe_op.h), and what the
// blocks share: the family's router configuration and expert projection names, and the rule that
// a block's parts run where it does.
#include <memory>
#include <vector>

#include "operators/ops/build_context.h"
#include "operators/ops/moe_gate_config.h"
#include "operators/ops/pending_delta.h"

namespace switchyard {

class FeedForwardOp {
 public:
  virtual ~FeedForwardOp() = default;
  // x: [tokens, hidden] f32 (normalised) -> out: [tokens, hidden] f32, both on device().
  virtual void forward(const float* x, std::int64_t tokens, float* out) = 0;
  // As forward, for a caller that adds the output to the residual stream later (in the next norm's
  // launch): returns what is to be added, `out` or a part of it left on the host (pending_delta.h).
  virtual PendingDelta forward_deferred(const float* x, std::int64_t tokens, float* out) {
    forward(x, tokens, out);
    return PendingDelta{out};
  }
  virtual Device device() const = 0;
};

// The router's configuration: the family's gate scheme (core/model_family.h) for this config.
// `bias` is the router's e_score_correction_bias ([n_experts] f32, host or device memory as the
// gate kernel needs), used where the scheme adds one, or nullptr.
MoeGateConfig gate_config(const ModelConfig& config, const float* bias);
// The routed experts' projection names, as the family gives them (Mixtral: w1, w3, w2).
using ExpertNames = ProjectionNames;
ExpertNames expert_names(const ModelConfig& config);

// InputError unless `part` (a projection, a norm, a router) runs on `block`'s device.
void require_same_device(const BuildContext& context, const Module& block, const Module& part);

}  // namespace switchyard
