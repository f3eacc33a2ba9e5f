#pragma once
// Tensor: dtype, shape, device and a view into storage that is either owned host memory or a
// memory-mapped weight file (zero copy). Row-major and contiguous; shapes as the checkpoint has
// them (Linear weights [out_features, in_features]).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace switchyard {

// Bytes somewhere; keeps whatever backs them (an allocation, a mapping) alive.
struct Storage {
  virtual ~Storage() = default;
  std::byte* data = nullptr;
  std::size_t bytes = 0;
  Device device;
  // Whether every page the bytes touch belongs to a read-only mapping that nothing writes (a
  // checkpoint's): registering those pages with a GPU cannot take anyone else's memory with them.
  bool read_only_pages = false;
};

// 64-byte aligned host memory (a cache line; the widest AVX-512 load).
std::shared_ptr<Storage> allocate_host(std::size_t bytes);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<std::int64_t> shape, std::shared_ptr<Storage> storage, std::size_t offset = 0);

  // Uninitialised host tensor.
  static Tensor empty(DType dtype, std::vector<std::int64_t> shape);
  // Host tensor of zeros.
  static Tensor zeros(DType dtype, std::vector<std::int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t dim(int i) const { return shape_[static_cast<std::size_t>(i < 0 ? i + rank() : i)]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t numel() const;
  std::size_t bytes() const { return storage_bytes(dtype_, static_cast<std::uint64_t>(numel())); }
  Device device() const { return storage_ ? storage_->device : Device::cpu(); }
  bool in_read_only_pages() const { return storage_ && storage_->read_only_pages; }
  bool defined() const { return storage_ != nullptr; }

  void* data() const { return storage_->data + offset_; }
  template <typename T>
  T* data_as() const { return reinterpret_cast<T*>(data()); }

  // Rows [first, first + count) of the leading dimension, sharing storage.
  Tensor rows(std::int64_t first, std::int64_t count) const;
  // Same bytes, another shape with the same element count.
  Tensor reshaped(std::vector<std::int64_t> shape) const;

  std::string shape_str() const;  // "[2048, 7168]"

 private:
  DType dtype_ = DType::f32;
  std::vector<std::int64_t> shape_;
  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;
};

}  // namespace switchyard
