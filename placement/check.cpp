#include "placement/check.h"

#include "placement/validate.h"

namespace switchyard {

CheckResult run_check(const CheckOptions& options) {
  CheckResult result;
  result.weight_dtype = options.model.weight_dtype;
  result.tree = std::make_unique<ModuleTree>(describe_model(options.model, result.diagnostics));
  result.rules = std::make_unique<RuleSet>(
      options.profile_text ? parse_rules(*options.profile_text, options.profile.string(), result.diagnostics)
                           : load_rules(options.profile, result.diagnostics));

  PlacementOptions placement;
  const std::size_t listed = options.budget.gpu_bytes.size();
  placement.gpus = options.gpus.value_or(listed > 1 ? static_cast<int>(listed) : result.rules->gpus_named());
  placement.default_device =
      options.default_device.value_or(placement.gpus > 0 ? Device::cuda(0) : Device::cpu());
  result.plan = plan_placement(*result.tree, *result.rules, placement, result.diagnostics);
  result.memory = estimate_memory(result.plan, options.budget);
  // A profile for another model family or another machine has had its one error; findings
  // about how it places this model would be noise.
  if (result.rules->for_unsupported_target) return result;
  validate_plan(result.plan, result.diagnostics);
  check_memory(result.memory, result.diagnostics, result.rules->file.string());
  return result;
}

}  // namespace switchyard
