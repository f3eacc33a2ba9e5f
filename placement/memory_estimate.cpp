#include "placement/memory_estimate.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "core/quant_formats.h"
#include "core/units.h"
#include "placement/weight_storage.h"

namespace switchyard {

namespace {

// Bytes `module`'s weights take on `device`: each parameter in its resident dtype
// (placement/weight_storage.h). `dequantized_rows` receives the most bf16 weights that a GPU
// projection kept in blocks dequantizes at once in prefill (cuda::linear's chunk, a routed
// expert's gate and up), 0 for none.
std::uint64_t resident_bytes(const PlacementPlan& plan, int index, Device device, std::uint64_t& dequantized_rows) {
  const Module& module = plan.tree->at(index);
  std::uint64_t bytes = 0;
  for (std::size_t param = 0; param < module.params.size(); ++param) {
    const Parameter& p = module.params[param];
    const DType dtype = plan.resident_dtype(index, static_cast<int>(param), device);
    bytes += storage_bytes(dtype, p.shape.elements());
    if (device.is_cuda() && is_block_quantized(dtype) && p.shape.rank == 2) {
      const auto rows = static_cast<std::int64_t>(p.shape.dims[0]), in = static_cast<std::int64_t>(p.shape.dims[1]);
      // A routed expert's prefill holds its gate and up whole (cuda::routed_experts' workspace);
      // other projections a chunk of rows.
      const std::int64_t weights = module.expert >= 0 ? 2 * rows * in : quant::dequantize_chunk_rows(rows, in) * in;
      dequantized_rows = std::max(dequantized_rows, static_cast<std::uint64_t>(weights));
    }
  }
  return bytes;
}

}  // namespace

KvCacheLayout kv_cache_layout(const ModelConfig& config, const MemoryBudget& budget) {
  return kv_cache_layout(config, budget.max_context, kv_cache_dtype(config, budget.kv_cache_dtype));
}

std::vector<DeviceMemory> estimate_memory(const PlacementPlan& plan, const MemoryBudget& budget) {
  const ModuleTree& tree = *plan.tree;
  std::map<Device, DeviceMemory> by_device;
  for (int g = 0; g < plan.options.gpus; ++g) by_device[Device::cuda(g)].device = Device::cuda(g);
  by_device[Device::cpu()].device = Device::cpu();

  for (std::size_t i = 0; i < tree.size(); ++i) {
    const Module& module = tree.at(static_cast<int>(i));
    if (module.params.empty()) continue;
    const std::vector<Device> held_by = weight_devices(plan.owner_of(static_cast<int>(i)));
    for (const Device device : held_by) {
      DeviceMemory& memory = by_device[device];
      memory.device = device;
      std::uint64_t dequantized = 0;
      const std::uint64_t bytes = resident_bytes(plan, static_cast<int>(i), device, dequantized);
      memory.dequantize_buffer_bytes = std::max(memory.dequantize_buffer_bytes, dequantized * 2);
      memory.weight_bytes += bytes;
      if (held_by.size() > 1) memory.one_phase_bytes += bytes;
    }
  }
  // Each attention layer allocates its cache on its device (decode and prefill share it).
  const std::uint64_t kv_per_layer = kv_cache_layout(tree.config(), budget).bytes();
  for (const ModulePlacement& p : plan.visited) {
    const Module& module = tree.at(p.module);
    if (module.cls->role != ModuleRole::attention) continue;
    DeviceMemory& memory = by_device[p.generate_device];
    memory.device = p.generate_device;
    memory.kv_cache_bytes += kv_per_layer;
  }
  // Routed experts that prefill on the CPU (cpu::RoutedExperts, chunks of more than a few slots):
  // per slot (token x top-k), its input and output rows and its gate and up activations, f32.
  const ModelConfig& config = tree.config();
  for (std::size_t i = 0; i < tree.size(); ++i) {
    if (!tree.is_routed_experts(static_cast<int>(i))) continue;
    if (!plan.owner_of(static_cast<int>(i)).prefill_device.is_cpu()) continue;
    const auto slots = static_cast<std::uint64_t>(std::max<std::int64_t>(budget.prefill_chunk, 0)) *
                       static_cast<std::uint64_t>(std::max(config.num_experts_per_tok, 0));
    const auto row_floats = static_cast<std::uint64_t>(2 * config.hidden_size + 2 * config.moe_intermediate_size);
    DeviceMemory& memory = by_device[Device::cpu()];
    memory.prefill_buffer_bytes = std::max(memory.prefill_buffer_bytes, slots * row_floats * sizeof(float));
  }
  std::vector<DeviceMemory> out;
  for (auto& [device, memory] : by_device) {
    if (device.is_cuda() && !budget.gpu_bytes.empty() && budget.device_map.identity()) {
      const std::size_t slot = budget.gpu_bytes.size() == 1 ? 0 : static_cast<std::size_t>(device.index);
      if (slot < budget.gpu_bytes.size()) memory.budget_bytes = budget.gpu_bytes[slot];
    }
    if (device.is_cpu()) memory.budget_bytes = budget.cpu_bytes;
    out.push_back(memory);
  }
  // std::map orders cpu before cuda; reports list the GPUs first.
  std::stable_partition(out.begin(), out.end(), [](const DeviceMemory& m) { return m.device.is_cuda(); });
  return out;
}

std::vector<PhysicalGpuMemory> fold_memory(const std::vector<DeviceMemory>& devices, const MemoryBudget& budget) {
  std::vector<PhysicalGpuMemory> out;
  if (budget.device_map.identity()) return out;
  std::map<int, PhysicalGpuMemory> by_gpu;
  for (const DeviceMemory& m : devices) {
    if (!m.device.is_cuda()) continue;
    PhysicalGpuMemory& gpu = by_gpu[budget.device_map.physical(m.device.index)];
    gpu.gpu = budget.device_map.physical(m.device.index);
    gpu.logical.push_back(m.device);
    gpu.total_bytes += m.total_bytes();
  }
  for (auto& [index, gpu] : by_gpu) {
    if (!budget.gpu_bytes.empty()) {
      const std::size_t slot = budget.gpu_bytes.size() == 1 ? 0 : static_cast<std::size_t>(index);
      if (slot < budget.gpu_bytes.size()) gpu.budget_bytes = budget.gpu_bytes[slot];
    }
    out.push_back(std::move(gpu));
  }
  return out;
}

void check_memory(const std::vector<DeviceMemory>& devices, Diagnostics& diagnostics, const std::string& file,
                  const std::vector<PhysicalGpuMemory>& physical) {
  for (const PhysicalGpuMemory& gpu : physical) {
    if (!gpu.budget_bytes || gpu.total_bytes <= *gpu.budget_bytes) continue;
    std::string logical;
    for (const Device d : gpu.logical) logical += (logical.empty() ? "" : ", ") + d.str();
    diagnostics.error("over-budget",
                      "GPU " + std::to_string(gpu.gpu) + " runs " + logical + " (--device_map), which need " +
                          format_bytes(gpu.total_bytes) + " together, but its budget is " +
                          format_bytes(*gpu.budget_bytes) + ", " + format_bytes(gpu.total_bytes - *gpu.budget_bytes) +
                          " too much; fold fewer logical GPUs onto it, keep the routed experts on the CPU or "
                          "shorten --max_context",
                      SourceLocation{file, 0, 0});
  }
  for (const DeviceMemory& m : devices) {
    if (!m.budget_bytes || m.total_bytes() <= *m.budget_bytes) continue;
    std::string advice = m.device.is_cuda()
                             ? "spread the layers over more GPUs (switchyard split), keep the routed experts on "
                               "the CPU, store smaller weights (--weight_dtype) or shorten --max_context"
                             : "store smaller weights (--weight_dtype q4_k_m) or move some experts to a GPU";
    // Routed experts that run here in one phase only (prefill_device or generate_device) are a
    // full copy of them: the first thing to move when they alone break the budget.
    if (m.device.is_cuda() && m.one_phase_bytes > 0 && m.total_bytes() - m.one_phase_bytes <= *m.budget_bytes)
      advice = format_bytes(m.one_phase_bytes) +
               " of the weights are routed experts held here for one phase only (prefill or decode): run them on "
               "the CPU in both (prefill_device and generate_device \"cpu\")";
    diagnostics.error("over-budget",
                      m.device.str() + " needs " + format_bytes(m.total_bytes()) + " (weights " +
                          format_bytes(m.weight_bytes) + ", KV cache " + format_bytes(m.kv_cache_bytes) +
                          (m.prefill_buffer_bytes > 0
                               ? ", the experts' prefill buffers " + format_bytes(m.prefill_buffer_bytes)
                               : std::string()) +
                          (m.dequantize_buffer_bytes > 0
                               ? ", the prefill's dequantized weight rows " + format_bytes(m.dequantize_buffer_bytes)
                               : std::string()) +
                          ") but its budget is " + format_bytes(*m.budget_bytes) + ", " +
                          format_bytes(m.total_bytes() - *m.budget_bytes) + " too much; " + advice,
                      SourceLocation{file, 0, 0});
  }
}

std::string explain_out_of_memory(const std::string& message, const std::vector<DeviceMemory>& devices,
                                  std::int64_t max_context) {
  for (const DeviceMemory& d : devices) {
    const std::string device = d.device.str();
    const auto at = message.find("out of memory on " + device);
    if (at == std::string::npos) continue;
    // "cuda:1" must not match "cuda:10".
    const auto end = at + std::string("out of memory on ").size() + device.size();
    if (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) continue;
    return message + "; the plan estimates " + format_bytes(d.total_bytes()) + " for " + device + " (weights " +
           format_bytes(d.weight_bytes) + ", KV cache " + format_bytes(d.kv_cache_bytes) + " at --max_context " +
           std::to_string(max_context) + "); move modules off " + device +
           " in the profile (`switchyard check` shows the split) or lower --max_context";
  }
  return message;
}

}  // namespace switchyard
