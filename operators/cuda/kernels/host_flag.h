#pragma once
// Flags in page-locked, device-mapped host memory through which a stream and a host thread hand
// work to each other without the driver's callback thread:
//
//   GPU -> CPU: the stream writes a flag after the work before it (stream_write); the host polls it
//               (host_wait) and clears it.
//   CPU -> GPU: the host sets a flag (host_write); the stream waits for it (stream_wait) before the
//               work after it, and clears it (stream_write) for the next round.
//
// Both stream operations are CUDA stream memory operations (cuStreamWriteValue32 and
// cuStreamWaitValue32, looked up through the runtime's driver entry points, so nothing links
// libcuda); they can be captured in CUDA graphs. Where the driver lacks them, the same semantics
// come from host functions (cudaLaunchHostFunc), which block the callback thread while they wait.
//
// A waiting host must not hang on a failed GPU: host_wait gives up with runtime_error when the
// stream it waits for has faulted or finished without writing the flag.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "operators/cuda/kernels/device_context.h"

namespace switchyard::cuda {

class HostFlags {
 public:
  // `count` flags, all 0, usable from every device.
  explicit HostFlags(int count);
  HostFlags(const HostFlags&) = delete;
  HostFlags& operator=(const HostFlags&) = delete;
  int count() const { return count_; }

  // Queued on `stream`: flag[i] = value once the work queued before it is done (with a fence, so
  // the host sees that work's writes to mapped or pinned memory first).
  void stream_write(cudaStream_t stream, int i, std::uint32_t value);
  // Queued on `stream`: the work after it starts once flag[i] == value.
  void stream_wait(cudaStream_t stream, int i, std::uint32_t value);

  // The device's view of flag[i], for kernels that set or clear a flag themselves (a kernel that
  // sets one must first fence its other writes to host memory: __threadfence_system).
  std::uint32_t* device_flag(int i) const;

  // Host side. host_write publishes everything this thread wrote before it (release).
  void host_write(int i, std::uint32_t value);
  // Spins until flag[i] == value; `stream` is the one that will write it, polled now and then so
  // that a fault or a missing write ends in runtime_error instead of a hang. While *launching is
  // true the write may not be queued yet (a graph about to be launched), so an idle stream is not
  // a missing write.
  void host_wait(int i, std::uint32_t value, cudaStream_t stream, const std::atomic<bool>* launching = nullptr) const;

 private:
  // Host-function fallback: a callback's argument, (flag, value), one per flag and value 0 or 1.
  struct HostFunctionFlag {
    std::uint32_t* flag;
    std::uint32_t value;
  };
  HostFunctionFlag* fallback_slot(int i, std::uint32_t value);
  std::uint32_t* flag(int i) const;  // std::out_of_range for a flag that does not exist
  void stream_operation(cudaStream_t stream, int i, std::uint32_t value, bool wait);

  PinnedBuffer memory_;              // the flags: page-locked, mapped into every device (unified addressing)
  std::uint32_t* device_ = nullptr;  // their device mapping, looked up once
  int count_ = 0;
  std::vector<HostFunctionFlag> fallback_;
};

}  // namespace switchyard::cuda
