#pragma once
// The residual stream of a forward pass, [tokens, hidden] f32, on one device at a time. Layers
// ask for it on their device (on()); when it is elsewhere the framework copies it there: this is
// the one place where activations cross devices, at module boundaries, so no operator moves its
// inputs itself. Host copies are pinned when GPUs take part, so that the copies to and from a GPU
// are asynchronous and can be captured in a CUDA graph.
//
// Block outputs may be left for the next norm to add (x = (x + first) + second, then norm(x), one
// launch on a GPU): a block writes its output to delta(device, slot) and calls defer_add(slot); the
// next layer takes them with take_deltas(), slot 0 first. (The attention's output takes slot 0
// when the MoE block folds the norm between them into its own first launch, the MLP's slot 1.)
// Moving the stream to another device adds pending deltas first.
#include <cstdint>
#include <map>
#include <vector>

#include "core/device.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/device_context.h"
#endif

namespace switchyard {

class DeviceRuntimes;

class ResidualStream {
 public:
  // runtimes nullptr: a CPU-only model.
  ResidualStream(DeviceRuntimes* runtimes, std::int64_t max_tokens, std::int64_t width);

  // Starts a pass of `tokens` tokens on `device`, returns its buffer there (contents undefined).
  float* start(Device device, std::int64_t tokens);
  // The stream on `device`, copied there if it was elsewhere. CPU -> GPU is queued on the GPU's
  // stream (capturable); GPU -> CPU and GPU -> GPU synchronise (DeviceRuntimes::synchronize).
  float* on(Device device);
  Device device() const { return device_; }

  static constexpr int kDeltaSlots = 2;
  // The buffer on `device` for a block's output that is to be added later (slot 0 or 1).
  float* delta(Device device, int slot);
  // delta(device(), slot) now holds an output to add to the stream (once its work is queued).
  void defer_add(int slot);
  // The pending deltas in slot order (null where none), no longer pending: the caller adds them,
  // first then second (NormOp::add_and_forward).
  struct Pending {
    const float* first = nullptr;
    const float* second = nullptr;
    explicit operator bool() const { return first != nullptr; }
  };
  Pending take_deltas();
  std::int64_t tokens() const { return tokens_; }

 private:
  float* buffer(Device device);
  void settle();  // adds pending deltas in place

  DeviceRuntimes* runtimes_;
  std::int64_t max_tokens_, width_, tokens_ = 0;
  Device device_;
  bool pending_[kDeltaSlots] = {};
  std::vector<float> host_, host_delta_[kDeltaSlots];
#if SWITCHYARD_HAVE_CUDA
  cuda::PinnedBuffer pinned_;
  std::map<int, cuda::DeviceBuffer> gpu_, gpu_delta_[kDeltaSlots];
#endif
};

}  // namespace switchyard
