#pragma once
// One decode step as a CUDA graph on one GPU. It is captured from the step's own launches (the
// CPU-experts hand-offs included) and replays at any position: its kernels read the step record
// (position, token) from device memory. The host side of the captured hand-offs, the CPU jobs, is
// kept with the graph and queued before every launch.
#include <cstddef>
#include <functional>
#include <vector>

#include "operators/runtime/gpu_runtime.h"

namespace switchyard {

class DecodeGraph {
 public:
  // What a capture is specialised for: --profile's events inside it; the head's argmax (greedy)
  // instead of its logits.
  struct Kind {
    bool profiled = false;
    bool greedy = false;
    bool operator==(const Kind&) const = default;
  };

  // Captures what `enqueue_step` queues on `gpu`'s stream (synchronising `runtimes` first). Ends
  // the capture and rethrows when enqueue_step throws; throws CudaError when the graph cannot be
  // captured or instantiated.
  DecodeGraph(DeviceRuntimes& runtimes, GpuRuntime& gpu, Kind kind, const std::function<void()>& enqueue_step);
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  Kind kind() const { return kind_; }
  // The graph's CPU jobs go to the worker, then the graph to the GPU's stream.
  void launch();
  // CPU jobs one launch queues.
  std::size_t jobs() const { return jobs_.size(); }
  // The profile events inside the graph (kind().profiled), for GpuTimer::report.
  const GpuTimer::Step& marks() const { return marks_; }

 private:
  DeviceRuntimes& runtimes_;
  GpuRuntime& gpu_;
  Kind kind_;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<CpuExpertsHandOff::Job> jobs_;
  GpuTimer::Step marks_;
};

}  // namespace switchyard
