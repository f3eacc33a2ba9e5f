#include "placement/fit.h"

#include "core/error.h"
#include "core/units.h"
#include "placement/check.h"

namespace switchyard {
namespace {

// The most any GPU is over its budget less the margin; 0 when every one fits.
std::uint64_t missing_bytes(const CheckResult& r, std::uint64_t margin, std::string* worst = nullptr) {
  std::uint64_t missing = 0;
  for (const DeviceMemory& d : r.memory) {
    if (!d.device.is_cuda() || !d.budget_bytes) continue;
    const std::uint64_t need = d.total_bytes() + margin;
    if (need > *d.budget_bytes && need - *d.budget_bytes > missing) {
      missing = need - *d.budget_bytes;
      if (worst)
        *worst = d.device.str() + " needs " + format_bytes(d.total_bytes()) + " with " + format_bytes(margin) +
                 " left free, but its budget is " + format_bytes(*d.budget_bytes);
    }
  }
  return missing;
}

// llama.cpp's -ot value for the routed experts of the first n MoE layers on the CPU.
std::string override_tensor_of(const ModuleTree& tree, int n) {
  std::string layers;
  int taken = 0;
  for (int i = 0; i < static_cast<int>(tree.size()) && taken < n; ++i)
    if (tree.is_routed_experts(i)) layers += (taken++ ? "|" : "") + std::to_string(tree.at(i).layer);
  return taken == 0 ? "" : "blk\\.(" + layers + ")\\.ffn_(up|down|gate)_exps=CPU";
}

}  // namespace

std::string describe_fit(const FitOutcome& fit) {
  std::string text = "fit: the routed experts of ";
  if (fit.cpu_layers == 0) text += "every MoE layer on the GPUs (none on the CPU)";
  else
    text += "the first " + std::to_string(fit.cpu_layers) + " of " + std::to_string(fit.moe_layers) +
            " MoE layers on the CPU (--n-cpu-moe " + std::to_string(fit.cpu_layers) + "; llama.cpp: -ot \"" +
            fit.override_tensor + "\")";
  return text + ", " + format_bytes(fit.margin_bytes) + " left free on every GPU";
}

CheckResult run_fit_check(const CheckOptions& options) {
  if (options.budget.gpu_bytes.empty())
    throw InputError("--fit needs the GPUs' budgets: --gpu_memory 24GiB (one for all GPUs, or one per GPU)");
  if (options.quick_rules.cpu_moe || options.quick_rules.n_cpu_moe)
    throw InputError("--fit chooses how many MoE layers' experts go to the CPU itself: leave out --cpu-moe and --n-cpu-moe");
  CheckOptions o = options;
  o.fit.enabled = false;
  // The model is described once; each trial plans it and estimates the memory, and only the
  // chosen N's check validates and owns the tree.
  Diagnostics described;
  auto tree = std::make_unique<ModuleTree>(describe_model(options.model, described));
  auto with_n = [&](int n) { o.quick_rules.n_cpu_moe = n > 0 ? std::optional<int>(n) : std::nullopt; };
  auto trial = [&](int n) {
    with_n(n);
    CheckResult r;
    place_described(r, *tree, o, /*validate=*/false);
    return missing_bytes(r, options.fit.margin_bytes);
  };
  int moe_layers = 0;
  for (int i = 0; i < static_cast<int>(tree->size()); ++i) moe_layers += tree->is_routed_experts(i);
  auto final_check = [&](int n) {
    with_n(n);
    CheckResult r;
    r.weight_dtype = options.model.weight_dtype;
    r.diagnostics = described;
    r.tree = std::move(tree);
    place_described(r, *r.tree, o, /*validate=*/true);
    return r;
  };
  // More layers' experts on the CPU never need more GPU memory: bisect for the smallest N that fits.
  if (trial(moe_layers) > 0) {
    CheckResult best = final_check(moe_layers);
    std::string worst;
    const std::uint64_t short_by = missing_bytes(best, options.fit.margin_bytes, &worst);
    best.diagnostics.error("fit-impossible",
                           "--fit: even with the routed experts of all " + std::to_string(moe_layers) +
                               " MoE layers on the CPU, " + worst + ": " + format_bytes(short_by) +
                               " missing. Give the GPU more (--gpu_memory), shorten --max_context, lower the margin "
                               "(--fit_margin), store smaller weights or spread the layers over more GPUs",
                           SourceLocation{"command line", 0, 0});
    best.fit = FitOutcome{moe_layers, moe_layers, options.fit.margin_bytes, override_tensor_of(*best.tree, moe_layers)};
    return best;
  }
  int low = -1, high = moe_layers;  // low does not fit (or is below 0), high fits
  while (high - low > 1) {
    const int mid = (low + high) / 2;
    (trial(mid) == 0 ? high : low) = mid;
  }
  CheckResult best = final_check(high);
  best.fit = FitOutcome{moe_layers, high, options.fit.margin_bytes, override_tensor_of(*best.tree, high)};
  return best;
}

}  // namespace switchyard
