#pragma once
// What building the placed operators needs: the module tree, the placement plan that says where
// each module runs, and the checkpoint that holds the weights. Weights are requested with the
// shape the tree (config.json) predicts, so a checkpoint that disagrees fails with the tensor's
// name before anything runs.
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/checkpoint.h"
#include "core/kv_cache_layout.h"
#include "core/module_tree.h"
#include "core/trace.h"
#include "placement/implementation.h"
#include "placement/placement_plan.h"

namespace switchyard {

class Accelerators;
class DeviceRuntime;

// What the builders built: for each module that got an operator of its own (attention, MLP and
// MoE blocks, routed experts, norms, projections), the implementation that runs it in each phase,
// in build order. Equal to the plan's implementation_of for each of them, by construction; the
// tests hold it to that.
struct BuiltImplementations {
  std::vector<std::pair<int, PhaseImplementations>> modules;  // (module index, implementations)
};

struct BuildContext {
  const ModuleTree& tree;
  const PlacementPlan& plan;
  const Checkpoint& weights;
  std::int64_t max_context = 4096;  // KV-cache length in tokens
  Tracer* tracer = nullptr;         // NVTX ranges and profile events; nullptr: none
  Accelerators* runtimes = nullptr;  // the devices' runtimes; set by CausalLM when the build has a GPU backend
  BuiltImplementations* built = nullptr;  // filled by the builders when set
  std::optional<DType> kv_cache_dtype = std::nullopt;  // f32 | bf16 (--kv_cache_dtype); nullopt: the checkpoint's

  const Module& child(const Module& parent, std::string_view local_name) const;
  // Every attention layer's KV cache: kv_cache_layout for this model, max_context and dtype (the
  // same call check's memory estimate makes).
  KvCacheLayout kv_cache() const;
  // The module's parameter `name` from the checkpoint, in one of `dtypes`: as stored, or, when
  // stored as quantised blocks or 16-bit floats that `dtypes` leaves out, dequantized to bf16 or
  // f32 (a copy; bf16 where `dtypes` has it, f32 for f16 weights).
  Tensor param(const Module& module, std::string_view name, std::initializer_list<DType> dtypes) const;
  Tensor param(const Module& module, std::string_view name, std::span<const DType> dtypes) const;
  // The dtype that `device` holds the module's parameter `name` in (placement/weight_storage.h):
  // the checkpoint's blocks where the plan keeps them there, else what param() converts them to.
  DType resident_dtype(const Module& module, std::string_view name, Device device) const;
  // The same converted to f32 (small tensors: norms, biases).
  std::vector<float> param_f32(const Module& module, std::string_view name) const;
  // Where the plan runs `module` (the device of the placement that owns its weights) in decode
  // and in prefill.
  Device generate_device(const Module& module) const;
  Device prefill_device(const Module& module) const;
  // The one device of a module that runs in the same place in both phases; InputError naming the
  // module when the profile gives it two (only routed experts may differ).
  Device device_of(const Module& module) const;
  // The implementation the plan gives `module` in each phase (placement/implementation.h).
  PhaseImplementations implementation(const Module& module) const;
  // Notes that `module` is built with `implementation` (into `built`, when set).
  void record(const Module& module, PhaseImplementations implementation) const;
  int index_of(const Module& module) const { return static_cast<int>(&module - tree.modules().data()); }
  // The runtime of a GPU, nullptr for the CPU. InputError when this build has no CUDA backend or
  // the device is absent.
  DeviceRuntime* gpu(Device device) const;
};

}  // namespace switchyard
