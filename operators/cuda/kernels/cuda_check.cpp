#include "operators/cuda/kernels/cuda_check.h"

#include <cstdio>
#include <stdexcept>

#include "core/error.h"

namespace switchyard::cuda {
namespace {

std::string location(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

std::string current_device_name() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return "cuda:?";
  }
  return "cuda:" + std::to_string(device);
}

}  // namespace

std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) value /= 1024, ++unit;
  char text[48];
  if (unit == 0)
    std::snprintf(text, sizeof text, "%zu bytes", bytes);
  else
    std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return text;
}

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  cudaGetLastError();  // clears a non-sticky error so that the next call does not report it again
  throw std::runtime_error(location(file, line) + ": " + call + " failed on " + current_device_name() + ": " +
                           cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(location(file, line) + ": " + call + " failed on " + current_device_name() + ": " +
                           cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

void check_allocation(cudaError_t status, int device, std::size_t bytes, std::string_view what, const char* file,
                      int line) {
  if (status == cudaSuccess) return;
  if (status != cudaErrorMemoryAllocation) {
    cudaGetLastError();
    const std::string where = device < 0 ? "pinned host memory" : "cuda:" + std::to_string(device);
    throw std::runtime_error(location(file, line) + ": allocating " + format_bytes(bytes) + " for " +
                             std::string(what) + " on " + where + " failed: " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
  cudaGetLastError();
  std::string message;
  if (device < 0) {
    message = "out of pinned host memory: allocating " + format_bytes(bytes) + " for " + std::string(what) +
              " failed; free host memory or lower the number of tokens per batch";
  } else {
    std::size_t free_bytes = 0, total_bytes = 0;
    const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
    if (!known) cudaGetLastError();
    const std::string name = "cuda:" + std::to_string(device);
    message = "out of memory on " + name + ": allocating " + format_bytes(bytes) + " for " + std::string(what) +
              " failed";
    if (known) message += " (" + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes) + ")";
    message += "; place fewer modules on " + name + " (`switchyard check` shows the estimate per device)";
  }
  throw InputError(message, 1);
}

}  // namespace switchyard::cuda
