// The CUDA backend: the blocks it builds on a GPU (operators/ops/backend.h). Routed experts that a
// GPU MoE block leaves on the CPU come from the CPU backend (build_host_experts).
#include "operators/cuda/gpu_attention_op.h"
#include "operators/cuda/gpu_moe_op.h"
#include "operators/cuda/gpu_runtime.h"
#include "operators/ops/backend.h"
#include "operators/ops/mlp_op.h"

namespace switchyard {
namespace {

constexpr BuilderEntry<AttentionBuilder> kAttention[] = {
    {Implementation::mla_gpu, &construct<GpuMlaAttention, AttentionOp>},
    {Implementation::gqa_gpu, &construct<GpuGqaAttention, AttentionOp>},
};
// A dense MLP runs on its projections' device, so MlpOp serves both backends.
constexpr BuilderEntry<FeedForwardBuilder> kFeedForward[] = {
    {Implementation::mlp_gpu, &construct<MlpOp, FeedForwardOp>},
    {Implementation::moe_gpu, &construct<GpuMoeOp, FeedForwardOp>},
};
// LinearOp and NormOp on a GPU, GpuMoeOp's router and its expert stack (floats or blocks).
constexpr Implementation kParts[] = {Implementation::linear_gpu,  Implementation::linear_gpu_quant,
                                     Implementation::rms_norm_gpu, Implementation::gate_gpu,
                                     Implementation::experts_gpu, Implementation::experts_gpu_quant};

std::unique_ptr<Accelerators> make_runtimes(std::int64_t max_tokens, const DeviceMap& map) {
  return std::make_unique<DeviceRuntimes>(max_tokens, map);
}

}  // namespace

const Backend& cuda_backend() {
  static const Backend backend{"cuda", kAttention, kFeedForward, {}, kParts, &make_runtimes};
  return backend;
}

}  // namespace switchyard
