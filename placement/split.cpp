#include "placement/split.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/text.h"
#include "core/units.h"
#include "placement/memory_estimate.h"
#include "placement/regex.h"
#include "placement/yaml_scalars.h"
#include "placement/report.h"

namespace switchyard {
namespace {

using ordered_json = nlohmann::ordered_json;

// --- layer-range regexes -------------------------------------------------------------------

// Replace the last `digits` decimal digits of n by 9s / 0s.
long fill_nines(long n, int digits) {
  long p = 1;
  for (int i = 0; i < digits; ++i) p *= 10;
  return n - n % p + (p - 1);
}
long fill_zeros(long n, int digits) {
  long p = 1;
  for (int i = 0; i < digits; ++i) p *= 10;
  return n - n % p;
}

// [start, stop] with equal digit counts, where digits differ only in a tail of [x-y][0-9]...
std::string digit_pattern(long start, long stop) {
  const std::string a = std::to_string(start), b = std::to_string(stop);
  std::string out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) out += a[i];
    else if (a[i] == '0' && b[i] == '9') out += "[0-9]";
    else out += std::string("[") + a[i] + "-" + b[i] + "]";
  }
  return out;
}

// --- YAML emission -------------------------------------------------------------------------

std::string yaml_scalar(const ordered_json& value) {
  if (value.is_string()) return yaml_quote(value.get<std::string>());
  if (value.is_null()) return "null";
  return value.dump();
}

// Suffixes such as "mlp.experts.*.down_proj" as one regex, factored by common leading
// components so a person can read it: {self_attn.q_proj, self_attn.o_proj, mlp} ->
// "(self_attn\.(q_proj|o_proj)|mlp)". "*" stands for an index.
struct SuffixTrie {
  std::string component;
  bool terminal = false;
  std::vector<SuffixTrie> children;
};

void trie_insert(std::vector<SuffixTrie>& level, const std::vector<std::string>& parts, std::size_t i) {
  auto it = std::find_if(level.begin(), level.end(), [&](const SuffixTrie& n) { return n.component == parts[i]; });
  if (it == level.end()) it = level.insert(level.end(), SuffixTrie{parts[i], false, {}});
  if (i + 1 == parts.size()) it->terminal = true;
  else trie_insert(it->children, parts, i + 1);
}

std::string trie_regex(const std::vector<SuffixTrie>& level, bool wrap) {
  std::vector<std::string> alternatives;
  for (const SuffixTrie& node : level) {
    std::string text = node.component == "*" ? "[0-9]+" : regex_escape(node.component);
    if (!node.children.empty()) {
      const std::string tail = "\\." + trie_regex(node.children, true);
      text += node.terminal ? "(" + tail + ")?" : tail;
    }
    alternatives.push_back(text);
  }
  const std::string joined = join(alternatives, "|");
  return wrap && alternatives.size() > 1 ? "(" + joined + ")" : joined;
}

std::string suffixes_regex(const std::vector<std::string>& suffixes) {
  std::vector<SuffixTrie> root;
  for (const std::string& suffix : suffixes) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t dot; (dot = suffix.find('.', start)) != std::string::npos; start = dot + 1)
      parts.push_back(suffix.substr(start, dot - start));
    parts.push_back(suffix.substr(start));
    trie_insert(root, parts, 0);
  }
  return trie_regex(root, true);
}

Device retarget(const Device& device, const Device& gpu) { return device.is_cuda() ? gpu : device; }

struct Emitter {
  std::ostringstream out;

  void rule(const std::string& comment, const std::optional<std::string>& name, const std::optional<std::string>& cls,
            const std::string& replace_class, const ordered_json& kwargs, bool recursive) {
    if (!comment.empty()) out << "# " << comment << "\n";
    out << "- match:\n";
    if (name) out << "    name: " << yaml_quote(*name) << "\n";
    if (cls) out << "    class: " << *cls << "\n";
    out << "  replace:\n    class: " << yaml_quote(replace_class) << "\n";
    if (!kwargs.empty()) {
      out << "    kwargs:\n";
      for (const auto& [key, value] : kwargs.items()) {
        if (value.is_object()) {
          out << "      " << key << ":\n";
          for (const auto& [k, v] : value.items()) out << "        " << k << ": " << yaml_scalar(v) << "\n";
        } else {
          out << "      " << key << ": " << yaml_scalar(value) << "\n";
        }
      }
    }
    if (!recursive) out << "  recursive: false\n";
    out << "\n";
  }
};

// kwargs of the base rule with its devices moved to `gpu` (CPU placements stay on the CPU).
ordered_json placed_kwargs(const Rule* rule, const ModulePlacement& p, const Device& gpu) {
  ordered_json kwargs = ordered_json::object();
  kwargs["generate_device"] = retarget(p.generate_device, gpu).str();
  kwargs["prefill_device"] = retarget(p.prefill_device, gpu).str();
  if (p.out_device) kwargs["out_device"] = retarget(*p.out_device, gpu).str();
  if (rule)
    for (const auto& [key, value] : rule->kwargs.items())
      if (!kwargs.contains(key) && key != "transfer_map") kwargs[key] = value;
  return kwargs;
}

// A family of layer modules that the base places alike (same operator, kwargs and recursion):
// the split emits one rule per GPU for it.
struct LayerGroup {
  const Rule* rule = nullptr;
  const ModulePlacement* example = nullptr;
  std::vector<std::string> suffixes;
};

std::string group_key(const Rule* rule, const ModulePlacement& p) {
  ordered_json kwargs = placed_kwargs(rule, p, Device::cuda(0));
  return (rule ? rule->replace_text + "|" + rule->class_text.value_or("") : "default") + "|" + kwargs.dump() + "|" +
         (p.recursive ? "r" : "n");
}

const std::string& model_replacement(const ModelConfig& config) { return config.family->ktransformers_model_class; }

}  // namespace

std::string layer_range_regex(int first, int last) {
  if (first > last) return "";
  std::vector<long> stops = {last};
  for (int digits = 1;; ++digits) {
    const long stop = fill_nines(first, digits);
    if (stop >= last || stop < first) break;
    stops.push_back(stop);
  }
  for (int digits = 1;; ++digits) {
    const long stop = fill_zeros(static_cast<long>(last) + 1, digits) - 1;
    if (stop <= first || stop > last) break;
    stops.push_back(stop);
  }
  std::sort(stops.begin(), stops.end());
  stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  std::vector<std::string> parts;
  long start = first;
  for (long stop : stops) {
    parts.push_back(digit_pattern(start, stop));
    start = stop + 1;
  }
  return join(parts, "|");
}

std::vector<GpuShare> balance_layers(const std::vector<std::uint64_t>& layer_bytes, const std::vector<double>& budgets,
                                     std::uint64_t first_extra, std::uint64_t last_extra) {
  const int layers = static_cast<int>(layer_bytes.size());
  const int gpus = static_cast<int>(budgets.size());
  std::vector<double> prefix(static_cast<std::size_t>(layers) + 1, 0.0);
  for (int i = 0; i < layers; ++i) prefix[static_cast<std::size_t>(i) + 1] = prefix[static_cast<std::size_t>(i)] + static_cast<double>(layer_bytes[static_cast<std::size_t>(i)]);
  auto load = [&](int g, int begin, int end) {  // layers [begin, end) on GPU g, as a share of its budget
    double bytes = prefix[static_cast<std::size_t>(end)] - prefix[static_cast<std::size_t>(begin)];
    if (g == 0) bytes += static_cast<double>(first_extra);
    if (g == gpus - 1) bytes += static_cast<double>(last_extra);
    return bytes / budgets[static_cast<std::size_t>(g)];
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[g][i]: smallest achievable max load placing layers [0, i) on GPUs 0..g
  std::vector<std::vector<double>> best(static_cast<std::size_t>(gpus), std::vector<double>(static_cast<std::size_t>(layers) + 1, kInf));
  std::vector<std::vector<int>> cut(static_cast<std::size_t>(gpus), std::vector<int>(static_cast<std::size_t>(layers) + 1, 0));
  for (int i = 1; i <= layers; ++i) best[0][static_cast<std::size_t>(i)] = load(0, 0, i);
  for (int g = 1; g < gpus; ++g)
    for (int i = g + 1; i <= layers; ++i)
      for (int j = g; j < i; ++j) {
        const double value = std::max(best[static_cast<std::size_t>(g) - 1][static_cast<std::size_t>(j)], load(g, j, i));
        if (value < best[static_cast<std::size_t>(g)][static_cast<std::size_t>(i)]) {
          best[static_cast<std::size_t>(g)][static_cast<std::size_t>(i)] = value;
          cut[static_cast<std::size_t>(g)][static_cast<std::size_t>(i)] = j;
        }
      }
  std::vector<GpuShare> shares(static_cast<std::size_t>(gpus));
  int end = layers;
  for (int g = gpus - 1; g >= 0; --g) {
    const int begin = g == 0 ? 0 : cut[static_cast<std::size_t>(g)][static_cast<std::size_t>(end)];
    GpuShare& s = shares[static_cast<std::size_t>(g)];
    s.first_layer = begin;
    s.last_layer = end - 1;
    s.bytes = static_cast<std::uint64_t>(prefix[static_cast<std::size_t>(end)] - prefix[static_cast<std::size_t>(begin)]) +
              (g == 0 ? first_extra : 0) + (g == gpus - 1 ? last_extra : 0);
    end = begin;
  }
  return shares;
}

SplitResult split_profile(const CheckResult& base, int gpus, const MemoryBudget& budget, const std::string& base_name) {
  const ModuleTree& tree = *base.tree;
  const PlacementPlan& plan = base.plan;
  const int layers = tree.num_layers();
  const std::vector<std::uint64_t>& gpu_budgets = budget.gpu_bytes;
  if (base.diagnostics.has_errors()) throw InputError("the base profile has errors; fix them (see `switchyard check`) before splitting", 1);
  if (gpus < 1) throw InputError("--gpus must be at least 1 for split");
  if (gpus > layers) throw InputError("cannot split " + std::to_string(layers) + " layers over " + std::to_string(gpus) + " GPUs");
  if (gpu_budgets.size() > 1 && static_cast<int>(gpu_budgets.size()) != gpus)
    throw InputError("--gpu_memory lists " + std::to_string(gpu_budgets.size()) + " sizes for " + std::to_string(gpus) + " GPUs");

  // What each layer costs on its GPU in the base plan: weights a GPU holds (in decode or in
  // prefill, as estimate_memory counts them) plus its KV cache.
  std::vector<std::uint64_t> layer_bytes(static_cast<std::size_t>(layers), 0);
  std::uint64_t first_extra = 0, last_extra = 0;
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const Module& module = tree.at(static_cast<int>(i));
    const std::vector<Device> held_by = weight_devices(plan.owner_of(static_cast<int>(i)));
    if (module.params.empty() ||
        std::none_of(held_by.begin(), held_by.end(), [](const Device& d) { return d.is_cuda(); }))
      continue;
    if (module.layer >= 0) layer_bytes[static_cast<std::size_t>(module.layer)] += module.own_bytes();
    else if (module.name == "model.norm" || module.name == "lm_head") last_extra += module.own_bytes();
    else first_extra += module.own_bytes();
  }
  const std::uint64_t kv_per_layer = kv_cache_layout(tree.config(), budget).bytes();
  for (const ModulePlacement& p : plan.visited) {
    const Module& module = tree.at(p.module);
    if (module.cls->role == ModuleRole::attention && p.generate_device.is_cuda() && module.layer >= 0)
      layer_bytes[static_cast<std::size_t>(module.layer)] += kv_per_layer;
  }
  std::vector<double> weights(static_cast<std::size_t>(gpus), 1.0);
  for (int g = 0; g < gpus && !gpu_budgets.empty(); ++g)
    weights[static_cast<std::size_t>(g)] = static_cast<double>(gpu_budgets[gpu_budgets.size() == 1 ? 0 : static_cast<std::size_t>(g)]);
  SplitResult result;
  result.gpus = balance_layers(layer_bytes, weights, first_extra, last_extra);
  for (int g = 0; g < gpus && !gpu_budgets.empty(); ++g)
    result.gpus[static_cast<std::size_t>(g)].budget_bytes = static_cast<std::uint64_t>(weights[static_cast<std::size_t>(g)]);

  // Group the base's layer modules by how they are placed.
  std::vector<LayerGroup> groups;
  std::map<std::string, std::size_t> group_index;
  std::vector<const ModulePlacement*> outside_layers;
  for (const ModulePlacement& p : plan.visited) {
    const Module& module = tree.at(p.module);
    const Rule* rule = p.rule >= 0 ? &base.rules->rules[static_cast<std::size_t>(p.rule)] : nullptr;
    const bool plain_default = p.op->kind == OperatorKind::default_op && p.generate_device.is_cuda() &&
                               p.prefill_device.is_cuda() && p.recursive;
    if (module.layer < 0) {
      const ModuleRole role = module.cls->role;
      if (!module.params.empty() || p.op->kind != OperatorKind::default_op || role == ModuleRole::rotary)
        outside_layers.push_back(&p);
      continue;
    }
    if (plain_default) continue;  // the per-GPU catch-all places these
    if (module.cls->role == ModuleRole::decoder_layer && p.op->kind == OperatorKind::default_op) continue;
    const std::string key = group_key(rule, p);
    auto [it, inserted] = group_index.emplace(key, groups.size());
    if (inserted) groups.push_back(LayerGroup{rule, &p, {}});
    LayerGroup& group = groups[it->second];
    const std::string suffix = module_group_suffix(module);
    if (std::find(group.suffixes.begin(), group.suffixes.end(), suffix) == group.suffixes.end())
      group.suffixes.push_back(suffix);
  }

  Emitter e;
  const ModelConfig& config = tree.config();
  e.out << "# " << gpus << "-GPU profile for " << config.source << " (" << config.model_type << ", " << layers
        << " layers), made from " << base_name
        << "\n# by `switchyard split --gpus " << gpus << "`; edit freely, then run `switchyard check` on it.\n";
  e.out << "# Layers per GPU (bytes on the GPU incl. KV cache at the base's --max_context):\n";
  for (int g = 0; g < gpus; ++g) {
    const GpuShare& s = result.gpus[static_cast<std::size_t>(g)];
    e.out << "#   cuda:" << g << "  layers " << s.first_layer << "-" << s.last_layer << "  " << format_bytes(s.bytes);
    if (s.budget_bytes) e.out << " of " << format_bytes(s.budget_bytes);
    e.out << "\n";
  }
  e.out << "\n";
  const Device last_gpu = Device::cuda(gpus - 1);

  for (const ModulePlacement* p : outside_layers) {
    const Module& module = tree.at(p->module);
    if (module.cls->role == ModuleRole::model) continue;  // emitted with the transfer_map below
    const bool at_end = module.name == "model.norm" || module.name == "lm_head";
    if (at_end) continue;
    const Rule* rule = p->rule >= 0 ? &base.rules->rules[static_cast<std::size_t>(p->rule)] : nullptr;
    e.rule("", "^" + regex_escape(module.name) + "$", std::nullopt, rule ? rule->replace_text : "default",
           placed_kwargs(rule, *p, Device::cuda(0)), p->recursive);
  }
  for (const LayerGroup& group : groups) {
    const std::string suffixes = suffixes_regex(group.suffixes);
    for (int g = 0; g < gpus; ++g) {
      const GpuShare& s = result.gpus[static_cast<std::size_t>(g)];
      const std::string comment =
          g == 0 ? join(group.suffixes, ", ") + ": cuda:" + std::to_string(g) + ", layers " + std::to_string(s.first_layer) +
                       "-" + std::to_string(s.last_layer)
                 : "cuda:" + std::to_string(g) + ", layers " + std::to_string(s.first_layer) + "-" + std::to_string(s.last_layer);
      e.rule(comment, "^model\\.layers\\.(" + layer_range_regex(s.first_layer, s.last_layer) + ")\\." + suffixes + "$",
             group.rule ? group.rule->class_text : std::nullopt, group.rule ? group.rule->replace_text : "default",
             placed_kwargs(group.rule, *group.example, Device::cuda(g)), group.example->recursive);
    }
  }
  for (int g = 0; g < gpus; ++g) {
    const GpuShare& s = result.gpus[static_cast<std::size_t>(g)];
    ordered_json kwargs = {{"generate_device", Device::cuda(g).str()}, {"prefill_device", Device::cuda(g).str()}};
    e.rule(g == 0 ? "everything else in a layer runs where its layer runs" : "",
           "^model\\.layers\\.(" + layer_range_regex(s.first_layer, s.last_layer) + ")\\.", std::nullopt, "default",
           kwargs, true);
  }
  // The decoder stack, with the hidden state moving to each GPU where its layers begin.
  {
    const int model = tree.find("model");
    const ModulePlacement* p = model >= 0 ? plan.placement_of(model) : nullptr;
    const Rule* rule = p && p->rule >= 0 ? &base.rules->rules[static_cast<std::size_t>(p->rule)] : nullptr;
    ordered_json kwargs = ordered_json::object();
    if (rule)
      for (const auto& [key, value] : rule->kwargs.items())
        if (key != "transfer_map" && key != "generate_device" && key != "prefill_device") kwargs[key] = value;
    ordered_json map = ordered_json::object();
    for (int g = 1; g < gpus; ++g) map[std::to_string(result.gpus[static_cast<std::size_t>(g)].first_layer)] = Device::cuda(g).str();
    if (!map.empty()) kwargs["transfer_map"] = map;
    const bool kt_model = rule && rule->replacement && rule->replacement->op->kind == OperatorKind::model;
    e.rule("decoder stack; transfer_map moves the hidden state to the GPU that runs the next layers", "^model$",
           std::nullopt, kt_model ? rule->replace_text : model_replacement(config), kwargs, true);
  }
  for (const char* name : {"model.norm", "lm_head"}) {
    const int index = tree.find(name);
    if (index < 0 || !plan.placement_of(index)) continue;
    const ModulePlacement& p = *plan.placement_of(index);
    const Rule* rule = p.rule >= 0 ? &base.rules->rules[static_cast<std::size_t>(p.rule)] : nullptr;
    ordered_json kwargs = placed_kwargs(rule, p, last_gpu);
    kwargs["generate_device"] = last_gpu.str();  // the hidden state leaves the last layer there
    kwargs["prefill_device"] = last_gpu.str();
    e.rule(std::string(name) == "lm_head" ? "" : "final norm and lm_head run on the last GPU",
           "^" + regex_escape(name) + "$", rule ? rule->class_text : std::nullopt, rule ? rule->replace_text : "default",
           kwargs, p.recursive);
  }
  result.yaml = e.out.str();
  return result;
}

}  // namespace switchyard
