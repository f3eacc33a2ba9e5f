#include "operators/ops/activations.h"

#include "operators/cpu/kernels/silu_and_mul.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/kernels/silu_and_mul.h"
#include "operators/cuda/gpu_runtime.h"
#endif

namespace switchyard {

Scratch::Scratch(GpuRuntime* gpu, std::int64_t floats, std::string_view what) {
#if SWITCHYARD_HAVE_CUDA
  if (gpu != nullptr) {
    device_ = gpu->context().allocate(static_cast<std::size_t>(floats) * sizeof(float), what);
    data_ = device_.as<float>();
    return;
  }
#endif
  (void)gpu;
  (void)what;
  host_.resize(static_cast<std::size_t>(floats));
  data_ = host_.data();
}

CurrentDevice::CurrentDevice(GpuRuntime* gpu) {
#if SWITCHYARD_HAVE_CUDA
  if (gpu != nullptr) guard_.emplace(gpu->context().device());
#else
  (void)gpu;
#endif
}

void CurrentDevice::switch_to(GpuRuntime* gpu) {
#if SWITCHYARD_HAVE_CUDA
  guard_.reset();  // back to the device before this object
  if (gpu != nullptr) guard_.emplace(gpu->context().device());
#else
  (void)gpu;
#endif
}

WorkScope::WorkScope(GpuRuntime* gpu, Tracer* tracer, Region region, int layer) {
#if SWITCHYARD_HAVE_CUDA
  if (gpu != nullptr) {
    gpu_.emplace(*gpu, tracer, region, layer);
    return;
  }
#endif
  host_.emplace(tracer, region, layer);
}

void silu_and_mul(GpuRuntime* gpu, const float* gate, const float* up, std::int64_t count, float* out) {
#if SWITCHYARD_HAVE_CUDA
  if (gpu != nullptr) return cuda::silu_and_mul(gate, up, count, out, gpu->stream());
#endif
  cpu::silu_and_mul(gate, up, count, out);
}

void add_in_place(GpuRuntime* gpu, float* y, const float* x, std::int64_t count) {
#if SWITCHYARD_HAVE_CUDA
  if (gpu != nullptr) return cuda::add_in_place(y, x, count, gpu->stream());
#endif
  for (std::int64_t i = 0; i < count; ++i) y[i] += x[i];
}

}  // namespace switchyard
