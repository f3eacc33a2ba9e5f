#pragma once
// What building the placed operators needs: the module tree, the placement plan that says where
// each module runs, and the checkpoint that holds the weights. Weights are requested with the
// shape the tree (config.json) predicts, so a checkpoint that disagrees fails with the tensor's
// name before anything runs.
#include <initializer_list>
#include <string_view>

#include "core/checkpoint.h"
#include "core/module_tree.h"
#include "core/trace.h"
#include "placement/placement_plan.h"

namespace switchyard {

class DeviceRuntimes;
class GpuRuntime;

struct BuildContext {
  const ModuleTree& tree;
  const PlacementPlan& plan;
  const Checkpoint& weights;
  std::int64_t max_context = 4096;  // KV-cache length in tokens
  Tracer* tracer = nullptr;         // NVTX ranges and profile events; nullptr: none
  DeviceRuntimes* runtimes = nullptr;  // the GPUs' shared state; set by CausalLM

  const Module& child(const Module& parent, std::string_view local_name) const;
  // The module's parameter `name` from the checkpoint, in one of `dtypes`.
  Tensor param(const Module& module, std::string_view name, std::initializer_list<DType> dtypes) const;
  // The same converted to f32 (small tensors: norms, biases).
  std::vector<float> param_f32(const Module& module, std::string_view name) const;
  // Where the plan runs `module` (the device of the placement that owns its weights) in decode
  // and in prefill.
  Device generate_device(const Module& module) const;
  Device prefill_device(const Module& module) const;
  // The one device of a module that runs in the same place in both phases; InputError naming the
  // module when the profile gives it two (only routed experts may differ).
  Device device_of(const Module& module) const;
  // The runtime of a GPU, nullptr for the CPU. InputError when this build has no CUDA backend or
  // the device is absent.
  GpuRuntime* gpu(Device device) const;
};

}  // namespace switchyard
