#include "operators/model/implementation_builders.h"

#include <array>
#include <string>

#include "core/error.h"
#include "operators/blocks/mlp_op.h"
#include "operators/blocks/moe_op.h"

#ifndef SWITCHYARD_HAVE_CUDA
#define SWITCHYARD_HAVE_CUDA 0
#endif
#if SWITCHYARD_HAVE_CUDA
#include "operators/blocks/gpu_attention_op.h"
#include "operators/blocks/gpu_moe_op.h"
#endif

namespace switchyard {
namespace {

using AttentionBuilder = std::unique_ptr<AttentionOp> (*)(const BuildContext&, const Module&);
using FeedForwardBuilder = std::unique_ptr<FeedForwardOp> (*)(const BuildContext&, const Module&);

template <class Op, class Base>
std::unique_ptr<Base> construct(const BuildContext& context, const Module& module) {
  return std::make_unique<Op>(context, module);
}

struct AttentionEntry {
  Implementation implementation;
  AttentionBuilder build;
};
struct FeedForwardEntry {
  Implementation implementation;
  FeedForwardBuilder build;
};

constexpr std::array kAttention = {
    AttentionEntry{Implementation::mla_cpu, &construct<MlaAttention, AttentionOp>},
    AttentionEntry{Implementation::gqa_cpu, &construct<GqaAttention, AttentionOp>},
#if SWITCHYARD_HAVE_CUDA
    AttentionEntry{Implementation::mla_gpu, &construct<GpuMlaAttention, AttentionOp>},
    AttentionEntry{Implementation::gqa_gpu, &construct<GpuGqaAttention, AttentionOp>},
#endif
};

// MLP and shared-expert blocks run on their projections' device, CPU or GPU alike.
constexpr std::array kFeedForward = {
    FeedForwardEntry{Implementation::mlp_cpu, &construct<MlpOp, FeedForwardOp>},
    FeedForwardEntry{Implementation::mlp_gpu, &construct<MlpOp, FeedForwardOp>},
    FeedForwardEntry{Implementation::moe_cpu, &construct<MoeOp, FeedForwardOp>},
#if SWITCHYARD_HAVE_CUDA
    FeedForwardEntry{Implementation::moe_gpu, &construct<GpuMoeOp, FeedForwardOp>},
#endif
};

// The one implementation of a block that runs in the same place in both phases.
Implementation one_implementation(const BuildContext& context, const Module& block) {
  context.device_of(block);  // InputError when the profile gives it two devices
  return context.implementation(block).generate;
}

[[noreturn]] void no_builder(const BuildContext& context, const Module& block, Implementation implementation) {
  const Device device = context.device_of(block);
  if (device.is_cuda()) context.gpu(device);  // throws in a build without the CUDA backend
  throw InputError("the profile runs " + std::string(block.name) + " as " + implementation_name(implementation) +
                   ", which Switchyard cannot build for a module of class " + block.cls->name);
}

template <class Entries>
auto find_builder(const Entries& entries, Implementation implementation) -> decltype(entries[0].build) {
  for (const auto& entry : entries)
    if (entry.implementation == implementation) return entry.build;
  return nullptr;
}

}  // namespace

std::unique_ptr<AttentionOp> build_attention(const BuildContext& context, const Module& self_attn) {
  for (int child : self_attn.children)
    if (!context.tree.at(child).params.empty()) require_same_device(context, self_attn, context.tree.at(child));
  const Implementation implementation = one_implementation(context, self_attn);
  const AttentionBuilder build = find_builder(kAttention, implementation);
  if (!build) no_builder(context, self_attn, implementation);
  context.record(self_attn, {implementation, implementation});
  return build(context, self_attn);
}

std::unique_ptr<FeedForwardOp> build_feed_forward(const BuildContext& context, const Module& block) {
  const Implementation implementation = one_implementation(context, block);
  const FeedForwardBuilder build = find_builder(kFeedForward, implementation);
  if (!build) no_builder(context, block, implementation);
  context.record(block, {implementation, implementation});
  return build(context, block);
}

bool has_builder(Implementation implementation) {
  if (find_builder(kAttention, implementation) || find_builder(kFeedForward, implementation)) return true;
  switch (implementation) {
    // Parts that the blocks above build themselves.
    case Implementation::none:           // containers: the model walks into them
    case Implementation::embedding:      // CausalLM
    case Implementation::decoder_stack:  // CausalLM
    case Implementation::rotary:         // the attention that owns the tables
    case Implementation::linear_cpu:     // LinearOp, for every projection
    case Implementation::rms_norm_cpu:   // NormOp
    case Implementation::gate_cpu:       // MoeOp
    case Implementation::experts_cpu:    // RoutedExperts, under MoeOp or GpuMoeOp's hand-off
      return true;
    case Implementation::linear_gpu:
    case Implementation::linear_gpu_quant:
    case Implementation::rms_norm_gpu:
    case Implementation::gate_gpu:     // GpuMoeOp
    case Implementation::experts_gpu:        // GpuMoeOp's expert stack
    case Implementation::experts_gpu_quant:  // the same, in blocks
      return SWITCHYARD_HAVE_CUDA;
    default: return false;
  }
}

}  // namespace switchyard
