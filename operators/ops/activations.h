#pragma once
// Activations on a device, for composite operators that run the same steps on the CPU or on a GPU:
// a temporary buffer (a host vector, or a block of the GPU's pool) and the element-wise steps
// between projections. `gpu` nullptr means the CPU.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/trace.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/device_memory_pool.h"
#include "operators/cuda/gpu_runtime.h"
#endif

namespace switchyard {

class GpuRuntime;

class Scratch {
 public:
  Scratch(GpuRuntime* gpu, std::int64_t floats, std::string_view what);
  float* data() { return data_; }
  operator float*() { return data_; }

 private:
  std::vector<float> host_;
#if SWITCHYARD_HAVE_CUDA
  cuda::DeviceBuffer device_;
#endif
  float* data_ = nullptr;
};

// A traced region of work: on a GPU, the NVTX range around its launches and CUDA events around
// the work (GpuScope); on the host, the NVTX range and host clocks (Tracer::Scope).
class WorkScope {
 public:
  WorkScope(GpuRuntime* gpu, Tracer* tracer, Region region, int layer = -1);

 private:
  std::optional<Tracer::Scope> host_;
#if SWITCHYARD_HAVE_CUDA
  std::optional<GpuScope> gpu_;
#endif
};

// A GPU's device made current while its work is queued (and the previous one restored after):
// kernels' per-device set-up (shared-memory limits, launch attributes) asks the current device,
// which must be the one whose stream the work goes to when layers span GPUs. Nothing on the CPU.
class CurrentDevice {
 public:
  explicit CurrentDevice(GpuRuntime* gpu);
  // Makes `gpu`'s device current instead (null: the one current before this object), until the end.
  void switch_to(GpuRuntime* gpu);

 private:
#if SWITCHYARD_HAVE_CUDA
  std::optional<cuda::DeviceGuard> guard_;
#endif
};

// out = silu(gate) * up, [count]; out may be gate.
void silu_and_mul(GpuRuntime* gpu, const float* gate, const float* up, std::int64_t count, float* out);
// y += x, [count].
void add_in_place(GpuRuntime* gpu, float* y, const float* x, std::int64_t count);

}  // namespace switchyard
