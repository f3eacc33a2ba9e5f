#pragma once
// What decode graphs hand each other when greedy steps follow each other on the device
// (CausalLM::decode_greedy): two token slots in host-mapped memory, which each step's argmax
// writes (cuda::NextStep: slot position % 2 gets position << 32 | id), and, with the embedding on
// the CPU, the embedding table mapped for the GPU to gather the next step's row from.
#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "operators/cuda/kernels/host_table.h"
#include "operators/cuda/gpu_runtime.h"

namespace switchyard {

class DecodeChain {
 public:
  // embedding: [vocab, hidden] on the CPU, or nullptr when the embedding lives on the GPU.
  explicit DecodeChain(const Tensor* host_embedding);

  // Both slots to "no step yet"; nothing may be in flight.
  void clear_slots();
  std::uint64_t* slots_device() const { return slots_device_; }
  // The device's view of the CPU's embedding table (host_embedding given).
  const void* embedding_device_view() const { return embedding_->device_view(); }
  // The token the step before `position` chose, once its slot says so. `later_jobs`: the CPU jobs
  // queued for the steps after that one (the wait first lets the CPU worker finish the rest).
  std::int32_t wait_for_token(DeviceRuntimes& runtimes, GpuRuntime& gpu, std::int64_t position,
                              std::size_t later_jobs);

 private:
  cuda::PinnedBuffer slots_;               // [2] std::uint64_t
  std::uint64_t* slots_device_ = nullptr;  // their device view
  std::unique_ptr<cuda::HostTable> embedding_;
};

}  // namespace switchyard
