#include "placement/validate.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "core/text.h"
#include "placement/module_name_index.h"

namespace switchyard {
namespace {

std::string rule_ref(const Rule& rule) { return rule.label(); }

// Containers (decoder layers, module lists) only call their children; a module that computes or
// holds weights is what must sit on the right device.
bool does_work(const Module& module, const ModulePlacement& p) {
  if (!module.params.empty() || p.op->kind != OperatorKind::default_op) return true;
  switch (module.cls->role) {
    case ModuleRole::decoder_layer:
    case ModuleRole::module_list:
    case ModuleRole::generic:
    case ModuleRole::causal_lm:
    case ModuleRole::model: return false;
    default: return true;
  }
}

// Routed experts live under <moe>.experts; their operator may run elsewhere and hands its output
// over to out_device.
bool in_routed_experts(const ModuleTree& tree, const Module& module) {
  if (module.expert >= 0) return true;
  return tree.is_routed_experts(static_cast<int>(&module - tree.modules().data()));
}

void check_device_ranges(const PlacementPlan& plan, Diagnostics& diagnostics) {
  const int gpus = plan.options.gpus;
  auto check = [&](const Rule& rule, const std::optional<Device>& device, const SourceLocation& where,
                   const std::string& what) {
    if (!device || !device->is_cuda() || device->index < gpus) return;
    diagnostics.error("device-out-of-range",
                      what + " is " + device->str() + ", but only " + std::to_string(gpus) + " GPU" +
                          (gpus == 1 ? "" : "s") + (gpus ? " (cuda:0-cuda:" + std::to_string(gpus - 1) + ")" : "") +
                          " exist; change the device or pass --gpus",
                      where, rule.index);
  };
  for (const Rule& rule : plan.rules->rules) {
    check(rule, rule.generate_device, rule.kwarg_location("generate_device"), "generate_device");
    check(rule, rule.prefill_device, rule.kwarg_location("prefill_device"), "prefill_device");
    check(rule, rule.out_device, rule.kwarg_location("out_device"), "out_device");
    for (const TransferMapEntry& e : rule.transfer_map)
      check(rule, e.device, e.location, "transfer_map layer " + std::to_string(e.layer));
  }
}

void check_transfer_map(const PlacementPlan& plan, Diagnostics& diagnostics) {
  const int layers = plan.tree->num_layers();
  for (const Rule& rule : plan.rules->rules)
    for (const TransferMapEntry& e : rule.transfer_map)
      if (e.layer >= layers)
        diagnostics.error("transfer-map-layer-out-of-range",
                          "transfer_map names layer " + std::to_string(e.layer) + ", but the model has layers 0-" +
                              std::to_string(layers - 1),
                          e.location, rule.index);
}

void check_ops_fit_devices(const PlacementPlan& plan, Diagnostics& diagnostics) {
  std::set<std::pair<int, std::string>> reported;
  for (const ModulePlacement& p : plan.visited) {
    if (p.rule < 0) continue;
    const Rule& rule = plan.rules->rules[static_cast<std::size_t>(p.rule)];
    auto check = [&](const std::string& op_name, const Device& device, const char* op_key, const char* device_key) {
      const OpInfo* op = p.op->find_op(op_name);
      if (!op) return;
      const bool bad = op->runs.on(device) == Implementation::none;
      if (!bad || !reported.insert({rule.index, op_key}).second) return;
      diagnostics.error("op-device-mismatch",
                        std::string(op_key) + " " + op_name + " runs on " +
                            (device.is_cuda() ? "the CPU only" : "a GPU only") + ", but " + device_key + " is " +
                            device.str(),
                        rule.kwarg_location(op_key), rule.index);
    };
    check(p.generate_op, p.generate_device, "generate_op", "generate_device");
    check(p.prefill_op, p.prefill_device, "prefill_op", "prefill_device");
  }
}

// A rule whose replacement cannot stand in for the module's class (KDeepseekV3MoE on a dense MLP).
void check_replacement_classes(const PlacementPlan& plan, Diagnostics& diagnostics) {
  std::set<int> reported;
  for (const ModulePlacement& p : plan.visited) {
    if (p.rule < 0) continue;
    const Rule& rule = plan.rules->rules[static_cast<std::size_t>(p.rule)];
    if (!rule.replacement) continue;
    const Module& module = plan.tree->at(p.module);
    if (rule.replacement->can_replace(*module.cls) || !reported.insert(rule.index).second) continue;
    diagnostics.error("incompatible-replacement",
                      rule.replace_text + " cannot replace " + std::string(module.name) + " (a " + module.cls->display_name() +
                          "); it replaces " + join(rule.replacement->replaces, ", ") +
                          ". Narrow the rule with match.class or a tighter name regex",
                      rule.replace_location, rule.index);
  }
}

std::string value_text(const nlohmann::ordered_json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// A kwarg Switchyard accepts and does not act on (KwargSpec::honoured false) is reported where it
// is written, once per rule, unless its value asks for what Switchyard does anyway; so is the
// device of a phase whose op is None, which runs the other phase's op on that phase's device.
void check_kwarg_effects(const PlacementPlan& plan, Diagnostics& diagnostics) {
  const Device fallback = plan.options.default_device;
  for (const Rule& rule : plan.rules->rules) {
    if (!rule.replacement) continue;
    const OperatorInfo& op = *rule.replacement->op;
    const Device prefill = rule.prefill_device.value_or(fallback);
    for (const auto& [name, value] : rule.kwargs.items()) {
      const KwargSpec* spec = op.find_kwarg(name);
      if (!spec || spec->honoured) continue;
      if (spec->asks_what_switchyard_does && spec->asks_what_switchyard_does(value, prefill)) continue;
      diagnostics.warning("kwarg-no-effect",
                          "'" + printable_excerpt(name) + ": " + printable_excerpt(value_text(value)) + "' of " + rule_ref(rule) +
                              " has no effect in Switchyard: " + spec->no_effect,
                          rule.kwarg_location(name), rule.index);
    }
    const Device generate = rule.generate_device.value_or(op.default_generate_device.value_or(fallback));
    const auto unused_device = [&](const char* none_op, const char* device_key, const std::optional<Device>& device,
                                   const std::string& other_op, const char* other_key, const Device& other_device) {
      if (!device || *device == other_device) return;
      diagnostics.warning("kwarg-no-effect",
                          std::string("'") + device_key + ": " + device->str() + "' of " + rule_ref(rule) +
                              " has no effect in Switchyard: " + none_op + " is None, so that phase runs " +
                              other_key + " " + other_op + " on " + other_device.str(),
                          rule.kwarg_location(device_key), rule.index);
    };
    const std::string generate_op = rule.generate_op.empty() ? op.default_generate_op : rule.generate_op;
    const std::string prefill_op = rule.prefill_op.empty() ? op.default_prefill_op : rule.prefill_op;
    if (prefill_op == "None" && generate_op != "None")
      unused_device("prefill_op", "prefill_device", rule.prefill_device, generate_op, "generate_op", generate);
    else if (generate_op == "None" && prefill_op != "None")
      unused_device("generate_op", "generate_device", rule.generate_device, prefill_op, "prefill_op", prefill);
  }
}

struct Mismatch {
  std::vector<int> layers;
  std::string first_module;
  int modules = 0;
};

std::string layers_text(std::vector<int> layers) {
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  return (layers.size() == 1 ? "layer " : "layers ") + format_ranges(layers);
}

// Every module of layer L must run where the transfer_map puts layer L; routed experts may run on
// the CPU but must hand their output to that device.
void check_layer_devices(const PlacementPlan& plan, bool multi_gpu, Diagnostics& diagnostics) {
  const ModuleTree& tree = *plan.tree;
  // (rule, kwarg, actual device, expected device) -> where
  std::map<std::tuple<int, std::string, Device, Device>, Mismatch> mismatches;
  std::map<int, Mismatch> uncovered;  // layer -> modules that fell to the default device
  auto note = [&](Mismatch& m, int layer, const Module& module) {
    m.layers.push_back(layer);
    if (m.modules++ == 0) m.first_module = std::string(module.name);
  };
  for (const ModulePlacement& p : plan.visited) {
    const Module& module = tree.at(p.module);
    if (module.layer < 0 || !does_work(module, p)) continue;
    const Device expected = plan.layer_device(module.layer);
    if (p.rule < 0) {
      if (multi_gpu) note(uncovered[module.layer], module.layer, module);
      else if (p.generate_device != expected)
        note(mismatches[{-1, "generate_device", p.generate_device, expected}], module.layer, module);
      continue;
    }
    if (p.op->has_out_device && in_routed_experts(tree, module)) {
      if (p.out_device && *p.out_device != expected)
        note(mismatches[{p.rule, "out_device", *p.out_device, expected}], module.layer, module);
      if (!p.prefill_device.is_cpu() && p.prefill_device != expected)
        note(mismatches[{p.rule, "prefill_device", p.prefill_device, expected}], module.layer, module);
      if (!p.generate_device.is_cpu() && p.generate_device != expected)
        note(mismatches[{p.rule, "generate_device", p.generate_device, expected}], module.layer, module);
      continue;
    }
    if (p.generate_device != expected)
      note(mismatches[{p.rule, "generate_device", p.generate_device, expected}], module.layer, module);
    if (p.prefill_device != expected)
      note(mismatches[{p.rule, "prefill_device", p.prefill_device, expected}], module.layer, module);
  }
  const std::string map_text = plan.transfer_map().empty() ? "the model's device" : "the transfer_map";
  for (const auto& [key, m] : mismatches) {
    const auto& [rule_index, kwarg, actual, expected] = key;
    const std::string others = m.modules > 1 ? " and " + std::to_string(m.modules - 1) + " more modules" : "";
    const std::string layers = layers_text(m.layers);
    if (rule_index < 0) {
      diagnostics.error("layer-device-mismatch",
                        m.first_module + others + " in " + layers + " matched no rule and run on the default device " +
                            actual.str() + ", but " + map_text + " runs " + layers + " on " + expected.str(),
                        SourceLocation{plan.rules->file.string(), 0, 0});
      continue;
    }
    const Rule& rule = plan.rules->rules[static_cast<std::size_t>(rule_index)];
    const bool experts = kwarg == "out_device" || (plan.placement_of(tree.find(m.first_module))->op->has_out_device);
    diagnostics.error(experts ? "experts-device-mismatch" : "layer-device-mismatch",
                      rule_ref(rule) + " sets " + kwarg + " " + actual.str() + " for " + m.first_module + others +
                          ", but " + map_text + " runs " + layers + " on " + expected.str() +
                          " (this is \"Expected all tensors to be on the same device\" at run time)",
                      rule.kwarg_location(kwarg), rule.index);
  }
  // Uncovered layers: one error per contiguous run of layers.
  std::vector<int> layers;
  for (const auto& [layer, m] : uncovered) layers.push_back(layer);
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    int modules = uncovered[layers[i]].modules;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) modules += uncovered[layers[++j]].modules;
    const std::vector<int> run(layers.begin() + static_cast<long>(i), layers.begin() + static_cast<long>(j) + 1);
    diagnostics.error("layer-uncovered",
                      layers_text(run) + " of " + std::to_string(tree.num_layers()) +
                          " match no device-specific rule: " + uncovered[layers[i]].first_module +
                          (modules > 1 ? " and " + std::to_string(modules - 1) + " more modules" : "") +
                          " fell back to " + plan.options.default_device.str() +
                          "; extend the layer-range regexes to cover layers 0-" + std::to_string(tree.num_layers() - 1),
                      SourceLocation{plan.rules->file.string(), 0, 0});
    i = j + 1;
  }
}

void check_final_modules(const PlacementPlan& plan, Diagnostics& diagnostics) {
  const ModuleTree& tree = *plan.tree;
  const Device final_device = plan.final_device();
  for (const char* name : {"model.norm", "lm_head"}) {
    const int index = tree.find(name);
    if (index < 0) continue;
    const ModulePlacement& p = plan.owner_of(index);
    if (p.generate_device == final_device) continue;
    const bool norm = std::string_view(name) == "model.norm";
    const SourceLocation where = p.rule >= 0 ? plan.rules->rules[static_cast<std::size_t>(p.rule)].location
                                             : SourceLocation{plan.rules->file.string(), 0, 0};
    const std::string message = std::string(name) + " runs on " + p.generate_device.str() +
                                ", but the hidden state leaves the last layer on " + final_device.str() +
                                (norm ? "" : "; the logits will cross devices every token");
    if (norm) diagnostics.error("final-device-mismatch", message, where, p.rule >= 0 ? std::optional(p.rule) : std::nullopt);
    else diagnostics.warning("final-device-mismatch", message, where, p.rule >= 0 ? std::optional(p.rule) : std::nullopt);
  }
}

void check_default_fallbacks(const PlacementPlan& plan, Diagnostics& diagnostics) {
  const ModuleTree& tree = *plan.tree;
  std::vector<std::string> names;
  for (const ModulePlacement& p : plan.visited) {
    const Module& module = tree.at(p.module);
    if (p.rule >= 0 || module.layer >= 0) continue;
    std::uint64_t bytes = module.own_bytes();
    if (!p.recursive) bytes = tree.subtree_bytes(p.module);
    if (bytes > 0) names.emplace_back(module.name);
  }
  if (names.empty()) return;
  diagnostics.warning("default-device-fallback",
                      join(names, ", ") + (names.size() == 1 ? " holds" : " hold") +
                          " weights but matched no rule; in a multi-device profile it lands on the default device " +
                          plan.options.default_device.str() + ". Add a rule that places it explicitly",
                      SourceLocation{plan.rules->file.string(), 0, 0});
}

// Why a rule never won: it matches nothing, everything it matches went to earlier rules, or its
// modules sit below a `recursive: false` operator. Each rule is tried only on the modules whose
// names can hold its regex's required literal (ModuleNameIndex), in walk order, so that a profile
// of many rules is not checked against every module of the tree once per rule.
void check_dead_rules(const PlacementPlan& plan, Diagnostics& diagnostics) {
  const ModuleTree& tree = *plan.tree;
  std::shared_ptr<const ModuleNameIndex> index = plan.name_index;
  for (const Rule& rule : plan.rules->rules) {
    const auto i = static_cast<std::size_t>(rule.index);
    if (!rule.matchable || plan.rule_wins[i] > 0 || plan.runaway_rules[i]) continue;
    if (!index) index = std::make_shared<const ModuleNameIndex>(tree);
    const std::optional<std::vector<int>> candidates =
        rule.name_pattern ? index->candidates(rule.name_regex.required_literals()) : std::nullopt;
    const std::size_t count = candidates ? candidates->size() : tree.size();
    const auto candidate = [&](std::size_t k) { return candidates ? (*candidates)[k] : static_cast<int>(k); };
    std::string reason;
    for (std::size_t k = 0; k < count && reason.empty(); ++k) {
      const int m = candidate(k);
      const int visit = plan.visit_of[static_cast<std::size_t>(m)];
      if (visit < 0 || match_rule(rule, tree.at(m)) != RuleMatch::match) continue;
      const ModulePlacement& p = plan.visited[static_cast<std::size_t>(visit)];
      reason = "every module it matches is taken by an earlier rule (e.g. " + std::string(tree.at(m).name) + " by " +
               rule_ref(plan.rules->rules[static_cast<std::size_t>(p.rule)]) + ")";
    }
    for (std::size_t k = 0; k < count && reason.empty(); ++k) {
      const int m = candidate(k);
      if (plan.visit_of[static_cast<std::size_t>(m)] >= 0 || match_rule(rule, tree.at(m)) != RuleMatch::match) continue;
      const ModulePlacement& owner = plan.owner_of(m);
      reason = "the modules it matches (e.g. " + std::string(tree.at(m).name) + ") sit below " +
               std::string(tree.at(owner.module).name) + ", which " +
               (owner.rule >= 0 ? rule_ref(plan.rules->rules[static_cast<std::size_t>(owner.rule)]) : std::string("a rule")) +
               " places with recursive: false";
    }
    if (reason.empty()) {
      std::string what;
      if (rule.class_text) what += "class " + *rule.class_text;
      if (rule.name_pattern) what += (what.empty() ? "name " : " with name ") + quoted_excerpt(*rule.name_pattern);
      reason = "no module of this " + tree.config().model_type + " model matches " + what;
    }
    diagnostics.warning("dead-rule", rule_ref(rule) + " never applies: " + reason, rule.location, rule.index);
  }
}

}  // namespace

bool is_multi_gpu(const PlacementPlan& plan) {
  std::set<int> gpus;
  for (const ModulePlacement& p : plan.visited)
    for (const Device& d : {p.generate_device, p.prefill_device})
      if (d.is_cuda()) gpus.insert(d.index);
  for (const TransferMapEntry& e : plan.transfer_map())
    if (e.device.is_cuda()) gpus.insert(e.device.index);
  return gpus.size() >= 2;
}

void validate_plan(const PlacementPlan& plan, Diagnostics& diagnostics) {
  const bool multi_gpu = is_multi_gpu(plan);
  check_device_ranges(plan, diagnostics);
  check_transfer_map(plan, diagnostics);
  check_replacement_classes(plan, diagnostics);
  check_ops_fit_devices(plan, diagnostics);
  check_kwarg_effects(plan, diagnostics);
  check_layer_devices(plan, multi_gpu, diagnostics);
  check_final_modules(plan, diagnostics);
  if (multi_gpu) check_default_fallbacks(plan, diagnostics);
  check_dead_rules(plan, diagnostics);
}

}  // namespace switchyard
