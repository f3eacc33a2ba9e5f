#include "operators/cuda/kernels/device_context.h"

#include <string>

#include "core/error.h"
#include "operators/cuda/kernels/cuda_check.h"

namespace switchyard::cuda {
namespace {

// cuBLAS's recommendation for Hopper; smaller GPUs need less, none needs more.
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver, no device, or a driver older than the runtime
    return 0;
  }
  return count;
}

std::vector<std::size_t> free_memory_bytes() {
  std::vector<std::size_t> out;
  for (int device = 0, count = device_count(); device < count; ++device) {
    DeviceGuard guard(device, std::nothrow);
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      cudaGetLastError();
      free_bytes = 0;
    }
    out.push_back(free_bytes);
  }
  return out;
}

DeviceGuard::DeviceGuard(int device) {
  SWITCHYARD_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) SWITCHYARD_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::DeviceGuard(int device, const std::nothrow_t&) noexcept {
  if (cudaGetDevice(&previous_) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

PinnedBuffer::PinnedBuffer(std::size_t bytes, std::string_view what) : bytes_(bytes) {
  if (bytes == 0) return;
  check_allocation(cudaMallocHost(&data_, bytes), -1, bytes, what, __FILE__, __LINE__);
}

void* PinnedBuffer::device_view() const {
  if (data_ == nullptr) return nullptr;
  void* device = nullptr;
  SWITCHYARD_CUDA_CHECK(cudaHostGetDevicePointer(&device, data_, 0));
  return device;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr && cudaFreeHost(data_) != cudaSuccess) cudaGetLastError();
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr && cudaFreeHost(data_) != cudaSuccess) cudaGetLastError();
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

DeviceContext::DeviceContext(int logical, int device) : logical_(logical), device_(device) {
  const int count = device_count();
  if (device < 0 || device >= count)
    throw InputError("cuda:" + std::to_string(logical) +
                         (logical == device ? std::string() : " (GPU " + std::to_string(device) + " by --device_map)") +
                         " is not present: this machine has " + std::to_string(count) + " CUDA device" +
                         (count == 1 ? "" : "s") +
                         (count > 0 ? "; fold the profile's GPUs onto it with --device_map (e.g. --device_map all=0)"
                                    : std::string()),
                     1);
  const DeviceGuard guard(device);
  pool_ = DeviceMemoryPool::create(device);
  try {
    SWITCHYARD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SWITCHYARD_CUBLAS_CHECK(cublasCreate(&cublas_));
    SWITCHYARD_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    cublas_workspace_ = pool_->allocate(kCublasWorkspaceBytes, "the cuBLAS workspace");
    SWITCHYARD_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.data(), cublas_workspace_.bytes()));
    SWITCHYARD_CUDA_CHECK(cudaEventCreateWithFlags(&marker_, cudaEventDisableTiming));
  } catch (...) {
    if (marker_ != nullptr) cudaEventDestroy(marker_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    throw;
  }
}

DeviceContext::~DeviceContext() {
  const DeviceGuard guard(device_, std::nothrow);
  if (stream_ != nullptr && cudaStreamSynchronize(stream_) != cudaSuccess) cudaGetLastError();
  if (marker_ != nullptr && cudaEventDestroy(marker_) != cudaSuccess) cudaGetLastError();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr && cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
}

void DeviceContext::copy_to_device(void* device_destination, const void* host_source, std::size_t bytes) {
  if (bytes == 0) return;
  const DeviceGuard on(device_);  // the stream's GPU, whichever is current (several GPUs in one pass)
  SWITCHYARD_CUDA_CHECK(cudaMemcpyAsync(device_destination, host_source, bytes, cudaMemcpyHostToDevice, stream_));
}

void DeviceContext::copy_to_host(void* host_destination, const void* device_source, std::size_t bytes) {
  if (bytes == 0) return;
  const DeviceGuard on(device_);
  SWITCHYARD_CUDA_CHECK(cudaMemcpyAsync(host_destination, device_source, bytes, cudaMemcpyDeviceToHost, stream_));
}

void DeviceContext::copy_on_device(void* device_destination, const void* device_source, std::size_t bytes) {
  if (bytes == 0) return;
  const DeviceGuard on(device_);
  SWITCHYARD_CUDA_CHECK(
      cudaMemcpyAsync(device_destination, device_source, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void DeviceContext::copy_from_peer(void* device_destination, const void* source_memory, const DeviceContext& source,
                                   std::size_t bytes) {
  if (bytes == 0) return;
  const DeviceGuard on(device_);
  if (source.device_ == device_) return copy_on_device(device_destination, source_memory, bytes);
  SWITCHYARD_CUDA_CHECK(cudaMemcpyPeerAsync(device_destination, device_, source_memory, source.device_, bytes, stream_));
}

DeviceBuffer DeviceContext::upload(const void* host_source, std::size_t bytes, std::string_view what) {
  DeviceBuffer buffer = allocate(bytes, what);
  copy_to_device(buffer.data(), host_source, bytes);
  return buffer;
}

void DeviceContext::synchronize() { SWITCHYARD_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void DeviceContext::wait_for(DeviceContext& other) {
  if (&other == this) return;
  // The event is other's: a record and a wait follow each other at once, so one event serves every
  // context that waits for it.
  {
    const DeviceGuard on(other.device_);
    SWITCHYARD_CUDA_CHECK(cudaEventRecord(other.marker_, other.stream_));
  }
  const DeviceGuard on(device_);
  SWITCHYARD_CUDA_CHECK(cudaStreamWaitEvent(stream_, other.marker_, 0));
}

}  // namespace switchyard::cuda
