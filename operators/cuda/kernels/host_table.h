#pragma once
// Host memory that GPU kernels read in place over the bus, such as the token embedding table a
// decode graph gathers its row from when the profile puts the embedding on the CPU. Where the
// caller says the pages around it are read-only and nobody else's to write (a memory-mapped
// checkpoint) and the driver allows, those pages are registered (read-only, mapped into every
// device): no copy, no second host copy. Otherwise a page-locked copy: registering heap pages would
// make the neighbours that share the table's first and last pages read-only to the GPU too, and a
// later copy into one of them fails.
#include <cstddef>
#include <string_view>

#include "operators/cuda/kernels/device_context.h"

namespace switchyard::cuda {

class HostTable {
 public:
  HostTable() = default;
  // read_only_pages: every page that [data, data + bytes) touches is read-only memory that nothing
  // writes (Tensor::in_read_only_pages); `data` must then outlive this object.
  HostTable(const void* data, std::size_t bytes, std::string_view what, bool read_only_pages);
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
