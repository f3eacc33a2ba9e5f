#include <cstdint>
#include <sstream>

#include "core/text.h"
#include "placement/implementation.h"
#include "placement/report.h"

namespace switchyard {
namespace {

std::string describe_rule(const Rule& rule) {
  std::string text = rule.label();
  if (rule.class_text) text += " class " + *rule.class_text;
  if (rule.name_pattern) text += " name " + quoted_excerpt(*rule.name_pattern);
  return text;
}

// "implementation: experts.cpu in decode, experts.gpu in prefill"
std::string implementation_line(const PlacementPlan& plan, int module) {
  const PhaseImplementations runs = plan.implementation(module);
  return std::string("implementation: ") + implementation_name(runs.generate) + " in decode, " +
         implementation_name(runs.prefill) + " in prefill\n";
}

std::string closest_module(const ModuleTree& tree, std::string_view name) {
  std::string best;
  std::size_t best_distance = SIZE_MAX;
  for (const Module& m : tree.modules()) {
    const std::size_t d = edit_distance(name, m.name);
    if (d < best_distance) best_distance = d, best = std::string(m.name);
  }
  return best;
}

}  // namespace

std::string explain_module(const CheckResult& result, std::string_view module_name, bool& found) {
  const ModuleTree& tree = *result.tree;
  const PlacementPlan& plan = result.plan;
  std::ostringstream out;
  const int index = tree.find(module_name);
  found = index >= 0;
  if (!found) {
    out << "no module named '" << module_name << "' in this model; closest: " << closest_module(tree, module_name) << "\n";
    return out.str();
  }
  const Module& module = tree.at(index);
  out << module.name << ": class " << module.cls->display_name();
  for (const ModuleClass* base = module.cls->base; base; base = base->base) out << " < " << base->name;
  out << "\n";
  if (!plan.placement_of(index)) {
    const ModulePlacement& owner = plan.owner_of(index);
    out << "not visited: " << tree.at(owner.module).name << " is placed";
    if (owner.rule >= 0) out << " by rule #" << owner.rule + 1;
    out << " with recursive: false, so its operator " << owner.op->name << " owns this module; its weights live on "
        << owner.generate_device.str() << "\n";
    out << implementation_line(plan, index);
    return out.str();
  }
  const ModulePlacement& placement = *plan.placement_of(index);
  for (const Rule& rule : result.rules->rules) {
    out << "  " << describe_rule(rule) << ": ";
    if (placement.rule >= 0 && rule.index > placement.rule) {
      out << "not tried (rule #" << placement.rule + 1 << " already matched)\n";
      continue;
    }
    if (plan.runaway_rules[static_cast<std::size_t>(rule.index)]) {
      out << "ignored: its regex exceeded the backtracking limit\n";
      continue;
    }
    switch (match_rule(rule, module)) {
      case RuleMatch::match: out << "MATCH -> " << rule.op().name << " (" << rule.replace_text << ")\n"; break;
      case RuleMatch::class_mismatch:
        out << "no: " << module.cls->name << " is not a " << rule.match_class->name << "\n";
        break;
      case RuleMatch::name_mismatch: out << "no: the name regex does not match\n"; break;
      case RuleMatch::regex_limit: out << "no: the regex exceeded its backtracking limit\n"; break;
      case RuleMatch::unusable: out << "skipped: the rule's match part has errors\n"; break;
    }
  }
  out << "result: " << placement.op->name << " decode " << placement.generate_device.str() << ", prefill "
      << placement.prefill_device.str();
  if (placement.out_device) out << ", out " << placement.out_device->str();
  if (!placement.generate_op.empty()) out << ", ops " << placement.generate_op << "/" << placement.prefill_op;
  out << (placement.rule >= 0 ? "" : " (no rule matched: default device)");
  if (!placement.recursive) out << "; recursive: false (children are not visited)";
  if (module.layer >= 0) out << "\nlayer " << module.layer << " runs on " << plan.layer_device(module.layer).str();
  out << "\n" << implementation_line(plan, index);
  return out.str();
}

}  // namespace switchyard
