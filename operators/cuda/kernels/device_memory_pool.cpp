#include "operators/cuda/kernels/device_memory_pool.h"

#include <cuda_runtime_api.h>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_context.h"

namespace switchyard::cuda {
namespace {

constexpr std::size_t kSmallClass = 512;
constexpr std::size_t kLargeClass = std::size_t{2} << 20;
constexpr std::size_t kLargeFrom = std::size_t{1} << 20;

std::size_t round_up(std::size_t bytes, std::size_t step) { return (bytes + step - 1) / step * step; }

}  // namespace

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::move(other.pool_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    block_bytes_ = other.block_bytes_;
    other.data_ = nullptr;
    other.bytes_ = other.block_bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (data_ != nullptr) pool_->give_back(data_, block_bytes_);
  pool_.reset();
  data_ = nullptr;
  bytes_ = block_bytes_ = 0;
}

std::shared_ptr<DeviceMemoryPool> DeviceMemoryPool::create(int device) {
  return std::shared_ptr<DeviceMemoryPool>(new DeviceMemoryPool(device));
}

DeviceMemoryPool::~DeviceMemoryPool() {
  // Every buffer holds the pool, so none is live here: only cached blocks remain.
  const DeviceGuard guard(device_, std::nothrow);
  for (const auto& [bytes, block] : cached_) cudaFree(block);
  for (const auto& [bytes, block] : capture_cached_) cudaFree(block);
  for (void* block : graph_blocks_) cudaFree(block);
}

void DeviceMemoryPool::begin_capture() {
  const std::lock_guard lock(mutex_);
  capturing_ = true;
}

void DeviceMemoryPool::end_capture() {
  const std::lock_guard lock(mutex_);
  capturing_ = false;
  for (const auto& [bytes, block] : capture_cached_) {
    graph_blocks_.push_back(block);
    bytes_in_use_ += bytes;
  }
  capture_cached_.clear();
}

std::size_t DeviceMemoryPool::block_size(std::size_t bytes) {
  return bytes < kLargeFrom ? round_up(bytes, kSmallClass) : round_up(bytes, kLargeClass);
}

DeviceBuffer DeviceMemoryPool::allocate(std::size_t bytes, std::string_view what) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  const std::size_t block_bytes = block_size(bytes);
  if (block_bytes < bytes)  // the rounding wrapped around
    check_allocation(cudaErrorMemoryAllocation, device_, bytes, what, __FILE__, __LINE__);
  void* data = nullptr;
  std::size_t got_bytes = block_bytes;
  {
    const std::lock_guard lock(mutex_);
    auto reuse = [&](std::multimap<std::size_t, void*>& cache, bool counted) {
      const auto reusable = cache.lower_bound(block_bytes);
      if (reusable == cache.end() || reusable->first - block_bytes > block_bytes / 4) return false;
      got_bytes = reusable->first;
      data = reusable->second;
      cache.erase(reusable);
      if (counted) bytes_cached_ -= got_bytes;
      return true;
    };
    if ((capturing_ && reuse(capture_cached_, false)) || reuse(cached_, true)) {
      // a cached block
    } else {
      const DeviceGuard guard(device_);
      cudaError_t status = cudaMalloc(&data, block_bytes);
      if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        free_cached_locked();
        status = cudaMalloc(&data, block_bytes);
      }
      check_allocation(status, device_, bytes, what, __FILE__, __LINE__);
    }
    bytes_in_use_ += got_bytes;
  }
  buffer.pool_ = shared_from_this();
  buffer.data_ = data;
  buffer.bytes_ = bytes;
  buffer.block_bytes_ = got_bytes;
  return buffer;
}

void DeviceMemoryPool::give_back(void* data, std::size_t block_bytes) noexcept {
  const std::lock_guard lock(mutex_);
  bytes_in_use_ -= block_bytes;
  if (capturing_) {
    capture_cached_.emplace(block_bytes, data);
    return;
  }
  cached_.emplace(block_bytes, data);
  bytes_cached_ += block_bytes;
}

void DeviceMemoryPool::release_cached() {
  const std::lock_guard lock(mutex_);
  free_cached_locked();
}

void DeviceMemoryPool::free_cached_locked() {
  const DeviceGuard guard(device_);
  cudaError_t first_error = cudaSuccess;
  for (const auto& [bytes, block] : cached_) {
    const cudaError_t status = cudaFree(block);
    if (first_error == cudaSuccess) first_error = status;
  }
  cached_.clear();
  bytes_cached_ = 0;
  SWITCHYARD_CUDA_CHECK(first_error);
}

std::size_t DeviceMemoryPool::bytes_in_use() const {
  const std::lock_guard lock(mutex_);
  return bytes_in_use_;
}

std::size_t DeviceMemoryPool::bytes_cached() const {
  const std::lock_guard lock(mutex_);
  return bytes_cached_;
}

}  // namespace switchyard::cuda
