#pragma once
// PlacementPlan: the outcome of walking a ModuleTree with a RuleSet, exactly as ktransformers
// does it: depth first in module order; for each module the first rule (in file order) whose
// class and name both hold wins; `recursive: false` stops the walk below the module; a module no
// rule matches is "default" on the default device.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/diagnostics.h"
#include "core/dtype.h"
#include "core/module_tree.h"
#include "placement/implementation.h"
#include "placement/module_name_index.h"
#include "placement/rule_set.h"

namespace switchyard {

struct ModulePlacement {
  int module = 0;  // index into the ModuleTree
  int rule = -1;   // winning rule's index (0-based, Rule::index), -1 when none matched
  const OperatorInfo* op = nullptr;
  Device generate_device;
  Device prefill_device;
  std::optional<Device> out_device;  // operators with has_out_device only
  std::string generate_op, prefill_op;
  bool recursive = true;
};

struct PlacementOptions {
  Device default_device = Device::cuda(0);
  int gpus = 1;  // cuda:0 .. cuda:(gpus-1) exist
};

// What a device keeps of one parameter (placement/weight_storage.h): its dtype there, resolved by
// the walk for every parameter of every module on each device that holds the module's weights.
struct ResidentWeight {
  Device device;
  int param = 0;  // index into the module's params
  DType dtype = DType::f32;
};

struct PlacementPlan {
  const ModuleTree* tree = nullptr;
  const RuleSet* rules = nullptr;
  PlacementOptions options;
  std::vector<ModulePlacement> visited;  // walk order
  std::vector<int> visit_of;             // module index -> index into `visited`, or -1
  std::vector<int> weight_owner;         // module index -> index into `visited` whose device holds its weights
  std::vector<int> rule_wins;            // per rule: modules it placed
  int model_rule = -1;                   // rule that placed the decoder stack ("model"), if any
  std::vector<bool> runaway_rules;       // per rule: its regex hit the backtracking limit; ignored since
  std::shared_ptr<const ModuleNameIndex> name_index;  // built by the walk for large profiles, else null
  // Resolved after the walk (plan_placement), so that nothing later asks placement again:
  std::vector<PhaseImplementations> implementations;  // module index -> what runs it in each phase
  std::vector<std::vector<ResidentWeight>> resident;  // module index -> its parameters on each device holding them

  const ModulePlacement* placement_of(int module) const {
    const int v = visit_of[static_cast<std::size_t>(module)];
    return v < 0 ? nullptr : &visited[static_cast<std::size_t>(v)];
  }
  const ModulePlacement& owner_of(int module) const {
    return visited[static_cast<std::size_t>(weight_owner[static_cast<std::size_t>(module)])];
  }
  // What runs `module` in decode and in prefill (implementation_of, resolved by the walk).
  const PhaseImplementations& implementation(int module) const {
    return implementations[static_cast<std::size_t>(module)];
  }
  // The dtype `device` keeps parameter `param` of `module` in; std::logic_error where the plan
  // does not put that module's weights on `device`.
  DType resident_dtype(int module, int param, Device device) const;
  // The transfer_map of the rule that placed the decoder stack; empty when there is none.
  const std::vector<TransferMapEntry>& transfer_map() const;
  // Where the hidden state lives while layer `layer` runs.
  Device layer_device(int layer) const;
  // Where it lives after the last layer (model.norm, lm_head).
  Device final_device() const { return layer_device(tree->num_layers() - 1); }
};

// Runs the walk. Regexes that exceed their match limit are reported once per rule in
// `diagnostics` and stop taking part.
PlacementPlan plan_placement(const ModuleTree& tree, const RuleSet& rules, const PlacementOptions& options,
                             Diagnostics& diagnostics);

// Whether `rule` matches `module` (class and name), for --explain and dead-rule analysis.
enum class RuleMatch { match, class_mismatch, name_mismatch, regex_limit, unusable };
RuleMatch match_rule(const Rule& rule, const Module& module);

}  // namespace switchyard
