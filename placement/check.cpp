#include "placement/check.h"

#include <algorithm>
#include <map>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/module_tree.h"
#include "core/text.h"
#include "placement/validate.h"

namespace switchyard {

namespace {

// What the layer flags divide (quick_rules.h): without a profile, the GPUs --gpus or --gpu_memory
// give (else those -ts or --main-gpu name); the layers are divided when a layer flag asks, or
// when there is no profile and more than one GPU.
LayerTarget layer_target(const CheckOptions& options, bool no_profile) {
  const GpuLayerFlags& flags = options.quick_rules.layers;
  if (!no_profile && !flags.empty())
    throw InputError(flags.text() + ": the profile places the layers itself (its rules and transfer_map); leave out "
                     "-ngl, -ts and --main-gpu, or the profile (`switchyard split --gpus N` divides a profile's "
                     "layers over GPUs)");
  LayerTarget target;
  // --gpu_memory's list names the physical GPUs when a --device_map folds the plan's onto them.
  const std::size_t listed = options.budget.device_map.identity() ? options.budget.gpu_bytes.size() : 0;
  target.gpus = options.gpus.value_or(listed > 1 ? static_cast<int>(listed) : gpus_named_by(flags));
  target.budgets_bytes = options.budget.gpu_bytes;
  target.divide = no_profile && (!flags.empty() || target.gpus > 1);
  target.origin = flags.empty() ? "--gpus " + std::to_string(target.gpus) : flags.text();
  return target;
}

}  // namespace

void place_described(CheckResult& result, const ModuleTree& tree, const CheckOptions& options, bool validate) {
  const bool no_profile = options.profile.empty() && !options.profile_text;
  LayerTarget target = layer_target(options, no_profile);
  // --main-gpu I: the default device is cuda:I.
  const std::optional<int> main_gpu = options.quick_rules.layers.main_gpu;
  if (main_gpu && options.default_device && *options.default_device != Device::cuda(*main_gpu))
    throw InputError("--main-gpu " + std::to_string(*main_gpu) + " and --default_device " + options.default_device->str() +
                     " disagree: give one of them");
  target.default_device = options.default_device.value_or(
      main_gpu ? Device::cuda(*main_gpu) : (options.gpus.value_or(1) > 0 ? Device::cuda(0) : Device::cpu()));
  // The command line's quick rules come first (they win where they match), numbered from 1; the
  // profile's rules follow them.
  QuickRules quick = compile_quick_rules(options.quick_rules, target, tree, result.diagnostics);
  const int first = static_cast<int>(quick.rules.size());
  RuleSet profile;
  if (options.profile_text) profile = parse_rules(*options.profile_text, options.profile.string(), result.diagnostics, first);
  else if (!options.profile.empty()) profile = load_rules(options.profile, result.diagnostics, first);
  result.rules = std::make_unique<RuleSet>(with_quick_rules(std::move(quick.rules), std::move(profile)));
  result.quick_rules_yaml = std::move(quick.yaml);

  PlacementOptions placement;
  // --gpu_memory's list names the physical GPUs when a --device_map folds the plan's onto them.
  const std::size_t listed = options.budget.device_map.identity() ? options.budget.gpu_bytes.size() : 0;
  // Without a profile file the quick rules place only what they name and the rest stays on the
  // GPU, as llama.cpp's -ngl 99 keeps it: one GPU unless --gpus or --gpu_memory say otherwise.
  const int named = result.rules->gpus_named();
  const int gpus_by_default = no_profile ? std::max(named, target.gpus) : named;
  placement.gpus = options.gpus.value_or(listed > 1 ? static_cast<int>(listed) : gpus_by_default);
  placement.default_device =
      options.default_device.value_or(main_gpu ? Device::cuda(*main_gpu) : placement.gpus > 0 ? Device::cuda(0) : Device::cpu());
  result.plan = plan_placement(tree, *result.rules, placement, result.diagnostics);
  result.memory = estimate_memory(result.plan, options.budget);
  result.physical_gpus = fold_memory(result.memory, options.budget);
  // A profile for another model family or another machine has had its one error; findings
  // about how it places this model would be noise.
  if (!validate || result.rules->for_unsupported_target) return;
  validate_plan(result.plan, result.diagnostics);
  if (first > 0) warn_quick_rule_overrides(result.plan, result.diagnostics);
  check_memory(result.memory, result.diagnostics, result.rules->file.string(), result.physical_gpus);
}

std::string weight_types_summary(const ModelSpec& model, const ModuleTree& tree) {
  if (model.model_path.empty() && model.gguf_path.empty()) return model.weight_dtype;
  std::map<DType, std::size_t> tensors;
  for (const Module& m : tree.modules())
    for (const Parameter& p : m.params) ++tensors[p.dtype];
  std::vector<std::pair<std::size_t, DType>> by_count;
  for (const auto& [dtype, count] : tensors) by_count.emplace_back(count, dtype);
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (by_count.size() == 1) return dtype_name(by_count.front().second);
  std::vector<std::string> parts;
  for (const auto& [count, dtype] : by_count) parts.push_back(std::string(dtype_name(dtype)) + " x" + std::to_string(count));
  return join(parts, ", ");
}

CheckResult run_check(const CheckOptions& options) {
  if (options.fit.enabled) return run_fit_check(options);
  CheckResult result;
  result.tree = std::make_unique<ModuleTree>(describe_model(options.model, result.diagnostics));
  result.weight_dtype = weight_types_summary(options.model, *result.tree);
  place_described(result, *result.tree, options, /*validate=*/true);
  return result;
}

}  // namespace switchyard
