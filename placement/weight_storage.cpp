#include "placement/weight_storage.h"

#include <optional>
#include <string_view>

#include "core/model_family.h"
#include "placement/implementation.h"

namespace switchyard {
namespace {

// The stored dtype of `expert`'s projection `name`, or nullopt.
std::optional<DType> projection_dtype(const ModuleTree& tree, const Module& expert, std::string_view name) {
  for (int child : expert.children) {
    const Module& m = tree.at(child);
    if (m.local_name() == name && !m.params.empty()) return m.params.front().dtype;
  }
  return std::nullopt;
}

// Whether a routed expert's projection stored as `stored` keeps its blocks in an experts.gpu.quant
// stack: gate and up run in one kernel on one block type, so they must share it (else both become
// bf16); down has its own.
bool expert_keeps_blocks(const ModuleTree& tree, const Module& module, DType stored) {
  const ProjectionNames& names = tree.config().family->expert_projections;
  const std::string_view local = module.local_name();
  if (local == names.down || module.parent < 0) return true;
  const std::string_view other = local == names.gate ? names.up : names.gate;
  const std::optional<DType> sibling = projection_dtype(tree, tree.at(module.parent), other);
  return !sibling || *sibling == stored;
}

// Projections whose GPU operator needs plain floats whatever the rule says (weight_storage.h).
bool needs_floats_on_gpu(const ModuleTree& tree, const Module& module) {
  if (module.parent < 0) return false;
  const Module& parent = tree.at(module.parent);
  if (module.local_name() == "kv_b_proj" && parent.cls->role == ModuleRole::attention &&
      tree.config().attention() == AttentionKind::mla)
    return true;
  return module.local_name() == "gate" && parent.cls->role == ModuleRole::moe;
}

}  // namespace

DType resident_dtype(const PlacementPlan& plan, int module, DType stored, Device device) {
  if (stored == DType::f8_e4m3) return DType::bf16;  // block-scaled FP8 is dequantized at load
  if (!is_block_quantized(stored)) return stored;
  const Module& m = plan.tree->at(module);
  // The embedding's rows are decoded from their blocks where they are gathered (CausalLM on the
  // CPU, cuda::embedding on a GPU or from the CPU's pages in a decode graph).
  if (device.is_cpu() || m.cls->role == ModuleRole::embedding) return stored;
  if (m.cls->role != ModuleRole::linear || needs_floats_on_gpu(*plan.tree, m)) return DType::bf16;
  // A routed expert's projection is part of its layer's experts operator (experts.gpu.quant keeps
  // blocks); any other projection is its own (linear.gpu.quant).
  const bool expert = m.expert >= 0;
  if (expert && !expert_keeps_blocks(*plan.tree, m, stored)) return DType::bf16;
  // The operator that multiplies the weight: the layer's routed-experts container (projection ->
  // expert -> container) for an expert's projection, else the projection itself.
  const int op_module = expert && m.parent >= 0 && plan.tree->at(m.parent).parent >= 0 ? plan.tree->at(m.parent).parent
                                                                                       : module;
  const Implementation quant = expert ? Implementation::experts_gpu_quant : Implementation::linear_gpu_quant;
  const PhaseImplementations runs = plan.implementation(op_module);
  const ModulePlacement& owner = plan.owner_of(op_module);
  const bool keeps = (runs.generate == quant && owner.generate_device == device) ||
                     (runs.prefill == quant && owner.prefill_device == device);
  return keeps ? stored : DType::bf16;
}

std::vector<Device> weight_devices(const ModulePlacement& owner) {
  if (owner.prefill_device == owner.generate_device) return {owner.generate_device};
  return {owner.generate_device, owner.prefill_device};
}

void resolve_resident_weights(PlacementPlan& plan) {
  const ModuleTree& tree = *plan.tree;
  plan.resident.assign(tree.size(), {});
  for (int i = 0; i < static_cast<int>(tree.size()); ++i) {
    const Module& module = tree.at(i);
    if (module.params.empty() || plan.weight_owner[static_cast<std::size_t>(i)] < 0) continue;
    std::vector<ResidentWeight>& entries = plan.resident[static_cast<std::size_t>(i)];
    for (const Device& device : weight_devices(plan.owner_of(i)))
      for (std::size_t param = 0; param < module.params.size(); ++param)
        entries.push_back(ResidentWeight{device, static_cast<int>(param),
                                         resident_dtype(plan, i, module.params[param].dtype, device)});
  }
}

}  // namespace switchyard
