#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace switchyard {
namespace {

struct HostStorage final : Storage {
  ~HostStorage() override { std::free(data); }
};

}  // namespace

std::shared_ptr<Storage> allocate_host(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;
  auto storage = std::make_shared<HostStorage>();
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  storage->data = static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded));
  if (!storage->data) throw std::bad_alloc();
  storage->bytes = bytes;
  storage->device = Device::cpu();
  return storage;
}

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape, std::shared_ptr<Storage> storage, std::size_t offset)
    : dtype_(dtype), shape_(std::move(shape)), storage_(std::move(storage)), offset_(offset) {
  if (storage_ && offset_ + bytes() > storage_->bytes)
    throw std::out_of_range("tensor " + shape_str() + " does not fit its storage");
}

Tensor Tensor::empty(DType dtype, std::vector<std::int64_t> shape) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
  return Tensor(dtype, std::move(shape), allocate_host(storage_bytes(dtype, n)));
}

Tensor Tensor::zeros(DType dtype, std::vector<std::int64_t> shape) {
  Tensor t = empty(dtype, std::move(shape));
  std::memset(t.data(), 0, t.bytes());
  return t;
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape_) n *= d;
  return n;
}

Tensor Tensor::rows(std::int64_t first, std::int64_t count) const {
  if (shape_.empty() || first < 0 || count < 0 || first + count > shape_[0])
    throw std::out_of_range("rows [" + std::to_string(first) + ", " + std::to_string(first + count) + ") of " + shape_str());
  std::vector<std::int64_t> shape = shape_;
  shape[0] = count;
  const std::size_t row_bytes = shape_[0] ? bytes() / static_cast<std::size_t>(shape_[0]) : 0;
  return Tensor(dtype_, std::move(shape), storage_, offset_ + static_cast<std::size_t>(first) * row_bytes);
}

Tensor Tensor::reshaped(std::vector<std::int64_t> shape) const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  if (n != numel()) throw std::invalid_argument("cannot reshape " + shape_str() + " to " + std::to_string(n) + " elements");
  return Tensor(dtype_, std::move(shape), storage_, offset_);
}

std::string Tensor::shape_str() const {
  std::string out = "[";
  for (std::size_t i = 0; i < shape_.size(); ++i) out += (i ? ", " : "") + std::to_string(shape_[i]);
  return out + "]";
}

}  // namespace switchyard
