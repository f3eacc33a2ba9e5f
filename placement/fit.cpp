#include "placement/fit.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "core/units.h"
#include "placement/check.h"

namespace switchyard {
namespace {

// How much each GPU is over its budget less the margin (0: it fits), with a sentence for the
// worst one.
std::map<Device, std::uint64_t> missing_bytes(const CheckResult& r, std::uint64_t margin, std::string* worst = nullptr) {
  std::map<Device, std::uint64_t> missing;
  std::uint64_t most = 0;
  for (const DeviceMemory& d : r.memory) {
    if (!d.device.is_cuda() || !d.budget_bytes) continue;
    const std::uint64_t need = d.total_bytes() + margin;
    const std::uint64_t short_by = need > *d.budget_bytes ? need - *d.budget_bytes : 0;
    missing[d.device] = short_by;
    if (short_by > most) {
      most = short_by;
      if (worst)
        *worst = d.device.str() + " needs " + format_bytes(d.total_bytes()) + " with " + format_bytes(margin) +
                 " left free, but its budget is " + format_bytes(*d.budget_bytes);
    }
  }
  return missing;
}

std::uint64_t most_missing(const std::map<Device, std::uint64_t>& missing) {
  std::uint64_t most = 0;
  for (const auto& entry : missing) most = std::max(most, entry.second);
  return most;
}

// llama.cpp's -ot value for these layers' routed experts on the CPU.
std::string override_tensor_of(const std::vector<int>& layers) {
  std::vector<std::string> numbers;
  for (int l : layers) numbers.push_back(std::to_string(l));
  return numbers.empty() ? "" : "blk\\.(" + join(numbers, "|") + ")\\.ffn_(up|down|gate)_exps=CPU";
}

// "3-12, 33-42"
std::string layer_ranges(const std::vector<int>& layers) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    parts.push_back(i == j ? std::to_string(layers[i]) : std::to_string(layers[i]) + "-" + std::to_string(layers[j]));
    i = j + 1;
  }
  return join(parts, ", ");
}

// The MoE layers whose routed experts each GPU holds in `r` (in decode, else in prefill), ascending.
std::map<Device, std::vector<int>> experts_by_gpu(const PlacementPlan& plan) {
  std::map<Device, std::vector<int>> out;
  for (const ModulePlacement& p : plan.visited) {
    if (!plan.tree->is_routed_experts(p.module)) continue;
    const Device on = p.generate_device.is_cuda() ? p.generate_device : p.prefill_device;
    if (on.is_cuda()) out[on].push_back(plan.tree->at(p.module).layer);
  }
  for (auto& entry : out) std::sort(entry.second.begin(), entry.second.end());
  return out;
}

}  // namespace

std::string describe_fit(const FitOutcome& fit) {
  const std::string margin = ", " + format_bytes(fit.margin_bytes) + " left free on every GPU";
  const int kept_on_cpu = fit.moe_layers - fit.cpu_layers - fit.gpu_layers;  // by the rules, before the fit
  if (fit.cpu_layers == 0 && kept_on_cpu > 0)
    return "fit: no routed experts moved (the rules put those of " + std::to_string(kept_on_cpu) + " of " +
           std::to_string(fit.moe_layers) + " MoE layers on the CPU already, " + std::to_string(fit.gpu_layers) +
           " on the GPUs)" + margin;
  if (fit.cpu_layers == 0) return "fit: the routed experts of every MoE layer on the GPUs (none on the CPU)" + margin;
  const std::string ot = "llama.cpp: -ot \"" + fit.override_tensor + "\"";
  if (fit.first_layers)
    return "fit: the routed experts of the first " + std::to_string(fit.cpu_layers) + " of " + std::to_string(fit.moe_layers) +
           " MoE layers on the CPU (--n-cpu-moe " + std::to_string(fit.cpu_layers) + "; " + ot + ")" + margin;
  return "fit: the routed experts of " + std::to_string(fit.cpu_layers) + " of " + std::to_string(fit.moe_layers) +
         " MoE layers (layers " + layer_ranges(fit.layers) + ") on the CPU (" + ot + ")" + margin;
}

CheckResult run_fit_check(const CheckOptions& options) {
  if (options.budget.gpu_bytes.empty())
    throw InputError("--fit needs the GPUs' budgets: --gpu_memory 24GiB (one for all GPUs, or one per GPU)");
  if (!options.budget.device_map.identity())
    throw InputError("--fit fills each GPU by its own budget: it does not take --device_map (fit the profile to the "
                     "GPUs it names, then fold it)");
  if (options.quick_rules.cpu_moe || options.quick_rules.n_cpu_moe)
    throw InputError("--fit chooses how many MoE layers' experts go to the CPU itself: leave out --cpu-moe and --n-cpu-moe");
  CheckOptions o = options;
  o.fit.enabled = false;
  // The model is described once; each trial plans it and estimates the memory, and only the
  // chosen layers' check validates and owns the tree.
  Diagnostics described;
  auto tree = std::make_unique<ModuleTree>(describe_model(options.model, described));
  const std::uint64_t margin = options.fit.margin_bytes;
  auto trial = [&](const std::vector<int>& cpu_layers) {
    o.quick_rules.fit_cpu_layers = cpu_layers;
    CheckResult r;
    place_described(r, *tree, o, /*validate=*/false);
    return r;
  };
  const std::vector<int> containers = tree->routed_experts();
  const int moe_layers = static_cast<int>(containers.size());
  auto finish = [&](std::vector<int> cpu_layers) {
    std::sort(cpu_layers.begin(), cpu_layers.end());
    o.quick_rules.fit_cpu_layers = cpu_layers;
    CheckResult r;
    r.weight_dtype = weight_types_summary(options.model, *tree);
    r.diagnostics = described;
    r.tree = std::move(tree);
    place_described(r, *r.tree, o, /*validate=*/true);
    std::vector<int> first;  // the layers of the first cpu_layers MoE layers
    for (std::size_t i = 0; i < cpu_layers.size() && i < containers.size(); ++i) first.push_back(r.tree->at(containers[i]).layer);
    int on_gpus = 0;
    for (const auto& entry : experts_by_gpu(r.plan)) on_gpus += static_cast<int>(entry.second.size());
    r.fit = FitOutcome{moe_layers, static_cast<int>(cpu_layers.size()), on_gpus, cpu_layers, first == cpu_layers, margin,
                       override_tensor_of(cpu_layers)};
    return r;
  };

  // Each GPU's MoE layers, as the plan with every expert where the rules put it has them.
  const std::map<Device, std::vector<int>> held = experts_by_gpu(trial({}).plan);
  std::vector<int> all;
  for (const auto& entry : held) all.insert(all.end(), entry.second.begin(), entry.second.end());
  const std::map<Device, std::uint64_t> at_most = missing_bytes(trial(all), margin);
  if (most_missing(at_most) > 0) {
    CheckResult best = finish(all);
    std::string worst;
    const std::uint64_t short_by = most_missing(missing_bytes(best, margin, &worst));
    best.diagnostics.error("fit-impossible",
                           "--fit: even with the routed experts of all " + std::to_string(moe_layers) +
                               " MoE layers on the CPU, " + worst + ": " + format_bytes(short_by) +
                               " missing. Give the GPU more (--gpu_memory), shorten --max_context, lower the margin "
                               "(--fit_margin), store smaller weights or spread the layers over more GPUs",
                           SourceLocation{"command line", 0, 0});
    return best;
  }
  // More of a GPU's layers' experts on the CPU never need more of its memory, and a GPU's memory
  // does not depend on the other GPUs' experts: bisect every GPU's count at once.
  struct Search {
    const std::vector<int>* layers;
    int low, high;  // the first `low` do not fit (-1: below 0), the first `high` do
  };
  std::map<Device, Search> search;
  for (const auto& entry : held) search[entry.first] = Search{&entry.second, -1, static_cast<int>(entry.second.size())};
  auto chosen = [&](bool mids) {
    std::vector<int> layers;
    for (const auto& [device, s] : search) {
      const int n = mids && s.high - s.low > 1 ? (s.low + s.high) / 2 : s.high;
      layers.insert(layers.end(), s.layers->begin(), s.layers->begin() + n);
    }
    return layers;
  };
  for (;;) {
    bool open = false;
    for (const auto& entry : search) open |= entry.second.high - entry.second.low > 1;
    if (!open) break;
    const std::map<Device, std::uint64_t> missing = missing_bytes(trial(chosen(true)), margin);
    for (auto& [device, s] : search) {
      if (s.high - s.low <= 1) continue;
      const int mid = (s.low + s.high) / 2;
      const auto it = missing.find(device);
      (it == missing.end() || it->second == 0 ? s.high : s.low) = mid;
    }
  }
  return finish(chosen(false));
}

}  // namespace switchyard
