#include "placement/placement_plan.h"

#include <memory>
#include <optional>
#include <stdexcept>

#include "core/text.h"
#include "placement/rule_candidates.h"
#include "placement/weight_storage.h"

namespace switchyard {
namespace {

const std::vector<TransferMapEntry> kNoTransferMap;

class Walker {
 public:
  Walker(const ModuleTree& tree, const RuleSet& rules, const PlacementOptions& options, Diagnostics& diagnostics)
      : tree_(tree), rules_(rules), diagnostics_(diagnostics) {
    plan_.tree = &tree;
    plan_.rules = &rules;
    plan_.options = options;
    plan_.visit_of.assign(tree.size(), -1);
    plan_.rule_wins.assign(rules.rules.size(), 0);
    plan_.runaway_rules.assign(rules.rules.size(), false);
    if (rules.rules.size() >= kIndexedFrom) {
      plan_.name_index = std::make_shared<const ModuleNameIndex>(tree);
      candidates_.emplace(tree, rules, *plan_.name_index);
    }
  }

  PlacementPlan run() {
    plan_.visited.reserve(tree_.size() / 8 + 16);
    visit(0);
    assign_owners();
    return std::move(plan_);
  }

 private:
  // Profiles of this many rules or more try, per module, only the rules that can match it
  // (RuleCandidates); building the index costs more than it saves below.
  static constexpr std::size_t kIndexedFrom = 64;

  int first_matching_rule(int index, const Module& module) {
    if (candidates_)
      return candidates_->first(index, [&](int rule) { return tries(rules_.rules[static_cast<std::size_t>(rule)], module); });
    for (const Rule& rule : rules_.rules)
      if (tries(rule, module)) return rule.index;
    return -1;
  }

  // Whether `rule` wins `module`; a rule whose regex runs away is reported and dropped.
  bool tries(const Rule& rule, const Module& module) {
    if (plan_.runaway_rules[static_cast<std::size_t>(rule.index)]) return false;
    switch (match_rule(rule, module)) {
      case RuleMatch::match: return true;
      case RuleMatch::regex_limit:
        plan_.runaway_rules[static_cast<std::size_t>(rule.index)] = true;
        diagnostics_.error("regex-match-limit",
                           "regex " + quoted_excerpt(*rule.name_pattern) + " exceeded its backtracking limit on '" +
                               std::string(module.name) + "' (catastrophic backtracking); simplify nested quantifiers such as (a+)+. "
                               "The rule is ignored from here on",
                           rule.name_location, rule.index);
        return false;
      default: return false;
    }
  }

  void visit(int index) {
    const Module& module = tree_.at(index);
    ModulePlacement p;
    p.module = index;
    p.rule = first_matching_rule(index, module);
    const Device fallback = plan_.options.default_device;
    if (p.rule < 0) {
      p.op = &default_operator();
      p.generate_device = p.prefill_device = fallback;
    } else {
      const Rule& rule = rules_.rules[static_cast<std::size_t>(p.rule)];
      ++plan_.rule_wins[static_cast<std::size_t>(p.rule)];
      p.op = &rule.op();
      p.generate_device = rule.generate_device.value_or(p.op->default_generate_device.value_or(fallback));
      p.prefill_device = rule.prefill_device.value_or(fallback);
      // An operator that hands its output over (CPU experts) hands it, unless the rule says
      // otherwise, to its layer's device: the transfer_map's, else the default device.
      if (p.op->has_out_device)
        p.out_device = rule.out_device.value_or(module.layer >= 0 && plan_.tree ? plan_.layer_device(module.layer) : fallback);
      p.generate_op = rule.generate_op.empty() ? p.op->default_generate_op : rule.generate_op;
      p.prefill_op = rule.prefill_op.empty() ? p.op->default_prefill_op : rule.prefill_op;
      // A phase whose op is None has no kernel of its own: it runs the other phase's op where that
      // runs (ktransformers' serve experts prefill with their decode experts), and holds nothing
      // on its own device. Both None is a parse error.
      if (p.prefill_op == "None" && p.generate_op != "None") {
        p.prefill_op = p.generate_op;
        p.prefill_device = p.generate_device;
      } else if (p.generate_op == "None" && p.prefill_op != "None") {
        p.generate_op = p.prefill_op;
        p.generate_device = p.prefill_device;
      }
      p.recursive = rule.recursive;
      if (module.cls->role == ModuleRole::model && plan_.model_rule < 0) plan_.model_rule = p.rule;
    }
    plan_.visit_of[static_cast<std::size_t>(index)] = static_cast<int>(plan_.visited.size());
    plan_.visited.push_back(std::move(p));
    if (!plan_.visited.back().recursive) return;
    for (int child : module.children) visit(child);
  }

  // Modules below a `recursive: false` module belong to its operator, weights included.
  void assign_owners() {
    plan_.weight_owner.assign(tree_.size(), 0);
    for (std::size_t i = 0; i < tree_.size(); ++i) {
      const int v = plan_.visit_of[i];
      plan_.weight_owner[i] = v >= 0 ? v : plan_.weight_owner[static_cast<std::size_t>(tree_.at(static_cast<int>(i)).parent)];
    }
  }

  const ModuleTree& tree_;
  const RuleSet& rules_;
  Diagnostics& diagnostics_;
  PlacementPlan plan_;
  std::optional<RuleCandidates> candidates_;
};

}  // namespace

RuleMatch match_rule(const Rule& rule, const Module& module) {
  if (!rule.matchable) return RuleMatch::unusable;
  // The class test is an integer walk up the hierarchy; do it before the regex.
  if (rule.match_class && !module.cls->is_a(*rule.match_class)) return RuleMatch::class_mismatch;
  if (rule.name_pattern) {
    switch (rule.name_regex.search(module.name)) {
      case Regex::Outcome::match: break;
      case Regex::Outcome::no_match: return RuleMatch::name_mismatch;
      case Regex::Outcome::limit_exceeded: return RuleMatch::regex_limit;
    }
  }
  return RuleMatch::match;
}

const std::vector<TransferMapEntry>& PlacementPlan::transfer_map() const {
  return model_rule < 0 ? kNoTransferMap : rules->rules[static_cast<std::size_t>(model_rule)].transfer_map;
}

Device PlacementPlan::layer_device(int layer) const {
  Device device = options.default_device;
  if (model_rule >= 0) {
    const Rule& rule = rules->rules[static_cast<std::size_t>(model_rule)];
    if (rule.generate_device) device = *rule.generate_device;
  }
  for (const TransferMapEntry& entry : transfer_map())
    if (entry.layer <= layer) device = entry.device;
  return device;
}

PlacementPlan plan_placement(const ModuleTree& tree, const RuleSet& rules, const PlacementOptions& options,
                             Diagnostics& diagnostics) {
  PlacementPlan plan = Walker(tree, rules, options, diagnostics).run();
  plan.implementations.assign(tree.size(), PhaseImplementations{});
  plan.resident.assign(tree.size(), {});
  if (plan.visited.empty() || plan.weight_owner.size() != tree.size()) return plan;  // nothing placed
  for (int i = 0; i < static_cast<int>(tree.size()); ++i) plan.implementations[static_cast<std::size_t>(i)] = implementation_of(plan, i);
  resolve_resident_weights(plan);  // reads the implementations
  return plan;
}

DType PlacementPlan::resident_dtype(int module, int param, Device device) const {
  if (module >= 0 && static_cast<std::size_t>(module) < resident.size())
    for (const ResidentWeight& r : resident[static_cast<std::size_t>(module)])
      if (r.param == param && r.device == device) return r.dtype;
  throw std::logic_error("the plan keeps no parameter " + std::to_string(param) + " of module " + std::to_string(module) +
                         " on " + device.str());
}

}  // namespace switchyard
