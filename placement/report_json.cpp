#include "placement/implementation.h"
#include "placement/report.h"

namespace switchyard {

using nlohmann::ordered_json;

namespace {

ordered_json model_json(const CheckResult& result) {
  const ModuleTree& tree = *result.tree;
  const ModelConfig& c = tree.config();
  return ordered_json{{"source", c.source},
                      {"model_type", c.model_type},
                      {"num_hidden_layers", c.num_hidden_layers},
                      {"n_routed_experts", c.n_routed_experts},
                      {"parameters", tree.total_parameter_count()},
                      {"weight_dtype", result.weight_dtype},
                      {"gpus", result.plan.options.gpus},
                      {"default_device", result.plan.options.default_device.str()}};
}

ordered_json module_json(const CheckResult& result, const ModulePlacement& p) {
  const Module& module = result.tree->at(p.module);
  const Rule* rule = p.rule >= 0 ? &result.rules->rules[static_cast<std::size_t>(p.rule)] : nullptr;
  ordered_json m;
  m["name"] = module.name;
  m["class"] = module.cls->display_name();
  m["op"] = p.op->name;
  m["generate_device"] = p.generate_device.str();
  m["prefill_device"] = p.prefill_device.str();
  m["generate_op"] = p.generate_op.empty() ? ordered_json(nullptr) : ordered_json(p.generate_op);
  m["prefill_op"] = p.prefill_op.empty() ? ordered_json(nullptr) : ordered_json(p.prefill_op);
  if (p.out_device) m["out_device"] = p.out_device->str();
  const PhaseImplementations runs = result.plan.implementation(p.module);
  m["implementation"] = ordered_json{{"generate", implementation_name(runs.generate)},
                                     {"prefill", implementation_name(runs.prefill)}};
  m["rule_number"] = rule ? ordered_json(rule->number()) : ordered_json(nullptr);
  m["line"] = rule ? ordered_json(rule->location.line) : ordered_json(nullptr);
  m["recursive"] = p.recursive;
  m["weight_bytes"] = p.recursive ? module.own_bytes() : result.tree->subtree_bytes(p.module);
  // Each of its own parameters as stored and as each device that holds it keeps it (the plan's
  // resolved storage; a routed-experts container's experts are modules of their own, not listed).
  ordered_json weights = ordered_json::array();
  for (std::size_t i = 0; i < module.params.size(); ++i) {
    ordered_json kept = ordered_json::object();
    for (const ResidentWeight& r : result.plan.resident[static_cast<std::size_t>(p.module)])
      if (r.param == static_cast<int>(i)) kept[r.device.str()] = dtype_name(r.dtype);
    weights.push_back(ordered_json{{"name", module.params[i].name},
                                   {"stored", dtype_name(module.params[i].dtype)},
                                   {"resident", std::move(kept)}});
  }
  m["weights"] = std::move(weights);
  return m;
}

// Each rule once, with its kwargs as written; modules refer to it by "rule_number", which counts
// from 1 as every message does (rules[rule_number - 1] is the rule). (A copy of the
// kwargs per module would make a document of a hundred thousand modules times a rule's kwargs.)
ordered_json rules_json(const RuleSet& rules) {
  ordered_json out = ordered_json::array();
  for (const Rule& rule : rules.rules)
    out.push_back(ordered_json{{"rule_number", rule.number()},
                               {"line", rule.location.line},
                               {"class", rule.replace_text},
                               {"kwargs", rule.kwargs}});
  return out;
}

ordered_json diagnostic_json(const Diagnostic& d) {
  return ordered_json{{"severity", severity_name(d.severity)},
                      {"code", d.code},
                      {"message", d.message},
                      {"file", d.location.file.empty() ? ordered_json(nullptr) : ordered_json(d.location.file)},
                      {"line", d.location.line > 0 ? ordered_json(d.location.line) : ordered_json(nullptr)},
                      {"column", d.location.column > 0 ? ordered_json(d.location.column) : ordered_json(nullptr)},
                      {"rule_number", d.rule ? ordered_json(*d.rule + 1) : ordered_json(nullptr)}};
}

}  // namespace

ordered_json check_to_json(const CheckResult& result, const MemoryBudget& budget) {
  ordered_json out;
  out["model"] = model_json(result);
  ordered_json modules = ordered_json::array();
  for (const ModulePlacement& p : result.plan.visited) modules.push_back(module_json(result, p));
  out["modules"] = std::move(modules);
  out["rules"] = rules_json(*result.rules);
  ordered_json map = ordered_json::object();
  for (const TransferMapEntry& e : result.plan.transfer_map()) map[std::to_string(e.layer)] = e.device.str();
  out["transfer_map"] = std::move(map);
  ordered_json devices = ordered_json::array();
  for (const DeviceMemory& m : result.memory)
    devices.push_back(ordered_json{{"device", m.device.str()},
                                   {"weight_bytes", m.weight_bytes},
                                   {"one_phase_weight_bytes", m.one_phase_bytes},
                                   {"kv_cache_bytes", m.kv_cache_bytes},
                                   {"prefill_buffer_bytes", m.prefill_buffer_bytes},
                                   {"dequantize_buffer_bytes", m.dequantize_buffer_bytes},
                                   {"total_bytes", m.total_bytes()},
                                   {"budget_bytes", m.budget_bytes ? ordered_json(*m.budget_bytes) : ordered_json(nullptr)}});
  out["devices"] = std::move(devices);
  if (!result.physical_gpus.empty()) {
    ordered_json physical = ordered_json::array();
    for (const PhysicalGpuMemory& g : result.physical_gpus) {
      ordered_json logical = ordered_json::array();
      for (const Device d : g.logical) logical.push_back(d.str());
      physical.push_back(ordered_json{{"gpu", g.gpu},
                                      {"runs", std::move(logical)},
                                      {"total_bytes", g.total_bytes},
                                      {"budget_bytes", g.budget_bytes ? ordered_json(*g.budget_bytes) : ordered_json(nullptr)}});
    }
    out["physical_gpus"] = std::move(physical);
  }
  out["max_context"] = budget.max_context;
  out["kv_cache_dtype"] = dtype_name(kv_cache_layout(result.tree->config(), budget).dtype);
  ordered_json diagnostics = ordered_json::array();
  for (const Diagnostic& d : result.diagnostics.sorted()) diagnostics.push_back(diagnostic_json(d));
  out["diagnostics"] = std::move(diagnostics);
  return out;
}

}  // namespace switchyard
