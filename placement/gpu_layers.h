#pragma once
// llama.cpp's layer flags: which device each decoder layer runs on.
// - -ngl / --n-gpu-layers N: the last N decoder layers on the GPUs, the others on the CPU, whole
//   (attention, norms, MLP, routed experts). N past the layer count: every layer.
// - -ts / --tensor-split 3,1: GPU g's share of those layers, as llama.cpp divides them: layer j
//   of the G GPU layers goes to the first GPU whose cumulative share exceeds j / G' (G' = G + 1
//   when the output layer is offloaded too, as llama.cpp counts it), so that the same -ts gives
//   the same ranges as llama.cpp. Without -ts and with several GPUs, the shares are their
//   --gpu_memory budgets (equal without budgets), as llama.cpp divides by free memory.
// - -mg / --main-gpu I: with one GPU's worth of layers (no -ts), the GPU that holds them.
// The embedding goes with the first layer and the final norm and head with the last
// (quick_rules.h compiles the assignment into rules).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"

namespace switchyard {

struct GpuLayerFlags {
  std::optional<int> n_gpu_layers;   // -ngl N
  std::vector<double> tensor_split;  // -ts: one share per GPU, from GPU 0
  std::optional<int> main_gpu;       // -mg I
  bool empty() const { return !n_gpu_layers && tensor_split.empty() && !main_gpu; }
  // The flags as a user would type them, for rule origins: "-ngl 40 -ts 3,1".
  std::string text() const;
};

// The GPUs these flags need: the -ts list's length, --main-gpu + 1, else 1.
int gpus_named_by(const GpuLayerFlags& flags);

// Device of each of `layers` decoder layers on `gpus` GPUs (gpus >= 1). `budgets_bytes` (none,
// one for all, or one per GPU) divide the layers when -ts is absent and gpus > 1. Throws
// InputError (exit 2) naming the flag: a negative N or share, shares that sum to 0, a -ts list
// longer than `gpus`, a --main-gpu past the GPUs or given with -ts.
std::vector<Device> assign_layer_devices(int layers, int gpus, const GpuLayerFlags& flags,
                                         const std::vector<std::uint64_t>& budgets_bytes);

// "-ts 3,1" as shares; throws InputError for a list that is not comma-separated numbers >= 0.
std::vector<double> parse_tensor_split(const std::string& text);

}  // namespace switchyard
