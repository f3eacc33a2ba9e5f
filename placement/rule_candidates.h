#pragma once
// RuleCandidates: for each module, the rules of a large profile that can match it, in file order.
// A rule whose regex's required literal only a few module names can hold (ModuleNameIndex) is
// listed under those modules; every other rule is tried on every module. The walk then tries, per
// module, its own list merged with the every-module rules, so a profile of 100,000 narrow rules
// costs each module a handful of regex searches instead of 100,000.
#include <vector>

#include "core/module_tree.h"
#include "placement/module_name_index.h"
#include "placement/rule_set.h"

namespace switchyard {

class RuleCandidates {
 public:
  RuleCandidates(const ModuleTree& tree, const RuleSet& rules, const ModuleNameIndex& index);

  // Calls `try_rule(rule_index)` for the candidate rules of `module` in file order until it
  // returns true; returns that rule's index, or -1.
  template <typename TryRule>
  int first(int module, TryRule&& try_rule) const {
    const std::vector<int>& own = by_module_[static_cast<std::size_t>(module)];
    std::size_t a = 0, b = 0;
    while (a < every_module_.size() || b < own.size()) {
      const bool take_every = b == own.size() || (a < every_module_.size() && every_module_[a] < own[b]);
      const int rule = take_every ? every_module_[a++] : own[b++];
      if (try_rule(rule)) return rule;
    }
    return -1;
  }

  // A rule is listed per module when its literal leaves at most this many candidate modules, and
  // while the lists hold fewer than kMaxListed entries in all (64 MiB).
  static constexpr std::size_t kMaxModulesPerRule = 4096;
  static constexpr std::size_t kMaxListed = 16u << 20;

 private:
  std::vector<int> every_module_;            // rule indices, ascending
  std::vector<std::vector<int>> by_module_;  // per module: rule indices, ascending
};

}  // namespace switchyard
