#include "core/trace.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

#if SWITCHYARD_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace switchyard {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int kRegions = static_cast<int>(Region::count);

}  // namespace

const char* region_name(Region region) {
  switch (region) {
    case Region::prefill: return "prefill";
    case Region::decode_step: return "decode_step";
    case Region::self_attention: return "self_attention";
    case Region::moe_gate: return "moe_gate";
    case Region::routed_experts: return "routed_experts";
    case Region::shared_experts: return "shared_experts";
    case Region::dense_mlp: return "dense_mlp";
    case Region::lm_head: return "lm_head";
    case Region::count: break;
  }
  return "?";
}

std::vector<bool> parse_layer_selection(const std::string& text, int num_layers) {
  std::vector<bool> selected(static_cast<std::size_t>(num_layers), false);
  if (text.empty() || text == "none") return selected;
  if (text == "all") return std::vector<bool>(static_cast<std::size_t>(num_layers), true);
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    int first = 0, last = 0;
    char dash = 0, extra = 0;
    const int fields = std::sscanf(item.c_str(), "%d%c%d%c", &first, &dash, &last, &extra);
    if (fields == 1) last = first;
    else if (!(fields == 3 && dash == '-')) throw InputError("--nvtx_layers: '" + item + "' is not a layer or a range a-b");
    if (first < 0 || last >= num_layers || first > last)
      throw InputError("--nvtx_layers: '" + item + "' is outside the model's layers 0-" + std::to_string(num_layers - 1));
    for (int l = first; l <= last; ++l) selected[static_cast<std::size_t>(l)] = true;
  }
  return selected;
}

Tracer::Tracer(std::vector<bool> nvtx_layers, bool profile) : nvtx_layers_(std::move(nvtx_layers)), profile_(profile) {
  any_nvtx_ = std::any_of(nvtx_layers_.begin(), nvtx_layers_.end(), [](bool b) { return b; });
  const std::size_t layers = nvtx_layers_.size() + 1;
  names_.resize(static_cast<std::size_t>(kRegions) * layers);
  for (int r = 0; r < kRegions; ++r)
    for (std::size_t l = 0; l < layers; ++l) {
      std::string n = region_name(static_cast<Region>(r));
      if (l > 0) n += "_" + std::to_string(l - 1);
      names_[static_cast<std::size_t>(r) * layers + l] = std::move(n);
    }
  if (profile_) events_.reserve(1 << 16);
}

bool Tracer::nvtx_on(int layer) const {
  if (!any_nvtx_) return false;
  return layer < 0 || nvtx_layers_[static_cast<std::size_t>(layer)];
}

const char* Tracer::name(Region region, int layer) const {
  const std::size_t layers = nvtx_layers_.size() + 1;
  return names_[static_cast<std::size_t>(region) * layers + static_cast<std::size_t>(layer + 1)].c_str();
}

Tracer::Scope::Scope(Tracer* tracer, Region region, int layer) : region_(region), layer_(layer) {
  if (!tracer) return;
  nvtx_ = tracer->nvtx_on(layer);
  if (!nvtx_ && !tracer->profile_) return;
  tracer_ = tracer;
#if SWITCHYARD_HAVE_NVTX
  if (nvtx_) nvtxRangePushA(tracer->name(region, layer));
#endif
  if (tracer->profile_) start_ns_ = now_ns();
}

Tracer::Scope::~Scope() {
  if (!tracer_) return;
  if (tracer_->profile_) tracer_->events_.push_back(Event{region_, layer_, tracer_->step_, start_ns_, now_ns()});
#if SWITCHYARD_HAVE_NVTX
  if (nvtx_) nvtxRangePop();
#endif
}

std::string Tracer::profile_table() const {
  // Mean milliseconds per decode step, per layer and region.
  std::map<int, std::array<double, kRegions>> per_layer;
  std::array<double, kRegions> totals{};
  std::map<int, bool> steps;
  for (const Event& e : events_) {
    if (e.step == 0) continue;  // prefill is reported on its own line
    steps[e.step] = true;
    const double ms = static_cast<double>(e.end_ns - e.start_ns) / 1e6;
    if (e.layer >= 0) per_layer[e.layer][static_cast<std::size_t>(e.region)] += ms;
    totals[static_cast<std::size_t>(e.region)] += ms;
  }
  const double n = std::max<double>(1.0, static_cast<double>(steps.size()));
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-6s %10s %10s %10s %10s %10s %10s\n", "layer", "attention", "moe_gate",
                "experts", "shared", "dense_mlp", "total");
  out << "per decode step, milliseconds (mean of " << steps.size() << " steps):\n" << line;
  auto cell = [&](const std::array<double, kRegions>& row, Region r) { return row[static_cast<std::size_t>(r)] / n; };
  for (const auto& [layer, row] : per_layer) {
    const double total = cell(row, Region::self_attention) + cell(row, Region::moe_gate) +
                         cell(row, Region::routed_experts) + cell(row, Region::shared_experts) +
                         cell(row, Region::dense_mlp);
    std::snprintf(line, sizeof line, "%-6d %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f\n", layer,
                  cell(row, Region::self_attention), cell(row, Region::moe_gate), cell(row, Region::routed_experts),
                  cell(row, Region::shared_experts), cell(row, Region::dense_mlp), total);
    out << line;
  }
  const double attention = cell(totals, Region::self_attention);
  const double moe = cell(totals, Region::moe_gate) + cell(totals, Region::routed_experts) +
                     cell(totals, Region::shared_experts) + cell(totals, Region::dense_mlp);
  const double step = cell(totals, Region::decode_step);
  std::snprintf(line, sizeof line,
                "decode step %.3f ms: attention %.3f ms, MoE/MLP %.3f ms (attention %.0f%% : MoE %.0f%%), "
                "routed experts %.3f ms, lm_head %.3f ms, other %.3f ms\n",
                step, attention, moe, 100.0 * attention / std::max(1e-12, attention + moe),
                100.0 * moe / std::max(1e-12, attention + moe), cell(totals, Region::routed_experts),
                cell(totals, Region::lm_head), step - attention - moe - cell(totals, Region::lm_head));
  out << line;
  return out.str();
}

void Tracer::write_chrome_trace(const std::filesystem::path& file) const {
  std::ofstream out(file);
  if (!out) throw InputError(file.string() + ": cannot write the trace");
  const std::int64_t origin = events_.empty() ? 0 : events_.front().start_ns;
  std::int64_t first = origin;
  for (const Event& e : events_) first = std::min(first, e.start_ns);
  out << "{\"traceEvents\":[\n";
  out << R"({"name":"process_name","ph":"M","pid":1,"args":{"name":"switchyard"}},)" << "\n";
  out << R"({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"CPU: forward pass"}})";
  for (const Event& e : events_) {
    out << ",\n{\"name\":\"" << name(e.region, e.layer) << "\",\"cat\":\"" << region_name(e.region)
        << "\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":" << static_cast<double>(e.start_ns - first) / 1e3
        << ",\"dur\":" << static_cast<double>(e.end_ns - e.start_ns) / 1e3 << ",\"args\":{\"layer\":" << e.layer
        << ",\"step\":" << e.step << "}}";
  }
  out << "\n]}\n";
}

}  // namespace switchyard
