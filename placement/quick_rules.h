#pragma once
// Placement the way llama.cpp users type it: -ot / --override-tensor REGEX=DEVICE, --cpu-moe and
// --n-cpu-moe N, compiled into rules of the same RuleSet a YAML profile gives, placed before the
// profile's rules. A walk tries rules in order and the first that matches a module places it
// (placement_plan.h), so a quick rule wins over the profile wherever both match; check warns
// where a profile rule that also matches would have put the module on another device
// (quick-rule-overrides-profile).
//
// What each flag selects, before any rule is written:
// - -ot REGEX=DEVICE: the modules that hold a weight whose llama.cpp GGUF tensor name
//   (blk.3.ffn_up_exps.weight) or whose module name (model.layers.3.mlp.experts.0.up_proj) the
//   regex finds (a search, as llama.cpp's std::regex_search), and the routed-experts containers
//   any of whose experts' weights it finds: llama.cpp keeps each layer's experts in three fused
//   tensors, so its patterns move whole containers. Several pairs may share one flag, separated
//   by commas; the flag may be given many times. DEVICE: CPU, CUDA0, CUDA1 ... as llama.cpp spells
//   them, or cpu, cuda, cuda:N.
// - --cpu-moe: every MoE layer's routed experts on the CPU, in decode and prefill.
// - --n-cpu-moe N: those of the first N MoE layers.
// - -ngl N, -ts SHARES, --main-gpu I (placement/gpu_layers.h): each decoder layer's device; every
//   module of a layer goes there (its routed experts too, unless a flag above sends them to the
//   CPU), the embedding with the first layer, the final norm and head with the last, and the
//   decoder stack's transfer_map moves the hidden state where the layers change device. Without a
//   profile and with several GPUs (--gpus, --gpu_memory) the layers are divided so even without
//   these flags. With a profile they are refused: its own rules and transfer_map place the layers
//   (`switchyard split` divides them over GPUs).
// - --fit's choice (placement/fit.h): the routed experts of these layers on the CPU, of those on a
//   GPU (each layer's own).
// Routed experts get the Experts operator with the CPU's (KExpertsCPU) or the GPU's
// (KExpertsMarlin: a GGUF's blocks stay blocks in GPU memory, as llama.cpp keeps them) op in both phases, handing their output to their layer's device; every other
// selected module gets the default operator on DEVICE. Each -ot pair becomes one or two rules
// (experts; other modules), --cpu-moe, --n-cpu-moe and --fit one each, the layer flags two per
// run of layers on one device, one for the decoder stack and one each for the modules outside
// the layers.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/diagnostics.h"
#include "core/module_tree.h"
#include "placement/gpu_layers.h"
#include "placement/rule_set.h"

namespace switchyard {

struct QuickRuleFlags {
  std::vector<std::string> override_tensor;  // each -ot value as typed: REGEX=DEVICE[,REGEX=DEVICE...]
  bool cpu_moe = false;
  std::optional<int> n_cpu_moe;
  GpuLayerFlags layers;               // -ngl, -ts, --main-gpu
  // Set by --fit, not typed: decoder layers whose routed experts go to the CPU, and those whose
  // routed experts go to a GPU (their MoE block's, where the profile keeps the experts on the CPU).
  std::vector<int> fit_cpu_layers;
  std::vector<std::pair<int, Device>> fit_gpu_layers;
  bool empty() const {
    return override_tensor.empty() && !cpu_moe && !n_cpu_moe && layers.empty() && fit_cpu_layers.empty() &&
           fit_gpu_layers.empty();
  }
};

// What the layer flags divide: `gpus` GPUs with these budgets (none, one for all, or one per
// GPU), and whether to divide the layers at all (a layer flag was given, or there is no profile
// and more than one GPU).
struct LayerTarget {
  bool divide = false;
  int gpus = 1;
  std::vector<std::uint64_t> budgets_bytes;
  Device default_device;  // where modules no rule places go: layers all there need no rules
  std::string origin;  // the rules' origin: the layer flags as typed, or "--gpus 2"
};

struct QuickRules {
  std::vector<Rule> rules;
  std::string yaml;  // the same rules as a profile's text, each after a comment naming its origin
};

// The quick rules for `tree`, numbered from 0 in the order above (-ot pairs as typed, then
// --cpu-moe, --n-cpu-moe, --fit, the layer flags), each with its origin ("-ot #2", "--cpu-moe",
// "-ngl 40") and located at "command line". A flag that selects nothing is a warning
// (quick-rule-matches-nothing) and gives no rule. Throws InputError (exit 2) naming the flag for
// a value that is not REGEX=DEVICE, a regex that does not compile, a device that is not one, an N
// past the MoE layers, or layer flags gpu_layers.h refuses.
QuickRules compile_quick_rules(const QuickRuleFlags& flags, const LayerTarget& layers, const ModuleTree& tree,
                               Diagnostics& diagnostics);

// Prepends `quick` (from compile_quick_rules) to `profile` (parsed with first_index =
// quick.size()), and warns where a quick rule placed a module on another device than the
// first profile rule that also matches it would have.
RuleSet with_quick_rules(std::vector<Rule> quick, RuleSet profile);
void warn_quick_rule_overrides(const struct PlacementPlan& plan, Diagnostics& diagnostics);

}  // namespace switchyard
