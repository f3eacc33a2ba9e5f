// The CPU backend: the blocks it builds on the host, and the routed experts it runs there under a
// GPU's MoE block (operators/ops/backend.h).
#include "operators/cpu/attention.h"
#include "operators/cpu/moe_op.h"
#include "operators/cpu/routed_experts.h"
#include "operators/ops/backend.h"
#include "operators/ops/mlp_op.h"

namespace switchyard {
namespace {

constexpr BuilderEntry<AttentionBuilder> kAttention[] = {
    {Implementation::mla_cpu, &construct<MlaAttention, AttentionOp>},
    {Implementation::gqa_cpu, &construct<GqaAttention, AttentionOp>},
};
constexpr BuilderEntry<FeedForwardBuilder> kFeedForward[] = {
    {Implementation::mlp_cpu, &construct<MlpOp, FeedForwardOp>},
    {Implementation::moe_cpu, &construct<MoeOp, FeedForwardOp>},
};
constexpr BuilderEntry<HostExpertsBuilder> kHostExperts[] = {
    {Implementation::experts_cpu, &construct<RoutedExperts, ExpertsWork>},
};
// LinearOp and NormOp for every projection and norm, MoeOp's router, RoutedExperts.
constexpr Implementation kParts[] = {Implementation::linear_cpu, Implementation::rms_norm_cpu, Implementation::gate_cpu,
                                     Implementation::experts_cpu};

}  // namespace

const Backend& cpu_backend() {
  static const Backend backend{"cpu", kAttention, kFeedForward, kHostExperts, kParts};
  return backend;
}

}  // namespace switchyard
