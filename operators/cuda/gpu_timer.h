#pragma once
// GpuTimer: `--profile` on a GPU stream. Each timed region records a CUDA event before and after
// its work; after the step the elapsed times become Tracer events on the GPU's lane, placed on the
// host clock from the step's first event. Recording works eagerly and inside a CUDA graph capture
// (external event nodes): a captured graph keeps its marks and is read back after every replay.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/trace.h"

namespace switchyard {

class GpuTimer {
 public:
  struct Mark {
    Region region;
    int layer;
    cudaEvent_t begin, end;
  };
  // The marks of one step: a start event and the regions recorded after it.
  struct Step {
    cudaEvent_t start = nullptr;
    std::vector<Mark> marks;
  };

  // `device`: the CUDA ordinal; `lane`: the logical GPU whose lane the events go on (1 + lane).
  GpuTimer(int device, int lane) : device_(device), lane_(lane) {}
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  // Starts a step's marks on `stream` (records the start event).
  void start_step(cudaStream_t stream);
  // Records the begin or the end of a region; begin returns the mark to end.
  int begin(cudaStream_t stream, Region region, int layer);
  void end(cudaStream_t stream, int mark);
  // While a graph is captured every mark gets new events: an event recorded eagerly before cannot
  // become an event node of a capture.
  void set_capturing(bool capturing) { capturing_ = capturing; }
  // Takes the current step's marks (for a graph to keep, or to read now).
  Step take_step();
  // After the stream has finished the step: its regions as Tracer events on lane 1 + device, the
  // start event placed at `start_host_ns`. Events are not released (a graph reads them again).
  void report(const Step& step, Tracer& tracer, std::int64_t start_host_ns) const;
  // Events of a step no graph keeps go back to the pool.
  void recycle(Step& step);

 private:
  cudaEvent_t event();
  void record(cudaEvent_t event, cudaStream_t stream) const;

  int device_, lane_;
  bool capturing_ = false;
  Step current_;
  std::vector<cudaEvent_t> free_;
  std::vector<cudaEvent_t> all_;
};

}  // namespace switchyard
