#pragma once
// Tracer: where a forward pass spends its time, for profilers and without one.
//  - NVTX ranges (`--nvtx_layers 3,22,50|all|none`): prefill, decode_step, and per selected layer
//    self_attention_L, moe_gate_L, routed_experts_L, shared_experts_L, dense_mlp_L; lm_head.
//    Range names are made once, when the tracer is built, never on the hot path.
//  - Host-clock events (`--profile`) for a per-layer table and a Chrome/Perfetto trace.
// A region that is off costs one branch.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace switchyard {

enum class Region : std::uint8_t {
  prefill, decode_step, self_attention, moe_gate, routed_experts, shared_experts, dense_mlp, lm_head, count
};
const char* region_name(Region region);

// "3,22,50", "0-3,7", "all" or "none" for a model of `num_layers` layers; throws InputError.
std::vector<bool> parse_layer_selection(const std::string& text, int num_layers);

class Tracer {
 public:
  struct Event {
    Region region;
    int layer;  // -1 outside the layers
    int step;   // 0: prefill, then one per decode step
    std::int64_t start_ns, end_ns;
  };

  Tracer(std::vector<bool> nvtx_layers, bool profile);

  bool nvtx_on(int layer) const;
  bool any_nvtx() const { return any_nvtx_; }
  bool profiling() const { return profile_; }
  void begin_step(int step) { step_ = step; }
  const std::vector<Event>& events() const { return events_; }

  // RAII range: an NVTX range and/or a profile event, or nothing.
  class Scope {
   public:
    Scope(Tracer* tracer, Region region, int layer = -1);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Tracer* tracer_ = nullptr;
    Region region_;
    int layer_;
    bool nvtx_ = false;
    std::int64_t start_ns_ = 0;
  };

  // Per-layer milliseconds per decode step and the attention : MoE split.
  std::string profile_table() const;
  // Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev), one lane per thread of work.
  void write_chrome_trace(const std::filesystem::path& file) const;

 private:
  const char* name(Region region, int layer) const;

  std::vector<bool> nvtx_layers_;
  bool any_nvtx_ = false;
  bool profile_ = false;
  int step_ = 0;
  std::vector<std::string> names_;  // [region][layer + 1]
  std::vector<Event> events_;
};

}  // namespace switchyard
