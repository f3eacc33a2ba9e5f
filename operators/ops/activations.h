#pragma once
// Activations on a device, for composite operators that run the same steps on the CPU or on
// another device: a temporary buffer (a host vector, or a block of the device's memory) and the
// element-wise steps between projections. `runtime` nullptr means the CPU
// (operators/ops/device_runtime.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/trace.h"
#include "operators/ops/device_runtime.h"

namespace switchyard {

class Scratch {
 public:
  Scratch(DeviceRuntime* runtime, std::int64_t floats, std::string_view what);
  float* data() { return data_; }
  operator float*() { return data_; }

 private:
  std::vector<float> host_;
  std::unique_ptr<DeviceAllocation> device_;
  float* data_ = nullptr;
};

// A traced region of work: on a device, the NVTX range around its launches and the device's marks
// around the work (DeviceRuntime::begin_region); on the host, the NVTX range and host clocks
// (Tracer::Scope).
class WorkScope {
 public:
  WorkScope(DeviceRuntime* runtime, Tracer* tracer, Region region, int layer = -1);
  ~WorkScope();
  WorkScope(const WorkScope&) = delete;
  WorkScope& operator=(const WorkScope&) = delete;

 private:
  std::optional<Tracer::Scope> scope_;
  DeviceRuntime* runtime_ = nullptr;
  int mark_ = -1;
};

// A device made current while its work is queued (and the previous one restored after): kernels'
// per-device set-up (shared-memory limits, launch attributes) asks the current device, which must
// be the one whose stream the work goes to when layers span devices. Nothing on the CPU.
class CurrentDevice {
 public:
  explicit CurrentDevice(DeviceRuntime* runtime);
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  // Makes `runtime`'s device current instead (null: the one current before this object), until the end.
  void switch_to(DeviceRuntime* runtime);

 private:
  void restore() noexcept;

  DeviceRuntime* runtime_ = nullptr;
  int previous_ = -1;
};

// out = silu(gate) * up, [count]; out may be gate.
void silu_and_mul(DeviceRuntime* runtime, const float* gate, const float* up, std::int64_t count, float* out);
// y += x, [count].
void add_in_place(DeviceRuntime* runtime, float* y, const float* x, std::int64_t count);

}  // namespace switchyard
