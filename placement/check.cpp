#include "placement/check.h"

#include <algorithm>

#include "placement/validate.h"

namespace switchyard {

void place_described(CheckResult& result, const ModuleTree& tree, const CheckOptions& options, bool validate) {
  // The command line's quick rules come first (they win where they match), numbered from 1; the
  // profile's rules follow them.
  std::vector<Rule> quick = compile_quick_rules(options.quick_rules, tree, result.diagnostics);
  const int first = static_cast<int>(quick.size());
  RuleSet profile;
  if (options.profile_text) profile = parse_rules(*options.profile_text, options.profile.string(), result.diagnostics, first);
  else if (!options.profile.empty()) profile = load_rules(options.profile, result.diagnostics, first);
  result.rules = std::make_unique<RuleSet>(with_quick_rules(std::move(quick), std::move(profile)));

  PlacementOptions placement;
  const std::size_t listed = options.budget.gpu_bytes.size();
  // Without a profile file the quick rules place only what they name and the rest stays on the
  // GPU, as llama.cpp's -ngl 99 keeps it: one GPU unless --gpus or --gpu_memory say otherwise.
  const int named = result.rules->gpus_named();
  const bool no_profile = options.profile.empty() && !options.profile_text;
  const int gpus_by_default = no_profile ? std::max(named, 1) : named;
  placement.gpus = options.gpus.value_or(listed > 1 ? static_cast<int>(listed) : gpus_by_default);
  placement.default_device =
      options.default_device.value_or(placement.gpus > 0 ? Device::cuda(0) : Device::cpu());
  result.plan = plan_placement(tree, *result.rules, placement, result.diagnostics);
  result.memory = estimate_memory(result.plan, options.budget);
  // A profile for another model family or another machine has had its one error; findings
  // about how it places this model would be noise.
  if (!validate || result.rules->for_unsupported_target) return;
  validate_plan(result.plan, result.diagnostics);
  if (first > 0) warn_quick_rule_overrides(result.plan, result.diagnostics);
  check_memory(result.memory, result.diagnostics, result.rules->file.string());
}

CheckResult run_check(const CheckOptions& options) {
  if (options.fit.enabled) return run_fit_check(options);
  CheckResult result;
  result.weight_dtype = options.model.weight_dtype;
  result.tree = std::make_unique<ModuleTree>(describe_model(options.model, result.diagnostics));
  place_described(result, *result.tree, options, /*validate=*/true);
  return result;
}

}  // namespace switchyard
