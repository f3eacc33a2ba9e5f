#include "placement/weight_storage.h"

#include "core/model_family.h"
#include "placement/implementation.h"

namespace switchyard {
namespace {

// Projections whose GPU operator needs plain floats whatever the rule says (weight_storage.h).
bool needs_floats_on_gpu(const ModuleTree& tree, const Module& module) {
  if (module.expert >= 0) return true;  // a routed expert's projection: GpuMoeOp's bf16 stack
  if (module.parent < 0) return false;
  const Module& parent = tree.at(module.parent);
  if (module.local_name() == "kv_b_proj" && parent.cls->role == ModuleRole::attention &&
      tree.config().attention() == AttentionKind::mla)
    return true;
  return module.local_name() == "gate" && parent.cls->role == ModuleRole::moe;
}

}  // namespace

DType resident_dtype(const PlacementPlan& plan, int module, DType stored, Device device) {
  if (!is_block_quantized(stored)) return stored;
  const Module& m = plan.tree->at(module);
  if (device.is_cpu()) return m.cls->role == ModuleRole::embedding ? DType::bf16 : stored;
  if (m.cls->role != ModuleRole::linear || needs_floats_on_gpu(*plan.tree, m)) return DType::bf16;
  const PhaseImplementations runs = implementation_of(plan, module);
  const ModulePlacement& owner = plan.owner_of(module);
  const bool keeps = (runs.generate == Implementation::linear_gpu_quant && owner.generate_device == device) ||
                     (runs.prefill == Implementation::linear_gpu_quant && owner.prefill_device == device);
  return keeps ? stored : DType::bf16;
}

}  // namespace switchyard
