#include "operators/cuda/kernels/host_flag.h"

#include <cuda.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/host_poll.h"

namespace switchyard::cuda {
namespace {

using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct MemoryOperations {
  WriteValue32 write = nullptr;
  WaitValue32 wait = nullptr;
};

// The driver's stream memory operations, looked up once; both null where the driver has none.
const MemoryOperations& memory_operations() {
  static const MemoryOperations operations = [] {
    MemoryOperations found;
    void* write = nullptr;
    void* wait = nullptr;
    cudaDriverEntryPointQueryResult write_status{}, wait_status{};
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &write, 12000, cudaEnableDefault, &write_status) ==
            cudaSuccess &&
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wait, 12000, cudaEnableDefault, &wait_status) ==
            cudaSuccess &&
        write_status == cudaDriverEntryPointSuccess && wait_status == cudaDriverEntryPointSuccess) {
      found.write = reinterpret_cast<WriteValue32>(write);
      found.wait = reinterpret_cast<WaitValue32>(wait);
    } else {
      cudaGetLastError();
    }
    return found;
  }();
  return operations;
}

void check_driver(CUresult status, const char* call) {
  if (status != CUDA_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed with CUresult " + std::to_string(static_cast<int>(status)));
}

inline void relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

std::atomic_ref<std::uint32_t> flag_ref(std::uint32_t* flag) { return std::atomic_ref<std::uint32_t>(*flag); }

}  // namespace

HostFlags::HostFunctionFlag* HostFlags::fallback_slot(int i, std::uint32_t value) {
  if (value > 1) throw std::invalid_argument("HostFlags: the host-function fallback handles the values 0 and 1");
  return &fallback_[static_cast<std::size_t>(2 * i + static_cast<int>(value))];
}

HostFlags::HostFlags(int count)
    : memory_(sizeof(std::uint32_t) * static_cast<std::size_t>(count > 0 ? count : 1),
              "hand-off flags between the GPU and the CPU experts"),
      device_(memory_.device_view_as<std::uint32_t>()),
      count_(count) {
  std::uint32_t* flags = memory_.as<std::uint32_t>();
  for (int i = 0; i < count_; ++i) flag_ref(flags + i).store(0, std::memory_order_relaxed);
  fallback_.resize(static_cast<std::size_t>(2 * count_));
  for (int i = 0; i < 2 * count_; ++i)
    fallback_[static_cast<std::size_t>(i)] = {flags + i / 2, static_cast<std::uint32_t>(i % 2)};
}

std::uint32_t* HostFlags::flag(int i) const {
  if (i < 0 || i >= count_) throw std::out_of_range("HostFlags: flag " + std::to_string(i));
  return memory_.as<std::uint32_t>() + i;
}

std::uint32_t* HostFlags::device_flag(int i) const { return device_ + (flag(i) - memory_.as<std::uint32_t>()); }

void HostFlags::stream_write(cudaStream_t stream, int i, std::uint32_t value) {
  stream_operation(stream, i, value, /*wait=*/false);
}

void HostFlags::stream_wait(cudaStream_t stream, int i, std::uint32_t value) {
  stream_operation(stream, i, value, /*wait=*/true);
}

void HostFlags::stream_operation(cudaStream_t stream, int i, std::uint32_t value, bool wait) {
  const MemoryOperations& operations = memory_operations();
  if (operations.write != nullptr) {
    const auto on = reinterpret_cast<CUstream>(stream);
    const auto at = reinterpret_cast<CUdeviceptr>(device_flag(i));
    if (wait) check_driver(operations.wait(on, at, value, CU_STREAM_WAIT_VALUE_EQ), "cuStreamWaitValue32");
    else check_driver(operations.write(on, at, value, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32");
    return;
  }
  const cudaHostFn_t callback = wait ? +[](void* argument) {
    const auto* f = static_cast<HostFunctionFlag*>(argument);
    while (flag_ref(f->flag).load(std::memory_order_acquire) != f->value) relax();
  } : +[](void* argument) {
    const auto* f = static_cast<HostFunctionFlag*>(argument);
    flag_ref(f->flag).store(f->value, std::memory_order_release);
  };
  SWITCHYARD_CUDA_CHECK(cudaLaunchHostFunc(stream, callback, fallback_slot(i, value)));
}

void HostFlags::host_write(int i, std::uint32_t value) {
  flag_ref(flag(i)).store(value, std::memory_order_release);
}

void HostFlags::host_wait(int i, std::uint32_t value, cudaStream_t stream, const std::atomic<bool>* launching) const {
  auto flag = flag_ref(this->flag(i));
  poll_until([&] { return flag.load(std::memory_order_acquire) == value; }, stream, PollPause::spin,
             [&] {
               return "the GPU finished its work without handing the CPU experts their input (flag " +
                      std::to_string(i) + ")";
             },
             launching);
}

}  // namespace switchyard::cuda
