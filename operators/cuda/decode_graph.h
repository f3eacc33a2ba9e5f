#pragma once
// One decode step as a CUDA graph, on one GPU or across several. It is captured from the step's
// own launches (the CPU-experts hand-offs and the hand-overs between GPUs included) and replays at
// any position: its kernels read the step record (position, token) from device memory. The host
// side of the captured hand-offs, the CPU jobs, is kept with the graph and queued before every
// launch.
//
// Several GPUs (a layer split, or logical GPUs folded onto fewer by --device_map): the capture
// begins on the origin's stream, the GPU whose head writes the next step's record; every other
// GPU's stream joins it through an event and first copies the origin's record into its own, and
// the origin waits for each of them at the end. The graph is launched on the origin's stream, so
// one launch orders the whole step after the one before it on every GPU, and the CPU jobs watch
// that stream.
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "operators/cuda/gpu_runtime.h"

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
  // A GPU's profile events inside the graph (kind().profiled), for GpuTimer::report.
  using Marks = std::vector<std::pair<GpuRuntime*, GpuTimer::Step>>;

  // Captures what `enqueue_step` queues on the streams of every GPU in `runtimes` (synchronising
  // them first), with `origin` as above. Ends the capture and rethrows when enqueue_step throws;
  // throws CudaError when the graph cannot be captured or instantiated.
  DecodeGraph(DeviceRuntimes& runtimes, GpuRuntime& origin, Kind kind, const std::function<void()>& enqueue_step);
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  Kind kind() const { return kind_; }
  // The graph's CPU jobs go to the worker, then the graph to the origin's stream.
  void launch();
  // CPU jobs one launch queues.
  std::size_t jobs() const { return jobs_.size(); }
  // Every GPU's profile events, the origin's first.
  const Marks& marks() const { return marks_; }
  // How many GPUs (logical) the graph spans.
  std::size_t gpus() const { return gpus_.size(); }

 private:
  DeviceRuntimes& runtimes_;
  GpuRuntime& origin_;
  std::vector<GpuRuntime*> gpus_;  // the origin first
  Kind kind_;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<CpuExpertsHandOff::Job> jobs_;
  Marks marks_;
};

}  // namespace switchyard
