#pragma once
// The dry run behind `switchyard check` (and later `run --dry_run`): describe the model, parse
// the profile, walk, validate, estimate memory. One placement path for every command.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnostics.h"
#include "core/model_description.h"
#include "placement/fit.h"
#include "placement/memory_estimate.h"
#include "placement/placement_plan.h"
#include "placement/quick_rules.h"
#include "placement/rule_set.h"

namespace switchyard {

// What the weights are stored as, for the report's header: the scheme's name (--weight_dtype)
// when the model is a preset, else the stored types the checkpoint's tensors have, most common
// first ("q5_0 x36, f32 x31, q8_0 x3").
std::string weight_types_summary(const ModelSpec& model, const ModuleTree& tree);

// A profile of one rule that places every module on the CPU, each with its own implementation:
// what `run`, `chat` and `serve` use when given no profile and no placement flag.
inline constexpr const char* kCpuOnlyProfile = R"(- match:
    name: ""
  replace:
    class: default
    kwargs: {generate_device: "cpu", prefill_device: "cpu"}
)";

struct CheckOptions {
  ModelSpec model;
  std::filesystem::path profile;             // empty: no profile file (the quick rules alone)
  std::optional<std::string> profile_text;  // parse this instead of reading `profile` (tests)
  QuickRuleFlags quick_rules;               // -ot, --cpu-moe, --n-cpu-moe: tried before the profile's rules
  FitOptions fit;                           // --fit: placement/fit.h
  std::optional<int> gpus;                  // default: what --gpu_memory lists, else what the profile names
  std::optional<Device> default_device;     // default: cuda:0, or cpu with no GPUs
  MemoryBudget budget;
};

struct CheckResult {
  std::unique_ptr<ModuleTree> tree;  // stable address: the plan points into it
  std::unique_ptr<RuleSet> rules;
  PlacementPlan plan;
  std::vector<DeviceMemory> memory;
  std::vector<PhysicalGpuMemory> physical_gpus;  // with a --device_map that folds: fold_memory's
  Diagnostics diagnostics;
  std::string weight_dtype;
  std::optional<FitOutcome> fit;  // with --fit: what it chose
  std::string quick_rules_yaml;   // the command line's rules as a profile's text ("" without any)
};

// Throws InputError when the model or the profile cannot be read at all; everything else is a
// diagnostic in the result.
CheckResult run_check(const CheckOptions& options);

// run_check's steps after describing the model, on `tree` (which result.tree holds, or which
// outlives result): quick rules and profile, the walk, the memory estimate and, with `validate`,
// the findings. For --fit's trials (placement/fit.h), which share one tree.
void place_described(CheckResult& result, const ModuleTree& tree, const CheckOptions& options, bool validate);

}  // namespace switchyard
