#include "operators/cuda/gpu_timer.h"

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_context.h"

namespace switchyard {

GpuTimer::~GpuTimer() {
  const cuda::DeviceGuard guard(device_, std::nothrow);
  for (cudaEvent_t e : all_)
    if (cudaEventDestroy(e) != cudaSuccess) cudaGetLastError();
}

cudaEvent_t GpuTimer::event() {
  if (!capturing_ && !free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  SWITCHYARD_CUDA_CHECK(cudaEventCreate(&e));
  all_.push_back(e);
  return e;
}

void GpuTimer::record(cudaEvent_t event, cudaStream_t stream) const {
  // In a capture an event must become an external event node to be read after replays; outside
  // one the external flag is an error.
  if (capturing_) SWITCHYARD_CUDA_CHECK(cudaEventRecordWithFlags(event, stream, cudaEventRecordExternal));
  else SWITCHYARD_CUDA_CHECK(cudaEventRecord(event, stream));
}

void GpuTimer::start_step(cudaStream_t stream) {
  recycle(current_);
  current_.start = event();
  record(current_.start, stream);
}

int GpuTimer::begin(cudaStream_t stream, Region region, int layer) {
  if (current_.start == nullptr) start_step(stream);
  Mark mark{region, layer, event(), event()};
  record(mark.begin, stream);
  current_.marks.push_back(mark);
  return static_cast<int>(current_.marks.size()) - 1;
}

void GpuTimer::end(cudaStream_t stream, int mark) {
  record(current_.marks[static_cast<std::size_t>(mark)].end, stream);
}

GpuTimer::Step GpuTimer::take_step() {
  Step step = std::move(current_);
  current_ = Step{};
  return step;
}

void GpuTimer::report(const Step& step, Tracer& tracer, std::int64_t start_host_ns) const {
  if (step.start == nullptr) return;
  const cuda::DeviceGuard guard(device_);
  for (const Mark& mark : step.marks) {
    float begin_ms = 0, end_ms = 0;
    SWITCHYARD_CUDA_CHECK(cudaEventElapsedTime(&begin_ms, step.start, mark.begin));
    SWITCHYARD_CUDA_CHECK(cudaEventElapsedTime(&end_ms, step.start, mark.end));
    tracer.add_event(Tracer::Event{mark.region, mark.layer, tracer.step(),
                                   start_host_ns + static_cast<std::int64_t>(begin_ms * 1e6),
                                   start_host_ns + static_cast<std::int64_t>(end_ms * 1e6), 1 + lane_});
  }
}

void GpuTimer::recycle(Step& step) {
  if (step.start != nullptr) free_.push_back(step.start);
  for (const Mark& mark : step.marks) {
    free_.push_back(mark.begin);
    free_.push_back(mark.end);
  }
  step = Step{};
}

}  // namespace switchyard
