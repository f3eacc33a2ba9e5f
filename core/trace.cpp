#include "core/trace.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

#if SWITCHYARD_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace switchyard {
namespace {

constexpr int kRegions = static_cast<int>(Region::count);

}  // namespace

std::int64_t Tracer::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* region_name(Region region) {
  switch (region) {
    case Region::prefill: return "prefill";
    case Region::decode_step: return "decode_step";
    case Region::self_attention: return "self_attention";
    case Region::moe_gate: return "moe_gate";
    case Region::cpuinfer_submit: return "cpuinfer_submit";
    case Region::cpuinfer_sync: return "cpuinfer_sync";
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

void Tracer::add_event(const Event& event) {
  const std::lock_guard lock(events_mutex_);
  events_.push_back(event);
}

void Tracer::set_profiling(bool on) {
  profile_ = on;
  if (on) events_.reserve(1 << 16);
}

bool Tracer::nvtx_on(int layer) const {
  if (!any_nvtx_) return false;
  return layer < 0 || nvtx_layers_[static_cast<std::size_t>(layer)];
}

const char* Tracer::name(Region region, int layer) const {
  const std::size_t layers = nvtx_layers_.size() + 1;
  return names_[static_cast<std::size_t>(region) * layers + static_cast<std::size_t>(layer + 1)].c_str();
}

Tracer::Scope::Scope(Tracer* tracer, Region region, int layer, bool host_timed) : region_(region), layer_(layer) {
  if (!tracer) return;
  nvtx_ = tracer->nvtx_on(layer);
  timed_ = host_timed && tracer->profile_;
  if (!nvtx_ && !timed_) return;
  tracer_ = tracer;
#if SWITCHYARD_HAVE_NVTX
  if (nvtx_) nvtxRangePushA(tracer->name(region, layer));
#endif
  if (timed_) start_ns_ = now_ns();
}

Tracer::Scope::~Scope() {
  if (!tracer_) return;
  if (timed_) tracer_->add_event(Event{region_, layer_, tracer_->step_, start_ns_, now_ns()});
#if SWITCHYARD_HAVE_NVTX
  if (nvtx_) nvtxRangePop();
#endif
}

std::string Tracer::profile_table() const {
  // Mean milliseconds per decode step, per layer and region; host and GPU lanes apart.
  using Row = std::array<double, kRegions>;
  std::map<int, Row> per_layer;
  Row host{}, gpu{};
  std::map<int, bool> steps;
  bool any_gpu = false;
  for (const Event& e : events_) {
    if (e.step == 0) continue;  // prefill is reported on its own line
    steps[e.step] = true;
    const double ms = static_cast<double>(e.end_ns - e.start_ns) / 1e6;
    const auto r = static_cast<std::size_t>(e.region);
    if (e.layer >= 0) per_layer[e.layer][r] += ms;
    (e.lane == 0 ? host : gpu)[r] += ms;
    any_gpu = any_gpu || e.lane != 0;
  }
  const double n = std::max<double>(1.0, static_cast<double>(steps.size()));
  auto at = [&](const Row& row, Region r) { return row[static_cast<std::size_t>(r)] / n; };
  // A layer's wall time: its regions in sequence, except CPU experts that a GPU waited for
  // (they overlap the shared experts and end inside the wait).
  auto layer_total = [&](const Row& row) {
    double total = 0;
    for (int r = 0; r < kRegions; ++r) {
      const auto region = static_cast<Region>(r);
      if (region == Region::routed_experts && at(row, Region::cpuinfer_sync) > 0) continue;
      total += at(row, region);
    }
    return total;
  };
  std::ostringstream out;
  char line[320];
  out << "per decode step, milliseconds (mean of " << steps.size() << " steps)"
      << (any_gpu ? "; GPU work timed by CUDA events, CPU work by host clocks" : "") << ":\n";
  std::snprintf(line, sizeof line, "%-6s %10s %10s %10s %10s %10s %10s %10s %10s\n", "layer", "attention", "moe_gate",
                "submit", "experts", "shared", "gpu_wait", "dense_mlp", "total");
  out << line;
  Row sums{};
  int hidden_rows = 0;
  for (const auto& [layer, row] : per_layer) {
    for (int r = 0; r < kRegions; ++r) sums[static_cast<std::size_t>(r)] += row[static_cast<std::size_t>(r)];
    if (any_nvtx_ && !nvtx_layers_[static_cast<std::size_t>(layer)]) {  // rows for the selected layers only
      ++hidden_rows;
      continue;
    }
    std::snprintf(line, sizeof line, "%-6d %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f\n", layer,
                  at(row, Region::self_attention), at(row, Region::moe_gate), at(row, Region::cpuinfer_submit),
                  at(row, Region::routed_experts), at(row, Region::shared_experts), at(row, Region::cpuinfer_sync),
                  at(row, Region::dense_mlp), layer_total(row));
    out << line;
  }
  if (hidden_rows > 0) out << "(" << hidden_rows << " more layers in the totals; --nvtx_layers selects the rows)\n";
  const double attention = at(sums, Region::self_attention);
  double moe = 0;
  for (const auto& [layer, row] : per_layer) moe += layer_total(row);
  moe -= attention;
  const double step = at(host, Region::decode_step);
  std::snprintf(line, sizeof line,
                "decode step %.3f ms: attention %.3f ms, MoE/MLP %.3f ms (attention %.0f%% : MoE %.0f%%), "
                "lm_head %.3f ms, other %.3f ms\n",
                step, attention, moe, 100.0 * attention / std::max(1e-12, attention + moe),
                100.0 * moe / std::max(1e-12, attention + moe), at(host, Region::lm_head) + at(gpu, Region::lm_head),
                step - attention - moe - at(host, Region::lm_head) - at(gpu, Region::lm_head));
  out << line;
  const double cpu_experts = at(host, Region::routed_experts);
  if (any_gpu) {
    const double gpu_step = at(gpu, Region::decode_step);
    double in_regions = 0;
    for (int r = 0; r < kRegions; ++r)
      if (static_cast<Region>(r) != Region::decode_step) in_regions += at(gpu, static_cast<Region>(r));
    const double waited = at(gpu, Region::cpuinfer_sync);
    const double layers = std::max<double>(1.0, static_cast<double>(per_layer.size()));
    std::snprintf(line, sizeof line,
                  "CPU experts %.3f ms; GPU waited for the CPU %.3f ms; GPU step %.3f ms, outside any region "
                  "(launch gaps, norms, residual adds, copies) %.3f ms; GPU time per layer without the wait "
                  "%.1f us\n",
                  cpu_experts, waited, gpu_step, gpu_step - in_regions, 1e3 * (gpu_step - waited) / layers);
    out << line;
  } else if (cpu_experts > 0) {
    std::snprintf(line, sizeof line, "routed experts %.3f ms\n", cpu_experts);
    out << line;
  }
  return out.str();
}

void Tracer::write_chrome_trace(const std::filesystem::path& file) const {
  AtomicFile out(file);
  write_chrome_trace(out);
  out.commit();
}

void Tracer::write_chrome_trace(AtomicFile& file) const {
  // Events are formatted into `out` and handed to the file a block at a time: a long run's trace
  // never sits whole in memory a second time.
  constexpr std::size_t kBlockBytes = 1 << 20;
  std::ostringstream out;
  const auto flush = [&](bool always) {
    if (!always && out.tellp() < static_cast<std::streamoff>(kBlockBytes)) return;
    file.write(out.view());
    out.str({});
  };
  const std::int64_t origin = events_.empty() ? 0 : events_.front().start_ns;
  std::int64_t first = origin;
  for (const Event& e : events_) first = std::min(first, e.start_ns);
  out << "{\"traceEvents\":[\n";
  out << R"({"name":"process_name","ph":"M","pid":1,"args":{"name":"switchyard"}},)" << "\n";
  out << R"({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"CPU: forward pass"}})";
  std::map<int, bool> gpu_lanes;
  for (const Event& e : events_)
    if (e.lane > 0) gpu_lanes[e.lane] = true;
  for (const auto& [lane, used] : gpu_lanes)
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << 1 + lane
        << ",\"args\":{\"name\":\"GPU cuda:" << lane - 1 << "\"}}";
  for (const Event& e : events_) {
    out << ",\n{\"name\":\"" << name(e.region, e.layer) << "\",\"cat\":\"" << region_name(e.region)
        << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << 1 + e.lane << ",\"ts\":" << static_cast<double>(e.start_ns - first) / 1e3
        << ",\"dur\":" << static_cast<double>(e.end_ns - e.start_ns) / 1e3 << ",\"args\":{\"layer\":" << e.layer
        << ",\"step\":" << e.step << "}}";
    flush(false);
  }
  out << "\n]}\n";
  flush(true);
}

}  // namespace switchyard
