#pragma once
// Tracer: where a forward pass spends its time, for profilers and without one.
//  - NVTX ranges (`--nvtx_layers 3,22,50|all|none`): prefill, decode_step, and per selected layer
//    self_attention_L, moe_gate_L, cpuinfer_submit_L, routed_experts_L, shared_experts_L,
//    cpuinfer_sync_L, dense_mlp_L; lm_head. Around GPU work the ranges span the launches, which is
//    what nsys projects onto the GPU's timeline; in a CUDA graph they are those of its capture.
//    Range names are made once, when the tracer is built, never on the hot path.
//  - Profile events (`--profile`) for a per-layer table and a Chrome/Perfetto trace: host clocks
//    for work on the CPU (lane 0), CUDA events for work on a GPU (lane 1 + device), added by the
//    GPU runtime on the same time line.
// A region that is off costs one branch.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace switchyard {

class AtomicFile;

enum class Region : std::uint8_t {
  prefill, decode_step, self_attention, moe_gate, cpuinfer_submit, routed_experts, shared_experts,
  cpuinfer_sync, dense_mlp, lm_head, count
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
    int lane = 0;  // 0: the host; 1 + N: GPU cuda:N
  };

  Tracer(std::vector<bool> nvtx_layers, bool profile);

  bool nvtx_on(int layer) const;
  bool any_nvtx() const { return any_nvtx_; }
  bool profiling() const { return profile_; }
  // Whether this tracer marks decode steps on the host (NVTX ranges or profile steps), so they must
  // run one at a time rather than queued ahead of each other.
  bool marks_steps() const { return profile_ || any_nvtx_; }
  // Turns profile events on or off from now on (benchmarks time unprofiled steps, then profile).
  void set_profiling(bool on);
  void begin_step(int step) { step_ = step; }
  int step() const { return step_; }
  const std::vector<Event>& events() const { return events_; }
  // An event measured elsewhere (a GPU lane), on this tracer's clock (now_ns()).
  // Thread-safe (the CPU experts record theirs from their own thread).
  void add_event(const Event& event);
  static std::int64_t now_ns();
  const char* name(Region region, int layer) const;

  // RAII range: an NVTX range and/or a profile event, or nothing.
  class Scope {
   public:
    // host_timed false: the NVTX range only (the work is timed on a GPU lane instead).
    Scope(Tracer* tracer, Region region, int layer = -1, bool host_timed = true);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Tracer* tracer_ = nullptr;
    Region region_;
    int layer_;
    bool nvtx_ = false;
    bool timed_ = false;
    std::int64_t start_ns_ = 0;
  };

  // Per-layer milliseconds per decode step and the attention : MoE split; with GPU lanes also the
  // time the GPU waited for the CPU experts and the GPU's time outside any region (launch gaps).
  std::string profile_table() const;
  // Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev), one lane per thread of work,
  // written to `file` whole or not at all (AtomicFile).
  void write_chrome_trace(const std::filesystem::path& file) const;
  // The same into `out`, which the caller commits: a command opens it before its run, so that a
  // path it cannot write is an error before the work, not after it.
  void write_chrome_trace(AtomicFile& out) const;

 private:
  std::vector<bool> nvtx_layers_;
  bool any_nvtx_ = false;
  bool profile_ = false;
  std::atomic<int> step_{0};  // read by the CPU-experts worker's scopes
  std::vector<std::string> names_;  // [region][layer + 1]
  std::mutex events_mutex_;
  std::vector<Event> events_;
};

}  // namespace switchyard
