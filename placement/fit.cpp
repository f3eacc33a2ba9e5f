#include "placement/fit.h"

#include <algorithm>
#include <map>
#include <set>
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

// Where the routed experts of container `p` run: their device in decode, else in prefill, where
// that is a GPU; the CPU otherwise.
Device experts_device(const ModulePlacement& p) {
  return p.generate_device.is_cuda() ? p.generate_device : p.prefill_device;
}

// How many MoE layers' routed experts run on a GPU in `plan`.
int experts_on_gpus(const PlacementPlan& plan) {
  int n = 0;
  for (const ModulePlacement& p : plan.visited)
    n += plan.tree->is_routed_experts(p.module) && experts_device(p).is_cuda();
  return n;
}

// The MoE layers a GPU runs, ascending: those whose routed experts it holds under the rules, and
// those whose MoE block it runs while the rules keep the experts on the CPU (`on_cpu`), whose
// experts the fit may bring to it. Layers that run on the CPU are no GPU's.
struct GpuMoeLayers {
  std::vector<int> layers;
  std::set<int> on_cpu;
};
std::map<Device, GpuMoeLayers> moe_layers_by_gpu(const PlacementPlan& plan) {
  std::map<Device, GpuMoeLayers> out;
  for (const ModulePlacement& p : plan.visited) {
    if (!plan.tree->is_routed_experts(p.module)) continue;
    const int layer = plan.tree->at(p.module).layer;
    if (const Device on = experts_device(p); on.is_cuda()) {
      out[on].layers.push_back(layer);
      continue;
    }
    const ModulePlacement* block = plan.placement_of(plan.tree->at(p.module).parent);
    if (block && block->generate_device.is_cuda()) {
      GpuMoeLayers& g = out[block->generate_device];
      g.layers.push_back(layer);
      g.on_cpu.insert(layer);
    }
  }
  for (auto& entry : out) std::sort(entry.second.layers.begin(), entry.second.layers.end());
  return out;
}

}  // namespace

std::string describe_fit(const FitOutcome& fit) {
  const std::string margin = ", " + format_bytes(fit.margin_bytes) + " left free on every GPU";
  std::string brought;
  if (!fit.brought_to_gpu.empty())
    brought = "; those of layer" + std::string(fit.brought_to_gpu.size() > 1 ? "s " : " ") + layer_ranges(fit.brought_to_gpu) +
              " moved onto the GPU that runs their layer (the rules put them on the CPU)";
  const int on_cpu_layers = fit.moe_layers - fit.cpu_layers - fit.gpu_layers;  // layers that run on the CPU
  if (fit.cpu_layers == 0 && on_cpu_layers > 0)
    return "fit: the routed experts of every MoE layer a GPU runs on the GPUs (" + std::to_string(fit.gpu_layers) + " of " +
           std::to_string(fit.moe_layers) + "; the other layers run on the CPU)" + brought + margin;
  if (fit.cpu_layers == 0) return "fit: the routed experts of every MoE layer on the GPUs (none on the CPU)" + brought + margin;
  const std::string ot = "llama.cpp: -ot \"" + fit.override_tensor + "\"";
  if (fit.first_layers)
    return "fit: the routed experts of the first " + std::to_string(fit.cpu_layers) + " of " + std::to_string(fit.moe_layers) +
           " MoE layers on the CPU (--n-cpu-moe " + std::to_string(fit.cpu_layers) + "; " + ot + ")" + brought + margin;
  return "fit: the routed experts of " + std::to_string(fit.cpu_layers) + " of " + std::to_string(fit.moe_layers) +
         " MoE layers (layers " + layer_ranges(fit.layers) + ") on the CPU (" + ot + ")" + brought + margin;
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
  // A choice: for each GPU, how many of its MoE layers (the first ones) keep their routed experts
  // on the CPU; the rest have them on the GPU. The rules say it for layers where they agree.
  using Counts = std::map<Device, int>;
  std::map<Device, GpuMoeLayers> gpus;
  auto apply = [&](const Counts& counts) {
    o.quick_rules.fit_cpu_layers.clear();
    o.quick_rules.fit_gpu_layers.clear();
    for (const auto& entry : gpus) {
      const int n = counts.at(entry.first);
      for (int i = 0; i < static_cast<int>(entry.second.layers.size()); ++i) {
        const int layer = entry.second.layers[static_cast<std::size_t>(i)];
        const bool rules_on_cpu = entry.second.on_cpu.count(layer) > 0;
        if (i < n && !rules_on_cpu) o.quick_rules.fit_cpu_layers.push_back(layer);
        if (i >= n && rules_on_cpu) o.quick_rules.fit_gpu_layers.emplace_back(layer, entry.first);
      }
    }
  };
  auto trial = [&](const Counts& counts) {
    apply(counts);
    CheckResult r;
    place_described(r, *tree, o, /*validate=*/false);
    return r;
  };
  const std::vector<int> containers = tree->routed_experts();
  const int moe_layers = static_cast<int>(containers.size());
  auto finish = [&](const Counts& counts) {
    apply(counts);
    std::vector<int> cpu_layers;  // the first counts[g] of every GPU's layers
    for (const auto& entry : gpus)
      cpu_layers.insert(cpu_layers.end(), entry.second.layers.begin(), entry.second.layers.begin() + counts.at(entry.first));
    std::sort(cpu_layers.begin(), cpu_layers.end());
    std::vector<int> brought;
    for (const auto& entry : o.quick_rules.fit_gpu_layers) brought.push_back(entry.first);
    std::sort(brought.begin(), brought.end());
    CheckResult r;
    r.weight_dtype = weight_types_summary(options.model, *tree);
    r.diagnostics = described;
    r.tree = std::move(tree);
    place_described(r, *r.tree, o, /*validate=*/true);
    std::vector<int> first;  // the layers of the first cpu_layers MoE layers
    for (std::size_t i = 0; i < cpu_layers.size() && i < containers.size(); ++i) first.push_back(r.tree->at(containers[i]).layer);
    r.fit = FitOutcome{moe_layers, static_cast<int>(cpu_layers.size()), experts_on_gpus(r.plan), cpu_layers,
                       first == cpu_layers, margin, override_tensor_of(cpu_layers), brought};
    return r;
  };

  // Each GPU's MoE layers, as the rules alone place them.
  o.quick_rules.fit_cpu_layers.clear();
  o.quick_rules.fit_gpu_layers.clear();
  {
    CheckResult r;
    place_described(r, *tree, o, /*validate=*/false);
    gpus = moe_layers_by_gpu(r.plan);
  }
  Counts all;
  for (const auto& entry : gpus) all[entry.first] = static_cast<int>(entry.second.layers.size());
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
    int low, high;  // the first `low` on the CPU do not fit (-1: below 0), the first `high` do
  };
  std::map<Device, Search> search;
  for (const auto& entry : gpus) search[entry.first] = Search{-1, static_cast<int>(entry.second.layers.size())};
  auto counts_of = [&](bool mids) {
    Counts counts;
    for (const auto& entry : search) {
      const Search& s = entry.second;
      counts[entry.first] = mids && s.high - s.low > 1 ? (s.low + s.high) / 2 : s.high;
    }
    return counts;
  };
  for (;;) {
    bool open = false;
    for (const auto& entry : search) open |= entry.second.high - entry.second.low > 1;
    if (!open) break;
    const std::map<Device, std::uint64_t> missing = missing_bytes(trial(counts_of(true)), margin);
    for (auto& entry : search) {
      Search& s = entry.second;
      if (s.high - s.low <= 1) continue;
      const int mid = (s.low + s.high) / 2;
      const auto it = missing.find(entry.first);
      (it == missing.end() || it->second == 0 ? s.high : s.low) = mid;
    }
  }
  return finish(counts_of(false));
}

}  // namespace switchyard
