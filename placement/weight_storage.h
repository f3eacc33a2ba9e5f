#pragma once
// The dtype a module's weight has on the device that holds it: what the operators there multiply.
// The memory estimate counts these bytes and the model's builders load these copies, both from
// this one rule, so `check` and `run` agree.
//
//   CPU: as stored (its linear kernels and experts read ggml blocks in place from the mapping).
//   The token embedding, on any device: as stored; its rows are decoded as tokens ask for them,
//        on the CPU or by the GPU's gather (which reads a CPU table's pages over the bus).
//   GPU: ggml blocks stay as stored for a projection whose placement runs linear.gpu.quant
//        (KLinearMarlin) in a phase on a GPU: its GEMV decodes them in registers, and a prefill
//        that runs KLinearTorch dequantizes bounded chunks per call. Likewise a routed expert's
//        projections when its layer's experts run experts.gpu.quant (KExpertsMarlin) there, gate
//        and up of one block type (one kernel decodes both; when they differ both become bf16).
//        Some projections always become bf16 at load instead: MLA's kv_b_proj (its key half is
//        transposed into the absorbed query, its value half multiplied per head) and a MoE router
//        (widened to f32 on a GPU, since the top-k choice is where rounding could change which
//        experts run). Every other GPU weight in blocks becomes bf16 at load (KLinearTorch,
//        KExpertsTorch, norms).
//   Plain dtypes (f32, bf16, f16) are counted as stored.
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "placement/placement_plan.h"

namespace switchyard {

// The dtype of `module`'s weight stored as `stored` when `device` holds it under `plan`.
DType resident_dtype(const PlacementPlan& plan, int module, DType stored, Device device);

// The devices that hold the weights of the modules `owner` owns: its decode device, and its
// prefill device where that differs (the model keeps a copy there: GpuMoeOp uploads every routed
// expert of a layer whose prefill_device is its GPU).
std::vector<Device> weight_devices(const ModulePlacement& owner);

// Fills plan.resident: every parameter of every module, in its resident dtype on each device of
// weight_devices(its owner), from the dtype the tree says it is stored as; the plan must have placed
// every module and resolved its implementations (plan_placement does both, then calls this), so
// the memory estimate, `check`'s report and the model's builders all read the one answer.
void resolve_resident_weights(PlacementPlan& plan);

}  // namespace switchyard
