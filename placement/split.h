#pragma once
// split: from one base profile (usually single-GPU), a profile that spreads the decoder layers
// over N GPUs in contiguous ranges, balancing each GPU's bytes against its budget, with a
// consistent transfer_map, the experts kept where the base puts them, and model.norm and
// lm_head on the last GPU.
#include <cstdint>
#include <string>
#include <vector>

#include "placement/check.h"

namespace switchyard {

struct GpuShare {
  int first_layer = 0;
  int last_layer = 0;  // inclusive
  std::uint64_t bytes = 0;
  std::uint64_t budget_bytes = 0;  // 0 when no budget was given
};

struct SplitResult {
  std::string yaml;
  std::vector<GpuShare> gpus;
};

// Contiguous partition of `layer_bytes` into `budgets.size()` non-empty ranges minimising the
// largest (bytes + extra) / budget. `first_extra` goes to GPU 0, `last_extra` to the last GPU.
std::vector<GpuShare> balance_layers(const std::vector<std::uint64_t>& layer_bytes, const std::vector<double>& budgets,
                                     std::uint64_t first_extra, std::uint64_t last_extra);

// A regex alternation matching exactly the integers first..last: 15..29 -> "1[5-9]|2[0-9]".
std::string layer_range_regex(int first, int last);

// Throws InputError when the base cannot be split (errors in it, fewer layers than GPUs).
// `budget` gives the GPU budgets (one for all, or one per GPU; none: equal shares) and the KV
// cache length counted per layer.
SplitResult split_profile(const CheckResult& base, int gpus, const MemoryBudget& budget, const std::string& base_name);

}  // namespace switchyard
