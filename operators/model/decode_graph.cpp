#include "operators/model/decode_graph.h"

#include "operators/kernels/cuda/cuda_check.h"

namespace switchyard {

DecodeGraph::DecodeGraph(DeviceRuntimes& runtimes, GpuRuntime& gpu, Kind kind,
                         const std::function<void()>& enqueue_step)
    : runtimes_(runtimes), gpu_(gpu), kind_(kind) {
  runtimes_.synchronize();
  cudaGraph_t captured = nullptr;
  gpu_.context().pool().begin_capture();
  gpu_.timer().set_capturing(true);
  runtimes_.begin_capture();
  auto end_capture = [&] {  // the stream's capture, then everyone's, in the order they began
    const cudaError_t ended = cudaStreamEndCapture(gpu_.stream(), &captured);
    gpu_.context().pool().end_capture();
    gpu_.timer().set_capturing(false);
    jobs_ = runtimes_.end_capture();
    return ended;
  };
  try {
    SWITCHYARD_CUDA_CHECK(cudaStreamBeginCapture(gpu_.stream(), cudaStreamCaptureModeRelaxed));
    enqueue_step();
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
  if (kind_.profiled) marks_ = gpu_.timer().take_step();
}

DecodeGraph::~DecodeGraph() {
  if (exec_ != nullptr && cudaGraphExecDestroy(exec_) != cudaSuccess) cudaGetLastError();
}

void DecodeGraph::launch() {
  // The jobs go to the worker first: a launch that waits for queue space must not wait for them.
  runtimes_.set_launching(true);
  for (const CpuExpertsHandOff::Job& job : jobs_) runtimes_.enqueue(job);
  const cudaError_t launched = cudaGraphLaunch(exec_, gpu_.stream());
  runtimes_.set_launching(false);
  SWITCHYARD_CUDA_CHECK(launched);
}

}  // namespace switchyard
