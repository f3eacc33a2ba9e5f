#include "placement/implementation.h"

#include <array>

#include "placement/placement_plan.h"

namespace switchyard {
namespace {

constexpr std::array kAll = {
    Implementation::none,         Implementation::embedding,    Implementation::rotary,
    Implementation::decoder_stack, Implementation::linear_cpu,  Implementation::linear_gpu,
    Implementation::linear_gpu_quant,
    Implementation::rms_norm_cpu, Implementation::rms_norm_gpu, Implementation::mlp_cpu,
    Implementation::mlp_gpu,      Implementation::gate_cpu,     Implementation::gate_gpu,
    Implementation::experts_cpu,  Implementation::experts_gpu,  Implementation::experts_gpu_quant,
    Implementation::moe_cpu,
    Implementation::moe_gpu,      Implementation::mla_cpu,      Implementation::mla_gpu,
    Implementation::gqa_cpu,      Implementation::gqa_gpu,
};

// The implementation `op` (with `op_name` for operators that have ops) gives `module` on `device`.
Implementation resolve(const OperatorInfo& op, const std::string& op_name, const Device& device, const ModuleTree& tree,
                       const Module& module) {
  const ModuleClass& cls = *module.cls;
  if (op.kind == OperatorKind::default_op) {
    if (cls.role == ModuleRole::embedding) return Implementation::embedding;
    // Of the module lists, only a MoE block's routed experts are one operator (model.layers is not).
    if (cls.role == ModuleRole::module_list &&
        (module.parent < 0 || tree.at(module.parent).cls->role != ModuleRole::moe))
      return Implementation::none;
    const OperatorInfo* native = native_operator(cls);
    if (!native) return Implementation::none;
    // A default placement runs the native operator's own default op for the phase's device.
    if (native->ops.empty()) return native->runs.on(device);
    for (const OpInfo& o : native->ops)
      if (o.runs.on(device) != Implementation::none) return o.runs.on(device);
    return Implementation::none;
  }
  if (op.ops.empty()) return op.runs.on(device);
  const OpInfo* chosen = op.find_op(op_name);
  return chosen ? chosen->runs.on(device) : Implementation::none;
}

}  // namespace

const char* implementation_name(Implementation implementation) {
  switch (implementation) {
    case Implementation::none: return "none";
    case Implementation::embedding: return "embedding";
    case Implementation::rotary: return "rotary";
    case Implementation::decoder_stack: return "decoder-stack";
    case Implementation::linear_cpu: return "linear.cpu";
    case Implementation::linear_gpu: return "linear.gpu";
    case Implementation::linear_gpu_quant: return "linear.gpu.quant";
    case Implementation::rms_norm_cpu: return "rms-norm.cpu";
    case Implementation::rms_norm_gpu: return "rms-norm.gpu";
    case Implementation::mlp_cpu: return "mlp.cpu";
    case Implementation::mlp_gpu: return "mlp.gpu";
    case Implementation::gate_cpu: return "gate.cpu";
    case Implementation::gate_gpu: return "gate.gpu";
    case Implementation::experts_cpu: return "experts.cpu";
    case Implementation::experts_gpu: return "experts.gpu";
    case Implementation::experts_gpu_quant: return "experts.gpu.quant";
    case Implementation::moe_cpu: return "moe.cpu";
    case Implementation::moe_gpu: return "moe.gpu";
    case Implementation::mla_cpu: return "mla.cpu";
    case Implementation::mla_gpu: return "mla.gpu";
    case Implementation::gqa_cpu: return "gqa.cpu";
    case Implementation::gqa_gpu: return "gqa.gpu";
  }
  return "none";
}

std::span<const Implementation> all_implementations() { return kAll; }

PhaseImplementations implementation_of(const PlacementPlan& plan, int module) {
  const ModulePlacement* own = plan.placement_of(module);
  const ModulePlacement& p = own ? *own : plan.owner_of(module);
  const ModuleTree& tree = *plan.tree;
  // A module under a `recursive: false` placement is part of its owner's implementation.
  const Module& subject = own || p.op->kind == OperatorKind::default_op ? tree.at(module) : tree.at(p.module);
  const OperatorInfo& op = own || p.op->kind != OperatorKind::default_op ? *p.op : default_operator();
  return {resolve(op, p.generate_op, p.generate_device, tree, subject),
          resolve(op, p.prefill_op, p.prefill_device, tree, subject)};
}

}  // namespace switchyard
