#include <algorithm>
#include <map>
#include <sstream>

#include "core/text.h"
#include "core/units.h"
#include "placement/implementation.h"
#include "placement/report.h"

namespace switchyard {
namespace {

struct Row {
  std::string key;
  std::string suffix;  // for layer rows
  std::vector<int> layers;
  std::string name;    // for rows outside the layers
  std::string op, runs, decode, prefill, rule;
  std::uint64_t bytes = 0;
  int modules = 0;
};

std::string op_text(const ModulePlacement& p, const Rule* rule) {
  std::string text = p.op->name;
  if (rule && rule->replacement && rule->replace_text != p.op->name) {
    const auto dot = rule->replace_text.rfind('.');
    text += " (" + rule->replace_text.substr(dot == std::string::npos ? 0 : dot + 1) + ")";
  }
  if (!p.op->ops.empty()) text += " " + p.generate_op + "/" + p.prefill_op;
  return text;
}

// "experts.cpu" when both phases run one implementation, else "decode/prefill" as the OP column
// writes the ops: "experts.cpu/experts.gpu".
std::string runs_text(const PhaseImplementations& runs) {
  if (runs.generate == runs.prefill) return implementation_name(runs.generate);
  return std::string(implementation_name(runs.generate)) + "/" + implementation_name(runs.prefill);
}

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string render(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (widths.size() <= c) widths.push_back(0);
      widths[c] = std::max(widths[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) line += c + 1 == row.size() ? row[c] : pad(row[c], widths[c] + 2);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::vector<Row> group_rows(const CheckResult& result) {
  const ModuleTree& tree = *result.tree;
  const PlacementPlan& plan = result.plan;
  std::vector<Row> rows;
  std::map<std::string, std::size_t> index;
  for (const ModulePlacement& p : plan.visited) {
    const Module& module = tree.at(p.module);
    const Rule* rule = p.rule >= 0 ? &result.rules->rules[static_cast<std::size_t>(p.rule)] : nullptr;
    Row row;
    row.op = op_text(p, rule);
    row.runs = runs_text(plan.implementation(p.module));
    row.decode = p.generate_device.str();
    if (p.out_device && *p.out_device != p.generate_device) row.decode += " -> " + p.out_device->str();
    row.prefill = p.prefill_device.str();
    row.rule = rule ? "#" + std::to_string(rule->number()) + " " + rule->where() : "-";
    const std::uint64_t bytes = p.recursive ? module.own_bytes() : tree.subtree_bytes(p.module);
    const bool in_layer = module.layer >= 0;
    if (in_layer) row.suffix = module_group_suffix(module);
    else row.name = module.name.empty() ? std::string("(root)") : std::string(module.name);
    row.key = (in_layer ? "L|" + row.suffix : "N|" + row.name) + "|" + row.op + "|" + row.runs + "|" + row.decode +
              "|" + row.prefill + "|" + row.rule;
    auto [it, inserted] = index.emplace(row.key, rows.size());
    if (inserted) rows.push_back(row);
    Row& target = rows[it->second];
    target.bytes += bytes;
    ++target.modules;
    if (in_layer && (target.layers.empty() || target.layers.back() != module.layer)) target.layers.push_back(module.layer);
  }
  return rows;
}

std::string budget_text(const std::optional<std::uint64_t>& budget) { return budget ? format_bytes(*budget) : "-"; }

std::string headroom_text(std::uint64_t total, const std::optional<std::uint64_t>& budget) {
  if (!budget) return "-";
  if (total > *budget) return "OVER by " + format_bytes(total - *budget);
  return format_bytes(*budget - total);
}

std::string headroom_text(const DeviceMemory& m) { return headroom_text(m.total_bytes(), m.budget_bytes); }

}  // namespace

std::string module_group_suffix(const Module& module) {
  // "model.layers.12.mlp.experts.7.down_proj" -> "mlp.experts.*.down_proj"
  std::string_view name = module.name;
  const std::string prefix = "model.layers." + std::to_string(module.layer);
  name.remove_prefix(std::min(name.size(), prefix.size()));
  if (!name.empty() && name.front() == '.') name.remove_prefix(1);
  std::string suffix(name);
  if (module.expert >= 0) {
    const std::string expert = ".experts." + std::to_string(module.expert);
    const auto at = suffix.find(expert);
    if (at != std::string::npos) suffix.replace(at, expert.size(), ".experts.*");
  }
  return suffix.empty() ? "(decoder layer)" : suffix;
}

std::string format_check_table(const CheckResult& result, const MemoryBudget& budget) {
  const ModuleTree& tree = *result.tree;
  std::ostringstream out;
  const ModelConfig& c = tree.config();
  out << "model: " << c.source << " (" << c.model_type << ", " << c.num_hidden_layers << " layers, "
      << c.n_routed_experts << " routed experts, " << std::fixed;
  out.precision(1);
  // 671.0B for DeepSeek-V3, 487.3K for a tiny test model.
  const double parameters = static_cast<double>(tree.total_parameter_count());
  if (parameters >= 1e9) out << parameters / 1e9 << "B";
  else if (parameters >= 1e6) out << parameters / 1e6 << "M";
  else out << parameters / 1e3 << "K";
  out << " parameters, weights " << result.weight_dtype << ")\n";
  std::vector<std::string> quick;    // the command line's quick rules, tried first
  std::vector<std::string> origins;  // their flags, each once
  for (const Rule& rule : result.rules->rules) {
    if (rule.origin.empty()) continue;
    quick.push_back(rule.origin);
    if (std::find(origins.begin(), origins.end(), rule.origin) == origins.end()) origins.push_back(rule.origin);
  }
  out << "profile: ";
  if (result.rules->file.empty()) out << "none";
  else out << result.rules->file.string() << " (" << result.rules->rules.size() - quick.size() << " rules)";
  if (!quick.empty())
    out << (result.rules->file.empty() ? "; " : " after ") << quick.size() << " quick rule" << (quick.size() == 1 ? "" : "s")
        << " from the command line (" << join(origins, ", ") << ")";
  out << ", " << result.plan.options.gpus << " GPU" << (result.plan.options.gpus == 1 ? "" : "s") << ", default device "
      << result.plan.options.default_device.str() << "\n";
  if (result.fit) out << describe_fit(*result.fit) << "\n";
  out << "\n";

  std::vector<std::vector<std::string>> rows = {{"MODULES", "OP", "IMPLEMENTATION", "DECODE", "PREFILL", "RULE", "WEIGHTS"}};
  for (const Row& row : group_rows(result)) {
    std::string modules = row.name;
    if (modules.empty())
      modules = std::string(row.layers.size() == 1 ? "layer " : "layers ") + format_ranges(row.layers) + " " + row.suffix;
    rows.push_back({modules, row.op, row.runs, row.decode, row.prefill, row.rule, row.bytes ? format_bytes(row.bytes) : "-"});
  }
  out << render(rows);

  const auto& map = result.plan.transfer_map();
  if (!map.empty()) {
    out << "\ntransfer_map:";
    for (const TransferMapEntry& e : map) out << " " << e.layer << "->" << e.device.str();
    out << "\n";
  }

  out << "\n";
  std::vector<std::vector<std::string>> devices = {
      {"DEVICE", "WEIGHTS",
       "KV CACHE (" + std::to_string(budget.max_context) + " tok, " +
           dtype_name(kv_cache_layout(result.tree->config(), budget).dtype) + ")",
       "TOTAL", "BUDGET", "HEADROOM"}};
  for (const DeviceMemory& m : result.memory)
    devices.push_back({m.device.str(), format_bytes(m.weight_bytes), format_bytes(m.kv_cache_bytes),
                       format_bytes(m.total_bytes()), budget_text(m.budget_bytes), headroom_text(m)});
  out << render(devices);
  if (!result.physical_gpus.empty()) {
    std::vector<std::vector<std::string>> physical = {{"PHYSICAL GPU", "RUNS (--device_map)", "TOTAL", "BUDGET", "HEADROOM"}};
    for (const PhysicalGpuMemory& g : result.physical_gpus) {
      std::string logical;
      for (const Device d : g.logical) logical += (logical.empty() ? "" : ",") + d.str();
      physical.push_back({std::to_string(g.gpu), logical, format_bytes(g.total_bytes), budget_text(g.budget_bytes),
                          headroom_text(g.total_bytes, g.budget_bytes)});
    }
    out << "\n" << render(physical);
  }
  for (const DeviceMemory& m : result.memory)
    if (m.prefill_buffer_bytes > 0)
      out << m.device.str() << "'s total includes " << format_bytes(m.prefill_buffer_bytes)
          << " of buffers for the routed experts' prefill (" << budget.prefill_chunk
          << "-token chunks: run --prefill_chunk)\n";
  for (const DeviceMemory& m : result.memory)
    if (m.dequantize_buffer_bytes > 0)
      out << m.device.str() << "'s total includes " << format_bytes(m.dequantize_buffer_bytes)
          << " for prefill on projections kept in ggml blocks (a chunk of rows dequantized to bf16 at a time)\n";
  // Weights a device holds for one phase only (routed experts that prefill there and decode
  // elsewhere, or the other way round): a full copy, easy to miss in the table.
  for (const DeviceMemory& m : result.memory)
    if (m.device.is_cuda() && m.one_phase_bytes > 0)
      out << m.device.str() << " holds " << format_bytes(m.one_phase_bytes)
          << " of routed experts for one phase only (prefill_device or generate_device there, the other phase "
             "elsewhere)\n";

  const auto diagnostics = result.diagnostics.sorted();
  if (!diagnostics.empty()) out << "\n";
  for (const Diagnostic& d : diagnostics) out << format_diagnostic(d) << "\n";
  out << "\n"
      << result.diagnostics.count(Severity::error) << " error(s), " << result.diagnostics.count(Severity::warning)
      << " warning(s)\n";
  return out.str();
}

}  // namespace switchyard
