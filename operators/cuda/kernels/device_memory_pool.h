#pragma once
// A caching allocator for the memory of one CUDA device.
//
// cudaMalloc and cudaFree synchronise the device and cost tens of microseconds; a decode step
// allocates the same activation buffers every time. The pool rounds each request up to a size
// class (512 bytes below 1 MiB, 2 MiB above), keeps freed blocks in free lists by size and hands
// them out again. A cached block serves a request of its size up to 25% smaller, which bounds the
// waste. When cudaMalloc fails the pool frees its cached blocks and tries once more; if that
// fails too it throws InputError naming the device, the bytes and what they were for.
//
// Streams: a freed block can be handed out at once, while kernels queued before the free may still
// use it. That is safe when every user of the pool's memory runs on one stream (the device
// context's), whose order serialises the two uses; work on another stream must synchronise with
// it before its buffers are released.
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace switchyard::cuda {

class DeviceMemoryPool;

// A block of device memory, returned to its pool when destroyed. Move-only; the pool stays alive
// while any of its buffers does.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }  // as requested; the block may be larger
  bool empty() const { return data_ == nullptr; }
  // Returns the block to the pool now.
  void release() noexcept;

 private:
  friend class DeviceMemoryPool;
  std::shared_ptr<DeviceMemoryPool> pool_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t block_bytes_ = 0;
};

class DeviceMemoryPool : public std::enable_shared_from_this<DeviceMemoryPool> {
 public:
  // Pools are shared: buffers keep theirs alive.
  static std::shared_ptr<DeviceMemoryPool> create(int device);
  ~DeviceMemoryPool();
  DeviceMemoryPool(const DeviceMemoryPool&) = delete;
  DeviceMemoryPool& operator=(const DeviceMemoryPool&) = delete;

  // `what` names the buffer in the out-of-memory error ("the KV cache of layer 3").
  // Zero bytes give an empty buffer.
  DeviceBuffer allocate(std::size_t bytes, std::string_view what);
  // Frees every cached (unused) block back to CUDA.
  void release_cached();

  // CUDA graph capture on this pool's stream: a block freed during the capture is reused only by
  // the capture, and afterwards kept for the graph, never handed out again (every replay writes
  // it). Blocks taken from the cache during the capture become the graph's the same way.
  void begin_capture();
  void end_capture();

  int device() const { return device_; }
  std::size_t bytes_in_use() const;  // held by live buffers, in whole blocks
  std::size_t bytes_cached() const;  // kept for reuse

  static std::size_t block_size(std::size_t bytes);

 private:
  explicit DeviceMemoryPool(int device) : device_(device) {}
  friend class DeviceBuffer;
  void give_back(void* data, std::size_t block_bytes) noexcept;
  void free_cached_locked();

  int device_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;  // block bytes -> block
  bool capturing_ = false;
  std::multimap<std::size_t, void*> capture_cached_;  // freed during a capture
  std::vector<void*> graph_blocks_;                   // kept for captured graphs
  std::size_t bytes_in_use_ = 0;
  std::size_t bytes_cached_ = 0;
};

}  // namespace switchyard::cuda
