#include "operators/cuda/decode_graph.h"

#include "operators/cuda/kernels/cuda_check.h"

namespace switchyard {

DecodeGraph::DecodeGraph(DeviceRuntimes& runtimes, GpuRuntime& origin, Kind kind,
                         const std::function<void()>& enqueue_step)
    : runtimes_(runtimes), origin_(origin), kind_(kind) {
  gpus_.push_back(&origin_);
  for (const auto& [index, gpu] : runtimes_.all())
    if (gpu.get() != &origin_) gpus_.push_back(gpu.get());
  runtimes_.synchronize();
  cudaGraph_t captured = nullptr;
  for (GpuRuntime* gpu : gpus_) {
    gpu->context().pool().begin_capture();
    gpu->timer().set_capturing(true);
  }
  runtimes_.begin_capture();
  auto end_capture = [&] {  // the stream's capture, then everyone's, in the order they began
    const cudaError_t ended = cudaStreamEndCapture(origin_.stream(), &captured);
    for (GpuRuntime* gpu : gpus_) {
      gpu->context().pool().end_capture();
      gpu->timer().set_capturing(false);
    }
    jobs_ = runtimes_.end_capture();
    return ended;
  };
  try {
    SWITCHYARD_CUDA_CHECK(cudaStreamBeginCapture(origin_.stream(), cudaStreamCaptureModeRelaxed));
    for (std::size_t i = 1; i < gpus_.size(); ++i) {  // the others join, with the origin's record
      gpus_[i]->context().wait_for(origin_.context());
      gpus_[i]->copy_step_from(origin_, 1);
    }
    enqueue_step();
    for (std::size_t i = 1; i < gpus_.size(); ++i) origin_.context().wait_for(gpus_[i]->context());
  } catch (...) {
    end_capture();
    if (captured != nullptr) cudaGraphDestroy(captured);
    cudaGetLastError();
    throw;
  }
  SWITCHYARD_CUDA_CHECK(end_capture());
  const cudaError_t instantiated = cudaGraphInstantiate(&exec_, captured, 0);
  cudaGraphDestroy(captured);
  SWITCHYARD_CUDA_CHECK(instantiated);
  for (CpuExpertsHandOff::Job& job : jobs_) job.watched = origin_.stream();
  if (kind_.profiled)
    for (GpuRuntime* gpu : gpus_) marks_.emplace_back(gpu, gpu->timer().take_step());
}

DecodeGraph::~DecodeGraph() {
  if (exec_ != nullptr && cudaGraphExecDestroy(exec_) != cudaSuccess) cudaGetLastError();
}

void DecodeGraph::launch() {
  // The jobs go to the worker first: a launch that waits for queue space must not wait for them.
  runtimes_.set_launching(true);
  for (const CpuExpertsHandOff::Job& job : jobs_) runtimes_.enqueue(job);
  const cudaError_t launched = cudaGraphLaunch(exec_, origin_.stream());
  runtimes_.set_launching(false);
  SWITCHYARD_CUDA_CHECK(launched);
}

}  // namespace switchyard
