#pragma once
// A block's output that is still to be added to the residual stream (residual_stream.h), so that
// the next norm adds it in its own launch: a buffer on the stream's device, and/or values a CPU
// worker writes to page-locked, device-mapped host memory (the routed experts of a hybrid MoE
// block in decode), which may be read only after the host sets `flag` to 1. The launch that adds
// them clears the flag. Reading the host's part in the next norm's launch, rather than in a
// read-back launch of its own, takes one launch out of each layer's decode chain.
#include <cstdint>

namespace switchyard {

struct PendingDelta {
  const float* device = nullptr;  // [tokens, width] on the stream's device, or null
  const float* host = nullptr;    // [1, width], the device's view of mapped host memory, or null
  std::uint32_t* flag = nullptr;  // with `host`: the device's view of its host-mapped flag
  int layer = -1;                 // with `host`: the layer that left it (its cpuinfer_sync region)

  bool empty() const { return device == nullptr && host == nullptr; }
  // The part from row `row` on, of rows `width` wide.
  PendingDelta from_row(std::int64_t row, std::int64_t width) const {
    PendingDelta part = *this;
    if (device != nullptr) part.device += row * width;
    if (host != nullptr) part.host += row * width;
    return part;
  }
};

}  // namespace switchyard
