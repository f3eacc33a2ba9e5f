#pragma once
// Memory on a device that is not the CPU, as the device-neutral ops hold it: a DeviceAllocation is
// a block that a backend's runtime handed out (operators/ops/device_runtime.h), a DeviceTensor a
// weight's copy on the device. Neither says which device or backend: the runtime that made it knows.
#include <cstddef>
#include <memory>

#include "core/dtype.h"

namespace switchyard {

// A block of a device's memory (or page-locked host memory that devices copy to and from), given
// back to its runtime when this goes.
class DeviceAllocation {
 public:
  virtual ~DeviceAllocation() = default;
  virtual void* data() const = 0;
  virtual std::size_t bytes() const = 0;  // as requested
};

// A weight's copy on a device, in `dtype` (bf16, f32 or ggml blocks; f16 checkpoints are widened
// on upload): its own memory, or a view of rows of another tensor's (weights stacked for one
// launch), which it keeps alive.
struct DeviceTensor {
  std::unique_ptr<DeviceAllocation> memory;  // empty for a view
  const void* view = nullptr;
  std::shared_ptr<const DeviceTensor> owner;
  DType dtype = DType::f32;

  const void* data() const { return view != nullptr ? view : memory->data(); }
  // Bytes of its own memory (0 for a view).
  std::size_t bytes() const { return memory ? memory->bytes() : 0; }
};

}  // namespace switchyard
