#include "operators/model/implementation_builders.h"

#include <string>

#include "core/error.h"
#include "operators/ops/backend.h"

namespace switchyard {
namespace {

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

}  // namespace

std::unique_ptr<AttentionOp> build_attention(const BuildContext& context, const Module& self_attn) {
  for (int child : self_attn.children)
    if (!context.tree.at(child).params.empty()) require_same_device(context, self_attn, context.tree.at(child));
  const Implementation implementation = one_implementation(context, self_attn);
  const AttentionBuilder build = find_builder(&Backend::attention, implementation);
  if (!build) no_builder(context, self_attn, implementation);
  context.record(self_attn, {implementation, implementation});
  return build(context, self_attn);
}

std::unique_ptr<FeedForwardOp> build_feed_forward(const BuildContext& context, const Module& block) {
  const Implementation implementation = one_implementation(context, block);
  const FeedForwardBuilder build = find_builder(&Backend::feed_forward, implementation);
  if (!build) no_builder(context, block, implementation);
  context.record(block, {implementation, implementation});
  return build(context, block);
}

bool has_builder(Implementation implementation) {
  if (find_builder(&Backend::attention, implementation) || find_builder(&Backend::feed_forward, implementation) ||
      find_builder(&Backend::host_experts, implementation))
    return true;
  for (const Backend* backend : backends())
    for (Implementation part : backend->parts)
      if (part == implementation) return true;
  switch (implementation) {
    // Parts that the model builds itself.
    case Implementation::none:           // containers: the model walks into them
    case Implementation::embedding:      // CausalLM
    case Implementation::decoder_stack:  // CausalLM
    case Implementation::rotary:         // the attention that owns the tables
      return true;
    default: return false;
  }
}

}  // namespace switchyard
