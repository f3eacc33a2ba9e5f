#include "placement/rule_candidates.h"

namespace switchyard {

RuleCandidates::RuleCandidates(const ModuleTree& tree, const RuleSet& rules, const ModuleNameIndex& index)
    : by_module_(tree.size()) {
  std::size_t listed = 0;
  for (const Rule& rule : rules.rules) {
    if (!rule.matchable) continue;  // takes part in no walk
    std::optional<std::vector<int>> modules;
    if (rule.name_pattern && rule.name_regex.valid()) modules = index.candidates(rule.name_regex.required_literals());
    if (!modules || modules->size() > kMaxModulesPerRule || listed + modules->size() > kMaxListed) {
      every_module_.push_back(rule.index);
      continue;
    }
    listed += modules->size();
    for (int m : *modules) by_module_[static_cast<std::size_t>(m)].push_back(rule.index);
  }
}

}  // namespace switchyard
