#pragma once
// The residual stream of a forward pass, [tokens, hidden] f32, on one device at a time. Layers
// ask for it on their device (on()); when it is elsewhere the framework copies it there: this is
// the one place where activations cross devices, at module boundaries, so no operator moves its
// inputs itself. Host copies are pinned when GPUs take part, so that the copies to and from a GPU
// are asynchronous and can be captured in a CUDA graph.
//
// A block's output may be left for the next norm to add (x += delta, then norm(x), one launch on a
// GPU): the block writes it to delta(device) (or leaves part of it on the host, pending_delta.h)
// and the layer calls defer_add(); the next layer takes it with take_delta(). Moving the stream to
// another device adds a pending delta first.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/device.h"
#include "operators/ops/device_runtime.h"
#include "operators/ops/pending_delta.h"

namespace switchyard {

class ResidualStream {
 public:
  // runtimes nullptr: a CPU-only model.
  ResidualStream(Accelerators* runtimes, std::int64_t max_tokens, std::int64_t width);

  // Starts a pass of `tokens` tokens on `device`, returns its buffer there (contents undefined).
  float* start(Device device, std::int64_t tokens);
  // The stream on `device`, copied there if it was elsewhere. CPU -> GPU and GPU -> GPU are queued
  // on the receiving GPU's stream (GPU -> GPU after the sender's work so far: capturable, no host
  // wait); GPU -> CPU synchronises (Accelerators::synchronize).
  float* on(Device device);
  Device device() const { return device_; }

  // The buffer on `device` for a block's output that is to be added later.
  float* delta(Device device);
  // `pending` (its device part in delta(device()), or none) is to be added to the stream, once the
  // work that writes it is queued.
  void defer_add(const PendingDelta& pending);
  // The pending delta, or an empty one; no longer pending: the caller adds it
  // (NormOp::add_and_forward).
  PendingDelta take_delta();
  std::int64_t tokens() const { return tokens_; }

 private:
  float* buffer(Device device);
  void settle();  // adds a pending delta in place

  Accelerators* runtimes_;
  std::int64_t max_tokens_, width_, tokens_ = 0;
  Device device_;
  PendingDelta pending_;
  std::vector<float> host_, host_delta_;
  std::unique_ptr<DeviceAllocation> pinned_;  // the host's copy when devices take part
  std::map<int, std::unique_ptr<DeviceAllocation>> gpu_, gpu_delta_;  // by device index
};

}  // namespace switchyard
