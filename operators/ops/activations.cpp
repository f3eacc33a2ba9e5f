#include "operators/ops/activations.h"

#include "operators/cpu/kernels/silu_and_mul.h"

namespace switchyard {

Scratch::Scratch(DeviceRuntime* runtime, std::int64_t floats, std::string_view what) {
  if (runtime != nullptr) {
    device_ = runtime->allocate(static_cast<std::size_t>(floats) * sizeof(float), what);
    data_ = static_cast<float*>(device_->data());
    return;
  }
  host_.resize(static_cast<std::size_t>(floats));
  data_ = host_.data();
}

CurrentDevice::CurrentDevice(DeviceRuntime* runtime) { switch_to(runtime); }

CurrentDevice::~CurrentDevice() { restore(); }

void CurrentDevice::restore() noexcept {
  if (runtime_ != nullptr) runtime_->restore_current(previous_);
  runtime_ = nullptr;
}

void CurrentDevice::switch_to(DeviceRuntime* runtime) {
  restore();  // back to the device before this object
  if (runtime == nullptr) return;
  previous_ = runtime->make_current();
  runtime_ = runtime;
}

WorkScope::WorkScope(DeviceRuntime* runtime, Tracer* tracer, Region region, int layer) {
  // On a device the range marks the launches only; the device's own marks time the work.
  scope_.emplace(tracer, region, layer, /*host_timed=*/runtime == nullptr);
  if (runtime == nullptr) return;
  mark_ = runtime->begin_region(tracer, region, layer);
  if (mark_ >= 0) runtime_ = runtime;
}

WorkScope::~WorkScope() {
  if (runtime_ != nullptr) runtime_->end_region(mark_);
}

void silu_and_mul(DeviceRuntime* runtime, const float* gate, const float* up, std::int64_t count, float* out) {
  if (runtime != nullptr) return runtime->silu_and_mul(gate, up, count, out);
  cpu::silu_and_mul(gate, up, count, out);
}

void add_in_place(DeviceRuntime* runtime, float* y, const float* x, std::int64_t count) {
  if (runtime != nullptr) return runtime->add_in_place(y, x, count);
  for (std::int64_t i = 0; i < count; ++i) y[i] += x[i];
}

}  // namespace switchyard
