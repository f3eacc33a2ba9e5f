#pragma once
// The seam between the model and its devices. A backend (operators/cpu/, operators/cuda/; a ROCm or
// Metal one would be a folder beside them) says which of the implementations a rule can choose
// (placement/implementation.h) it builds, and builds them: the attention and feed-forward blocks a
// decoder layer holds, the routed experts that run on the host under another device's MoE block, and
// the parts (projections, norms, routers) that those blocks build inside themselves. The model asks
// backends() for a builder and never names a backend; which backends a build has is CMake's
// choice (operators/model/backends.cpp.in), not the preprocessor's.
#include <memory>
#include <span>

#include "core/device_map.h"
#include "operators/ops/attention_op.h"
#include "operators/ops/build_context.h"
#include "operators/ops/device_runtime.h"
#include "operators/ops/experts_work.h"
#include "operators/ops/feed_forward_op.h"
#include "placement/implementation.h"

namespace switchyard {

using AttentionBuilder = std::unique_ptr<AttentionOp> (*)(const BuildContext&, const Module&);
using FeedForwardBuilder = std::unique_ptr<FeedForwardOp> (*)(const BuildContext&, const Module&);
using HostExpertsBuilder = std::unique_ptr<ExpertsWork> (*)(const BuildContext&, const Module&);

template <class Builder>
struct BuilderEntry {
  Implementation implementation;
  Builder build;
};

struct Backend {
  const char* name;  // "cpu", "cuda"
  std::span<const BuilderEntry<AttentionBuilder>> attention;       // Attention-role modules
  std::span<const BuilderEntry<FeedForwardBuilder>> feed_forward;  // MLP and MoE blocks
  // Routed experts in host memory, run by another backend's MoE block between its launches.
  std::span<const BuilderEntry<HostExpertsBuilder>> host_experts;
  // Implementations the blocks above build inside themselves (projections, norms, routers).
  std::span<const Implementation> parts;
  // A backend with devices of its own: the runtimes of a model's devices, for passes of at most
  // `max_tokens` tokens, logical device i on physical `map`[i]; nullptr for the CPU's.
  std::unique_ptr<Accelerators> (*accelerators)(std::int64_t max_tokens, const DeviceMap& map) = nullptr;
};

// The backends of this build, the CPU's first (generated from operators/model/backends.cpp.in).
std::span<const Backend* const> backends();

// The first builder for `implementation` among backends()' `entries`, or nullptr.
template <class Builder>
Builder find_builder(std::span<const BuilderEntry<Builder>> Backend::*entries, Implementation implementation) {
  for (const Backend* backend : backends())
    for (const BuilderEntry<Builder>& entry : backend->*entries)
      if (entry.implementation == implementation) return entry.build;
  return nullptr;
}

// The runtimes of the build's backend with devices of its own (the first, where a build had
// several), or nullptr when it has none: every module then runs on the CPU.
std::unique_ptr<Accelerators> make_accelerators(std::int64_t max_tokens, const DeviceMap& map);

// Routed experts `experts` (implementation experts.cpu) in host memory, for a MoE block on another
// device; InputError when this build has no backend that holds them there.
std::unique_ptr<ExpertsWork> build_host_experts(const BuildContext& context, const Module& experts);

// The builder most entries are: Op constructed from the context and the module.
template <class Op, class Base>
std::unique_ptr<Base> construct(const BuildContext& context, const Module& module) {
  return std::make_unique<Op>(context, module);
}

}  // namespace switchyard
