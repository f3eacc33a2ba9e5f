#pragma once
// Feed-forward operators of a decoder layer: the dense SwiGLU MLP, and the MoE block (router,
// routed experts, shared experts).
#include <memory>
#include <vector>

#include "operators/build_context.h"
#include "operators/cpu/moe_gate.h"
#include "operators/linear_op.h"
#include "operators/pending_delta.h"

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

// down(silu(gate(x)) * up(x)); DeepSeek's dense MLP and shared experts, Qwen3's dense layers. On
// the CPU or a GPU, with its projections on the block's device.
class MlpOp final : public FeedForwardOp {
 public:
  MlpOp(const BuildContext& context, const Module& mlp, const char* gate = "gate_proj", const char* up = "up_proj",
        const char* down = "down_proj");
  void forward(const float* x, std::int64_t tokens, float* out) override;
  Device device() const override { return gate_.device(); }
  // The projections, for launches that run part of the block beside other work.
  const LinearOp& gate_proj() const { return gate_; }
  // Whether gate, up and SiLU-mul can be one GPU launch (cuda::gemv_swiglu, router_gate's side
  // blocks): one weight dtype and no bias (the fused kernels add none).
  bool gate_up_fusable() const;
  const LinearOp& up_proj() const { return up_; }
  const LinearOp& down_proj() const { return down_; }

 private:
  LinearOp gate_, up_, down_;
};

// The routed experts of one layer as one operator over all experts: tokens are grouped by expert
// and each expert's projections run once over its group. Weights stay in the checkpoint mapping.
class RoutedExperts {
 public:
  struct Expert {
    LinearOp gate, up, down;  // [inter, hidden], [inter, hidden], [hidden, inter]
  };
  // The experts' weights used in place from the checkpoint mapping, on the CPU.
  RoutedExperts(const BuildContext& context, const Module& experts);
  explicit RoutedExperts(std::vector<Expert> experts);
  // x: [tokens, hidden]; ids, weights: [tokens, top_k]; out: [tokens, hidden] (overwritten)
  // Host memory.
  void forward(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights, int top_k,
               float* out) const;

 private:
  // Decode: at most this many (token, slot) pairs go through one fused parallel region.
  static constexpr std::int64_t kFusedSlots = 16;
  void forward_fused(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights, int top_k,
                     float* out) const;

  std::vector<Expert> experts_;
  std::int64_t hidden_ = 0;
};

class MoeOp final : public FeedForwardOp {
 public:
  MoeOp(const BuildContext& context, const Module& moe);
  void forward(const float* x, std::int64_t tokens, float* out) override;
  Device device() const override { return Device::cpu(); }

 private:
  Tracer* tracer_;
  int layer_;
  LinearOp router_;                       // gate weight [n_experts, hidden]
  std::vector<float> correction_bias_;    // DeepSeek-V3 e_score_correction_bias, or empty
  cpu::MoeGateConfig gate_;
  RoutedExperts experts_;
  std::unique_ptr<MlpOp> shared_;
};

// The router's configuration for the model's family; `bias` is DeepSeek-V3's correction bias
// ([n_experts] f32, host or device memory as the gate kernel needs) or nullptr.
cpu::MoeGateConfig gate_config(const ModelConfig& config, const float* bias);
// Mixtral names its projections w1 (gate), w3 (up), w2 (down).
struct ExpertNames {
  const char *gate, *up, *down;
};
ExpertNames expert_names(const ModelConfig& config);

// InputError unless `part` (a projection, a norm, a router) runs on `block`'s device.
void require_same_device(const BuildContext& context, const Module& block, const Module& part);

}  // namespace switchyard
