#include "operators/cuda/kernels/host_table.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "operators/cuda/kernels/cuda_check.h"

namespace switchyard::cuda {

HostTable::HostTable(const void* data, std::size_t bytes, std::string_view what, bool read_only_pages) {
  if (data == nullptr || bytes == 0) return;
  if (read_only_pages) {
    // Whole pages around the table (registration takes pages); read-only, so a read-only mapping
    // (the checkpoint's) qualifies.
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(data) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes + page - 1) / page * page;
    void* first = reinterpret_cast<void*>(begin);
    if (cudaHostRegister(first, end - begin, cudaHostRegisterMapped | cudaHostRegisterReadOnly) == cudaSuccess) {
      void* device = nullptr;
      if (cudaHostGetDevicePointer(&device, first, 0) == cudaSuccess) {
        registered_ = first;
        device_ = static_cast<const std::byte*>(device) + (reinterpret_cast<std::uintptr_t>(data) - begin);
        return;
      }
      if (cudaHostUnregister(first) != cudaSuccess) cudaGetLastError();
    }
    cudaGetLastError();  // refused (no read-only registration here, or the pages are taken): copy
  }
  copy_ = PinnedBuffer(bytes, what);
  std::memcpy(copy_.data(), data, bytes);
  device_ = copy_.device_view();
}

HostTable::~HostTable() {
  if (registered_ != nullptr && cudaHostUnregister(registered_) != cudaSuccess) cudaGetLastError();
}

}  // namespace switchyard::cuda
