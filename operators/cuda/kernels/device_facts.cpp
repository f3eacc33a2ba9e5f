#include "operators/cuda/kernels/device_facts.h"

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/cuda_check.h"

namespace switchyard::cuda {
namespace {

constexpr int kDevices = 64;

struct PerDevice {
  DeviceFacts facts;
  std::mutex mutex;                            // guards the two below
  std::map<const void*, int> dynamic_shared;   // the limit each kernel was given
  std::set<const void*> carveout_preferred;
};

// Lock-free once a device is known: launches read the table on every call.
std::array<std::atomic<PerDevice*>, kDevices> known{};
std::array<std::unique_ptr<PerDevice>, kDevices> owned;
std::mutex creating;

PerDevice& current() {
  int device = 0;
  SWITCHYARD_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kDevices)
    throw std::runtime_error("cuda:" + std::to_string(device) + " is past the " + std::to_string(kDevices) +
                             " devices whose facts Switchyard keeps");
  const auto index = static_cast<std::size_t>(device);
  if (PerDevice* facts = known[index].load(std::memory_order_acquire)) return *facts;
  const std::lock_guard lock(creating);
  if (PerDevice* facts = known[index].load(std::memory_order_acquire)) return *facts;
  auto fresh = std::make_unique<PerDevice>();
  DeviceFacts& f = fresh->facts;
  f.device = device;
  const auto ask = [device](int* value, cudaDeviceAttr attribute) {
    SWITCHYARD_CUDA_CHECK(cudaDeviceGetAttribute(value, attribute, device));
  };
  ask(&f.compute_capability_major, cudaDevAttrComputeCapabilityMajor);
  ask(&f.block_shared_optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin);
  ask(&f.sm_shared_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  owned[index] = std::move(fresh);
  known[index].store(owned[index].get(), std::memory_order_release);
  return *owned[index];
}

}  // namespace

const DeviceFacts& current_device_facts() { return current().facts; }

int allow_most_dynamic_shared_memory(const void* kernel) {
  PerDevice& device = current();
  const std::lock_guard lock(device.mutex);
  const auto given = device.dynamic_shared.find(kernel);
  if (given != device.dynamic_shared.end()) return given->second;
  cudaFuncAttributes attributes{};
  SWITCHYARD_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const int limit = device.facts.block_shared_optin_bytes - static_cast<int>(attributes.sharedSizeBytes);
  SWITCHYARD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  device.dynamic_shared.emplace(kernel, limit);
  return limit;
}

void prefer_shared_memory_carveout(const void* kernel) {
  PerDevice& device = current();
  const std::lock_guard lock(device.mutex);
  if (device.carveout_preferred.count(kernel) != 0) return;
  SWITCHYARD_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  device.carveout_preferred.insert(kernel);
}

}  // namespace switchyard::cuda
