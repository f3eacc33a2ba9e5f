#include "placement/quick_rules.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

#include "core/error.h"
#include "core/gguf_model.h"
#include "core/text.h"
#include "placement/module_name_index.h"
#include "placement/placement_plan.h"
#include "placement/rule_candidates.h"
#include "placement/regex.h"
#include "placement/rule_yaml.h"
#include "placement/yaml_scalars.h"

namespace switchyard {
namespace {

// CPU, CUDA0 (llama.cpp's spelling, any case), or what parse_device takes (cpu, cuda, cuda:N).
std::optional<Device> parse_quick_device(const std::string& text) {
  if (text.size() > 4 && std::isdigit(static_cast<unsigned char>(text[4])))
    return parse_device(text.substr(0, 4) + ":" + text.substr(4));
  return parse_device(text);
}

// A module a flag may select, with every name a pattern is tried against: the module's own, and
// the GGUF names of its weights (for a routed-experts container: its first expert's modules and
// their GGUF names, which are the layer's fused tensors).
struct Candidate {
  int module = 0;
  bool experts = false;
  int layer = -1;
  std::vector<std::string> names;
};

std::vector<Candidate> candidates_of(const ModuleTree& tree) {
  std::vector<Candidate> out;
  auto add_weights = [&](const Module& m, Candidate& c) {
    for (const Parameter& p : m.params) {
      const std::string name = std::string(m.name) + "." + std::string(p.name);
      c.names.push_back(name);
      if (const auto at = gguf_location(tree.config(), name)) c.names.push_back(at->tensor);
    }
  };
  for (int i = 0; i < static_cast<int>(tree.size()); ++i) {
    const Module& m = tree.at(i);
    if (m.expert >= 0) continue;  // covered by its container
    if (tree.is_routed_experts(i)) {
      Candidate c{i, true, m.layer, {std::string(m.name)}};
      // The first expert's modules (experts.0 and its projections).
      std::vector<int> stack(m.children.begin(), m.children.begin() + std::min<std::size_t>(1, m.children.size()));
      while (!stack.empty()) {
        const Module& e = tree.at(stack.back());
        stack.pop_back();
        c.names.emplace_back(e.name);
        add_weights(e, c);
        stack.insert(stack.end(), e.children.begin(), e.children.end());
      }
      out.push_back(std::move(c));
    } else if (!m.params.empty()) {
      Candidate c{i, false, m.layer, {std::string(m.name)}};
      add_weights(m, c);
      out.push_back(std::move(c));
    }
  }
  return out;
}

// ^(?:...)$ over exactly these modules: names that differ only in their layer number share one
// alternative, model\.layers\.(?:1|2|3)\.mlp\.experts.
std::string name_regex(const ModuleTree& tree, const std::vector<int>& modules) {
  std::map<std::pair<std::string, std::string>, std::vector<int>> by_template;  // (before, after) -> layers
  std::vector<std::pair<std::string, std::string>> order;
  std::vector<std::string> literals;
  for (int index : modules) {
    const Module& m = tree.at(index);
    const std::string name(m.name);
    const std::string mark = ".layers." + std::to_string(m.layer);
    const std::size_t at = m.layer >= 0 ? name.find(mark) : std::string::npos;
    if (at == std::string::npos) {
      literals.push_back(regex_escape(name));
      continue;
    }
    const std::size_t digits = at + std::string(".layers.").size();
    const std::pair<std::string, std::string> key{name.substr(0, digits), name.substr(digits + std::to_string(m.layer).size())};
    auto [it, inserted] = by_template.try_emplace(key);
    if (inserted) order.push_back(key);
    it->second.push_back(m.layer);
  }
  std::vector<std::string> alternatives;
  for (const auto& key : order) {
    std::vector<std::string> layers;
    for (int l : by_template[key]) layers.push_back(std::to_string(l));
    alternatives.push_back(regex_escape(key.first) + "(?:" + join(layers, "|") + ")" + regex_escape(key.second));
  }
  alternatives.insert(alternatives.end(), literals.begin(), literals.end());
  return "^(?:" + join(alternatives, "|") + ")$";
}

struct Selection {
  std::string origin;   // "-ot #2"
  std::string flag;     // the flag as typed, for messages: "-ot 'exps=CPU'"
  std::vector<int> experts, others;
  Device device;
};

const SourceLocation kCommandLine{"command line", 0, 0};

// A rule as parse_rules would read it from its YAML (rule_parser.cpp): the name regex compiled,
// the replacement and its ops found, the kwargs kept as written for reports and for split's
// profile text (rule_yaml), every location the command line. `op` nullptr: the operator's default.
Rule quick_rule(const std::string& origin, const std::string& name_pattern, const char* replacement, const Device& device,
                const char* op, bool recursive) {
  Rule rule;
  rule.origin = origin;
  rule.location = rule.name_location = rule.class_location = rule.replace_location = kCommandLine;
  rule.name_pattern = name_pattern;
  Regex::CompileError error;
  if (!Regex::compile(name_pattern, rule.name_regex, error))
    throw std::logic_error("quick rules: the pattern " + name_pattern + " does not compile: " + error.message);
  rule.replace_text = replacement;
  rule.replacement = find_replacement_class(replacement);
  if (!rule.replacement) throw std::logic_error(std::string("quick rules: no replacement class ") + replacement);
  rule.generate_device = rule.prefill_device = device;
  rule.kwargs["generate_device"] = device.str();
  if (op) {
    const OpInfo* found = rule.replacement->op->find_op(op);
    if (!found) throw std::logic_error(std::string("quick rules: no op ") + op + " of " + replacement);
    rule.generate_op = rule.prefill_op = found->name;
    rule.kwargs["generate_op"] = found->name;
  }
  rule.kwargs["prefill_device"] = device.str();
  if (op) rule.kwargs["prefill_op"] = rule.prefill_op;
  for (const auto& entry : rule.kwargs.items()) rule.kwarg_locations[entry.key()] = kCommandLine;
  rule.recursive = recursive;
  return rule;
}

// A selection's rules: its routed experts on the CPU's or the GPU's experts op, in both phases
// (handing their output to their layer's device), the rest on the default operator.
void add_rules(const ModuleTree& tree, const Selection& s, std::vector<Rule>& rules) {
  if (!s.experts.empty())
    rules.push_back(quick_rule(s.origin, name_regex(tree, s.experts), "ktransformers.operators.experts.KTransformersExperts",
                               s.device, s.device.is_cpu() ? "KExpertsCPU" : "KExpertsMarlin", /*recursive=*/false));
  if (!s.others.empty())
    rules.push_back(quick_rule(s.origin, name_regex(tree, s.others), "default", s.device, nullptr, /*recursive=*/true));
}

// The decoder stack's rule: the first layer's device, and the transfer_map entries where the
// layers change device.
void add_model_rule(const ModuleTree& tree, const std::vector<Device>& layer_devices, const std::string& origin,
                    std::vector<Rule>& rules) {
  int model = -1;
  for (int i = 0; i < static_cast<int>(tree.size()) && model < 0; ++i)
    if (tree.at(i).cls->role == ModuleRole::model) model = i;
  if (model < 0 || layer_devices.empty()) return;
  Rule rule = quick_rule(origin, "^" + regex_escape(std::string(tree.at(model).name)) + "$", "Model", layer_devices.front(),
                         nullptr, /*recursive=*/true);
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (std::size_t l = 1; l < layer_devices.size(); ++l)
    if (layer_devices[l] != layer_devices[l - 1]) {
      rule.transfer_map.push_back(TransferMapEntry{static_cast<int>(l), layer_devices[l], kCommandLine});
      map[std::to_string(l)] = layer_devices[l].str();
    }
  if (!rule.transfer_map.empty()) {
    rule.has_transfer_map = true;
    rule.kwargs["transfer_map"] = map;
    rule.kwarg_locations["transfer_map"] = kCommandLine;
  }
  rules.push_back(std::move(rule));
}

// The layer flags' selections: per run of layers on one device, its routed experts and every
// other module of those layers; the embedding (and whatever else holds weights outside the
// layers) with the first layer, the final norm and head with the last.
std::vector<Selection> layer_selections(const ModuleTree& tree, const std::vector<Device>& layer_devices,
                                        const std::string& origin) {
  std::vector<Selection> out;
  std::vector<int> run_of(layer_devices.size(), -1);
  for (std::size_t l = 0; l < layer_devices.size(); ++l) {
    if (l == 0 || layer_devices[l] != layer_devices[l - 1])
      out.push_back({origin, origin, {}, {}, layer_devices[l]});
    run_of[l] = static_cast<int>(out.size()) - 1;
  }
  Selection first{origin, origin, {}, {}, layer_devices.front()}, last{origin, origin, {}, {}, layer_devices.back()};
  for (int i = 0; i < static_cast<int>(tree.size()); ++i) {
    const Module& m = tree.at(i);
    if (m.expert >= 0) continue;  // with its container
    if (m.layer >= 0 && m.layer < static_cast<int>(layer_devices.size())) {
      Selection& s = out[static_cast<std::size_t>(run_of[static_cast<std::size_t>(m.layer)])];
      (tree.is_routed_experts(i) ? s.experts : s.others).push_back(i);
    } else if (m.layer < 0 && !m.params.empty()) {
      const std::string_view name = m.name;
      (name == "lm_head" || name == "model.norm" ? last : first).others.push_back(i);
    }
  }
  out.push_back(std::move(first));
  out.push_back(std::move(last));
  out.erase(std::remove_if(out.begin(), out.end(), [](const Selection& s) { return s.experts.empty() && s.others.empty(); }),
            out.end());
  return out;
}

}  // namespace

QuickRules compile_quick_rules(const QuickRuleFlags& flags, const LayerTarget& target, const ModuleTree& tree,
                               Diagnostics& diagnostics) {
  if (flags.empty() && !target.divide) return {};
  const std::vector<Candidate> candidates = candidates_of(tree);
  std::vector<Selection> selections;
  int pair_number = 0;
  for (const std::string& value : flags.override_tensor) {
    // Comma-separated pairs, as llama.cpp splits them; the device after the last '='.
    std::vector<std::string> pairs;
    for (std::size_t start = 0;;) {
      const std::size_t comma = value.find(',', start);
      pairs.push_back(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    for (const std::string& pair : pairs) {
      ++pair_number;
      const std::string flag = "-ot " + quoted_excerpt(pair);
      const std::size_t eq = pair.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
        throw InputError(flag + ": expected REGEX=DEVICE (e.g. -ot \"blk\\.(1[0-9])\\.ffn_.*_exps=CPU\")");
      const std::string pattern = pair.substr(0, eq), device_text = pair.substr(eq + 1);
      const std::optional<Device> device = parse_quick_device(device_text);
      if (!device)
        throw InputError(flag + ": " + quoted_excerpt(device_text) +
                         " is not a device (CPU, CUDA0, CUDA1, ... as llama.cpp writes them, or cpu, cuda:N)");
      Regex regex;
      Regex::CompileError error;
      if (!Regex::compile(pattern, regex, error))
        throw InputError(flag + ": the regex does not compile at offset " + std::to_string(error.offset) + ": " + error.message);
      Selection s{"-ot #" + std::to_string(pair_number), flag, {}, {}, *device};
      for (const Candidate& c : candidates) {
        const bool hit = std::any_of(c.names.begin(), c.names.end(),
                                     [&](const std::string& name) { return regex.search(name) == Regex::Outcome::match; });
        if (hit) (c.experts ? s.experts : s.others).push_back(c.module);
      }
      selections.push_back(std::move(s));
    }
  }
  const std::vector<int> moe_layers = tree.routed_experts();
  if (flags.cpu_moe) selections.push_back({"--cpu-moe", "--cpu-moe", moe_layers, {}, Device::cpu()});
  if (flags.n_cpu_moe) {
    const int n = *flags.n_cpu_moe;
    const std::string flag = "--n-cpu-moe " + std::to_string(n);
    if (n < 0 || n > static_cast<int>(moe_layers.size()))
      throw InputError(flag + ": this model has " + std::to_string(moe_layers.size()) + " MoE layers; give 0 to " +
                       std::to_string(moe_layers.size()));
    selections.push_back({flag, flag, std::vector<int>(moe_layers.begin(), moe_layers.begin() + n), {}, Device::cpu()});
  }
  if (!flags.fit_cpu_layers.empty()) {
    Selection fit{"--fit", "--fit", {}, {}, Device::cpu()};
    for (int container : moe_layers)
      if (std::find(flags.fit_cpu_layers.begin(), flags.fit_cpu_layers.end(), tree.at(container).layer) !=
          flags.fit_cpu_layers.end())
        fit.experts.push_back(container);
    selections.push_back(std::move(fit));
  }
  // One rule per GPU the fit brings experts to, after the CPU's (a layer is in one list only).
  std::map<Device, Selection> fit_to_gpus;
  for (const auto& [layer, device] : flags.fit_gpu_layers) {
    Selection& s = fit_to_gpus.try_emplace(device, Selection{"--fit", "--fit", {}, {}, device}).first->second;
    for (int container : moe_layers)
      if (tree.at(container).layer == layer) s.experts.push_back(container);
  }
  for (auto& entry : fit_to_gpus) selections.push_back(std::move(entry.second));
  std::vector<Device> layer_devices;
  if (target.divide && tree.num_layers() > 0) {
    layer_devices = assign_layer_devices(tree.num_layers(), target.gpus, flags.layers, target.budgets_bytes);
    // Every layer where the unplaced modules go anyway: nothing to say.
    if (std::all_of(layer_devices.begin(), layer_devices.end(), [&](const Device& d) { return d == target.default_device; }))
      layer_devices.clear();
  }
  if (!layer_devices.empty()) {
    std::vector<Selection> by_layer = layer_selections(tree, layer_devices, target.origin);
    // Routed experts an earlier flag placed are not the layer rules' to place (those would never win).
    std::set<int> taken;
    for (const Selection& s : selections) taken.insert(s.experts.begin(), s.experts.end());
    for (Selection& s : by_layer)
      s.experts.erase(std::remove_if(s.experts.begin(), s.experts.end(), [&](int m) { return taken.count(m) > 0; }),
                      s.experts.end());
    selections.insert(selections.end(), std::make_move_iterator(by_layer.begin()), std::make_move_iterator(by_layer.end()));
  }
  std::vector<Rule> rules;
  for (const Selection& s : selections) {
    if (s.experts.empty() && s.others.empty()) {
      diagnostics.warning("quick-rule-matches-nothing",
                          s.flag + " (" + s.origin + ") selects no weight of this model: no GGUF tensor name (blk.N.ffn_up_exps.weight) " +
                              "and no module name matches; it adds no rule",
                          kCommandLine);
      continue;
    }
    add_rules(tree, s, rules);
  }
  if (!layer_devices.empty()) add_model_rule(tree, layer_devices, target.origin, rules);
  for (std::size_t i = 0; i < rules.size(); ++i) rules[i].index = static_cast<int>(i);
  std::string yaml;
  for (const Rule& rule : rules) yaml += rule_yaml(rule) + "\n";
  return QuickRules{std::move(rules), std::move(yaml)};
}

RuleSet with_quick_rules(std::vector<Rule> quick, RuleSet profile) {
  if (quick.empty()) return profile;
  for (const Rule& rule : profile.rules)
    if (rule.index < static_cast<int>(quick.size()))
      throw std::logic_error("with_quick_rules: the profile was not parsed with first_index = the quick rules' count");
  quick.insert(quick.end(), std::make_move_iterator(profile.rules.begin()), std::make_move_iterator(profile.rules.end()));
  profile.rules = std::move(quick);
  return profile;
}

void warn_quick_rule_overrides(const PlacementPlan& plan, Diagnostics& diagnostics) {
  const RuleSet& rules = *plan.rules;
  const ModuleTree& tree = *plan.tree;
  struct Override {
    int modules = 0;
    std::string first_module, quick_devices, profile_devices;
  };
  // A large profile's rules are tried only where they can match (as the walk tries them).
  constexpr std::size_t kIndexedFrom = 64;
  std::optional<RuleCandidates> candidates;
  std::shared_ptr<const ModuleNameIndex> names = plan.name_index;
  if (rules.rules.size() >= kIndexedFrom) {
    if (!names) names = std::make_shared<const ModuleNameIndex>(tree);
    candidates.emplace(tree, rules, *names);
  }
  // The first profile rule that matches: the one that would have placed the module.
  auto profile_rule = [&](int index, const Module& module) -> const Rule* {
    auto tries = [&](const Rule& rule) { return rule.origin.empty() && match_rule(rule, module) == RuleMatch::match; };
    if (candidates) {
      const int found = candidates->first(index, [&](int rule) { return tries(rules.rules[static_cast<std::size_t>(rule)]); });
      return found < 0 ? nullptr : &rules.rules[static_cast<std::size_t>(found)];
    }
    for (const Rule& rule : rules.rules)
      if (tries(rule)) return &rule;
    return nullptr;
  };
  std::map<std::pair<int, int>, Override> overrides;  // (quick rule, profile rule)
  for (const ModulePlacement& p : plan.visited) {
    if (p.rule < 0 || rules.rules[static_cast<std::size_t>(p.rule)].origin.empty()) continue;
    // --fit overrides the profile's experts on purpose, and says what it moved (describe_fit).
    if (rules.rules[static_cast<std::size_t>(p.rule)].origin == "--fit") continue;
    const Module& module = tree.at(p.module);
    const Rule* rule = profile_rule(p.module, module);
    if (!rule) continue;
    const Device fallback = plan.options.default_device;
    const Device generate = rule->generate_device.value_or(rule->op().default_generate_device.value_or(fallback));
    const Device prefill = rule->prefill_device.value_or(fallback);
    if (generate == p.generate_device && prefill == p.prefill_device) continue;
    Override& o = overrides[{p.rule, rule->index}];
    if (o.modules++ == 0) {
      o.first_module = std::string(module.name);
      o.quick_devices = p.generate_device.str() + " in decode, " + p.prefill_device.str() + " in prefill";
      o.profile_devices = generate.str() + " in decode, " + prefill.str() + " in prefill";
    }
  }
  for (const auto& [key, o] : overrides) {
    const Rule& quick = rules.rules[static_cast<std::size_t>(key.first)];
    const Rule& profile = rules.rules[static_cast<std::size_t>(key.second)];
    diagnostics.warning("quick-rule-overrides-profile",
                        quick.label() + " puts " + o.first_module +
                            (o.modules > 1 ? " and " + std::to_string(o.modules - 1) + " more modules" : "") + " on " +
                            o.quick_devices + "; " + profile.label() + " also matches " +
                            (o.modules > 1 ? "them" : "it") + " and says " + o.profile_devices +
                            ". The command line's rules are tried first, so they win",
                        profile.location, profile.index);
  }
}

}  // namespace switchyard
