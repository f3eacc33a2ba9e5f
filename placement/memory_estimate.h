#pragma once
// Per-device memory a plan needs: the weights each device holds (a module's weights live where
// its owning operator runs, in decode and in prefill: routed experts that run on the CPU in one
// phase and on a GPU in the other are held by both) plus the KV cache of the attention layers it
// runs, for --max_context tokens in the cache's dtype, plus the CPU experts' prefill buffers.
// Checked against --gpu_memory / --cpu_memory budgets. The KV cache bytes are exactly what run
// allocates: both come from kv_cache_layout (core/kv_cache_layout.h).
#include <cstdint>
#include <optional>
#include <vector>

#include "core/device.h"
#include "core/device_map.h"
#include "core/diagnostics.h"
#include "core/kv_cache_layout.h"
#include "placement/placement_plan.h"
#include "placement/weight_storage.h"  // weight_devices

namespace switchyard {

struct DeviceMemory {
  Device device;
  std::uint64_t weight_bytes = 0;
  std::uint64_t one_phase_bytes = 0;  // of weight_bytes: held here for one phase only (prefill or decode)
  std::uint64_t kv_cache_bytes = 0;
  // The CPU's routed experts' prefill buffers (a chunk's rows grouped by expert: inputs, gate, up
  // and outputs in f32), kept between layers and calls: the largest layer's, for one chunk.
  std::uint64_t prefill_buffer_bytes = 0;
  // A GPU's scratch for prefill products on projections kept as ggml blocks (cuda::linear
  // dequantizes a bounded chunk of rows to bf16 at a time, quant::dequantize_chunk_rows): the
  // largest chunk of any of them, in bytes.
  std::uint64_t dequantize_buffer_bytes = 0;
  std::optional<std::uint64_t> budget_bytes;
  std::uint64_t total_bytes() const {
    return weight_bytes + kv_cache_bytes + prefill_buffer_bytes + dequantize_buffer_bytes;
  }
};

struct MemoryBudget {
  // One per GPU, or one for all; with a device_map, per physical GPU (the logical ones folded onto
  // a physical GPU share its budget).
  std::vector<std::uint64_t> gpu_bytes;
  std::optional<std::uint64_t> cpu_bytes;
  std::int64_t max_context = 4096;       // tokens of KV cache per attention layer
  std::optional<DType> kv_cache_dtype = std::nullopt;  // f32 | bf16 (--kv_cache_dtype); nullopt: the checkpoint's
  std::int64_t prefill_chunk = 512;      // most prompt tokens a forward pass (run --prefill_chunk)
  DeviceMap device_map;                  // --device_map: the physical GPU of each logical one
};

// A physical GPU that --device_map folds logical GPUs onto, and what they need together.
struct PhysicalGpuMemory {
  int gpu = 0;                  // CUDA ordinal
  std::vector<Device> logical;  // the plan's GPUs it runs, in order
  std::uint64_t total_bytes = 0;
  std::optional<std::uint64_t> budget_bytes;
};

// The KV cache of one attention layer of `config` under `budget`: its max_context and dtype
// (kv_cache_dtype with the budget's request), as BuildContext::kv_cache gives it to the operators.
KvCacheLayout kv_cache_layout(const ModelConfig& config, const MemoryBudget& budget);

// Devices in order: cuda:0.., then cpu. Every GPU below options.gpus is listed, used or not. With a
// device_map that is not the identity, the GPU budgets are the physical GPUs' (fold_memory), and
// the logical GPUs have none of their own.
std::vector<DeviceMemory> estimate_memory(const PlacementPlan& plan, const MemoryBudget& budget);
// The logical GPUs' totals summed per physical GPU of budget.device_map, with those budgets;
// empty for the identity map.
std::vector<PhysicalGpuMemory> fold_memory(const std::vector<DeviceMemory>& devices, const MemoryBudget& budget);
// Errors for devices over budget, and for physical GPUs whose folded devices are.
void check_memory(const std::vector<DeviceMemory>& devices, Diagnostics& diagnostics, const std::string& file,
                  const std::vector<PhysicalGpuMemory>& physical = {});

// An out-of-memory message from building a model ("out of memory on cuda:0: allocating ..."), with
// what the plan expected on that device and what to do; other messages come back unchanged.
std::string explain_out_of_memory(const std::string& message, const std::vector<DeviceMemory>& devices,
                                  std::int64_t max_context);

}  // namespace switchyard
