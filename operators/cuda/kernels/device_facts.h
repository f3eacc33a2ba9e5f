#pragma once
// Facts about a CUDA device that kernel launches need, asked once per device: cudaDeviceGetAttribute
// and cudaFuncSetAttribute are host calls that a decode step of hundreds of launches should not
// repeat. Thread-safe; no GPU is touched until the first call.
#include <cuda_runtime_api.h>

namespace switchyard::cuda {

struct DeviceFacts {
  int device = 0;
  int compute_capability_major = 0;
  int block_shared_optin_bytes = 0;  // the most shared memory one block may opt in to
  int sm_shared_bytes = 0;           // shared memory per SM
};

// The current device's facts (cudaGetDevice), queried at its first use. The reference stays valid
// for the life of the process. Throws std::runtime_error for a device index past 63.
const DeviceFacts& current_device_facts();

// For the current device, once per kernel: raises `kernel`'s dynamic shared memory limit to the most
// it can have (the device's opt-in limit less the kernel's static shared memory) and returns that
// limit. Always the same value for a kernel, so concurrent launchers cannot undercut each other.
int allow_most_dynamic_shared_memory(const void* kernel);

// For the current device, once per kernel: prefer the largest shared-memory carveout for `kernel`
// (more of its blocks resident when each holds a lot).
void prefer_shared_memory_carveout(const void* kernel);

}  // namespace switchyard::cuda
