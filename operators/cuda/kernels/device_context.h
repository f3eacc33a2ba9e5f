#pragma once
// What the CUDA operators of one device share: the device's stream, its cuBLAS handle, its memory
// pool, and the copy helpers between host and device.
//
// All work of a context runs on its one stream, in order; the copy helpers are asynchronous on it
// and `synchronize` waits for everything queued. Asynchronous copies overlap compute only from and
// to pinned host memory (PinnedBuffer); from pageable memory CUDA stages them synchronously.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "operators/cuda/kernels/device_memory_pool.h"

namespace switchyard::cuda {

// CUDA devices visible to this process; 0, not an error, when there is no GPU or no driver.
int device_count();

// Bytes free on each visible device (cudaMemGetInfo), device 0 first; empty without a GPU. A
// device whose context cannot be made counts 0 bytes free.
std::vector<std::size_t> free_memory_bytes();

// Makes `device` current for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);                     // throws on failure
  DeviceGuard(int device, const std::nothrow_t&) noexcept;  // for destructors: ignores failures
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Page-locked host memory, freed on destruction. Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // InputError when the host cannot lock `bytes` more ("out of pinned host memory ... for what").
  PinnedBuffer(std::size_t bytes, std::string_view what);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }
  // The device's address of this memory, for kernels that read or write it directly (page-locked
  // memory is mapped into every device's address space).
  void* device_view() const;
  template <typename T>
  T* device_view_as() const { return static_cast<T*>(device_view()); }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class DeviceContext {
 public:
  // InputError when `device` is not in [0, device_count()).
  explicit DeviceContext(int device) : DeviceContext(device, device) {}
  // Logical GPU cuda:`logical` (a profile's) run by this process's GPU `physical` (--device_map,
  // core/device_map.h); InputError naming both, and the flag, when `physical` is not present.
  DeviceContext(int logical, int physical);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }  // the physical ordinal: what cudaSetDevice takes
  Device where() const { return Device::cuda(logical_); }  // the profile's device
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  DeviceMemoryPool& pool() const { return *pool_; }

  // Device memory from the pool; InputError naming this device, the bytes and `what` when out of
  // memory.
  DeviceBuffer allocate(std::size_t bytes, std::string_view what) { return pool_->allocate(bytes, what); }

  // Queued on the stream; host memory must stay valid until the stream reaches the copy.
  void copy_to_device(void* device_destination, const void* host_source, std::size_t bytes);
  void copy_to_host(void* host_destination, const void* device_source, std::size_t bytes);
  void copy_on_device(void* device_destination, const void* device_source, std::size_t bytes);
  // From `source`'s memory (another context, on this GPU or another) into this context's: a peer
  // copy when the physical GPUs differ. Queued on this stream only: order it after `source`'s
  // work first (wait_for).
  void copy_from_peer(void* device_destination, const void* source_memory, const DeviceContext& source,
                      std::size_t bytes);
  // A new buffer holding a copy of `bytes` host bytes (queued; see copy_to_device).
  DeviceBuffer upload(const void* host_source, std::size_t bytes, std::string_view what);

  // Waits for everything queued on the stream; a kernel's failure surfaces here as runtime_error.
  void synchronize();
  // Work queued on this stream from now on waits for everything queued on `other`'s so far: an
  // event recorded there, no host synchronisation. Inside a graph capture it is a dependency (and
  // a stream that was not capturing joins the capture of `other`'s).
  void wait_for(DeviceContext& other);

 private:
  int logical_, device_;
  std::shared_ptr<DeviceMemoryPool> pool_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_workspace_;  // ours, so that cuBLAS calls can be captured in CUDA graphs
  cudaEvent_t marker_ = nullptr;   // recorded by another context's wait_for(*this)
};

}  // namespace switchyard::cuda
