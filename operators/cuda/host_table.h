#pragma once
// Host memory that GPU kernels read in place over the bus, such as the token embedding table a
// decode graph gathers its row from when the profile puts the embedding on the CPU. Where the
// driver allows, the pages that hold it are registered (read-only, mapped into every device): no
// copy, no second host copy, and a memory-mapped checkpoint stays the only one. Otherwise (or when
// asked) a page-locked copy.
#include <cstddef>
#include <string_view>

#include "operators/cuda/device_context.h"

namespace switchyard::cuda {

class HostTable {
 public:
  HostTable() = default;
  // `data` must outlive this object when registered (always, unless copy_always).
  HostTable(const void* data, std::size_t bytes, std::string_view what, bool copy_always = false);
  ~HostTable();
  HostTable(const HostTable&) = delete;
  HostTable& operator=(const HostTable&) = delete;

  // The device's address of `data` (of its copy).
  const void* device_view() const { return device_; }
  bool registered() const { return registered_ != nullptr; }

 private:
  void* registered_ = nullptr;  // the first registered page
  PinnedBuffer copy_;
  const void* device_ = nullptr;
};

}  // namespace switchyard::cuda
