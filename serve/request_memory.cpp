#include "serve/request_memory.h"

#include <malloc.h>

#include <limits>

#include "core/json_input.h"

namespace switchyard::serve {
namespace {

// Shares from this size up trim the heap when they end: a body of a few hundred KiB and more.
constexpr std::size_t kTrimFromBytes = std::size_t{8} << 20;

}  // namespace

std::size_t RequestMemory::share_bytes(std::size_t body_bytes) {
  const std::size_t document = json_document_budget(body_bytes);
  if (body_bytes > (std::numeric_limits<std::size_t>::max() - document) / 3) return std::numeric_limits<std::size_t>::max();
  return 3 * body_bytes + document;
}

std::optional<RequestMemory::Lease> RequestMemory::reserve(std::size_t body_bytes) {
  const std::size_t bytes = share_bytes(body_bytes);
  if (!take(bytes)) return std::nullopt;
  return Lease(this, bytes, body_bytes);
}

std::size_t RequestMemory::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return reserved_bytes_;
}

bool RequestMemory::take(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes > budget_bytes_ - reserved_bytes_) return false;
  reserved_bytes_ += bytes;
  return true;
}

void RequestMemory::give_back(std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  reserved_bytes_ -= bytes;
}

RequestMemory::Lease::Lease(RequestMemory* owner, std::size_t bytes, std::size_t body_bytes)
    : owner_(owner), bytes_(bytes), document_budget_(json_document_budget(body_bytes)) {}

RequestMemory::Lease::Lease(Lease&& other) noexcept
    : owner_(other.owner_), bytes_(other.bytes_), document_budget_(other.document_budget_) {
  other.owner_ = nullptr;
}

RequestMemory::Lease& RequestMemory::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    end();
    owner_ = other.owner_;
    bytes_ = other.bytes_;
    document_budget_ = other.document_budget_;
    other.owner_ = nullptr;
  }
  return *this;
}

RequestMemory::Lease::~Lease() { end(); }

void RequestMemory::Lease::end() noexcept {
  if (!owner_) return;
  owner_->give_back(bytes_);
  if (bytes_ >= kTrimFromBytes) malloc_trim(0);
  owner_ = nullptr;
}

bool RequestMemory::Lease::grow_to(std::size_t body_bytes) {
  const std::size_t bytes = share_bytes(body_bytes);
  if (bytes <= bytes_) return true;
  if (!owner_->take(bytes - bytes_)) return false;
  bytes_ = bytes;
  document_budget_ = json_document_budget(body_bytes);
  return true;
}

}  // namespace switchyard::serve
