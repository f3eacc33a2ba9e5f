#pragma once
// Turning CUDA and cuBLAS status codes into exceptions, never aborts.
//
//   SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(...));      // std::runtime_error "file:line: call: error"
//   SWITCHYARD_CUBLAS_CHECK(cublasGemmEx(...));
//   check_allocation(status, device, bytes, what);    // InputError when out of memory
//
// Running out of device or pinned memory is something a user causes (a plan that does not fit), so
// it is an InputError (exit code 1) that names the device, the bytes asked for, what they were for
// and what is free; every other failure is a bug or a broken machine: std::runtime_error.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace switchyard::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

// For the status of an allocation of `bytes` on `device` (-1: pinned host memory) for `what`
// ("expert weights of layer 3"): InputError on out-of-memory, runtime_error on other failures.
void check_allocation(cudaError_t status, int device, std::size_t bytes, std::string_view what, const char* file,
                      int line);

// "1.50 GiB" for messages.
std::string format_bytes(std::size_t bytes);

}  // namespace switchyard::cuda

#define SWITCHYARD_CUDA_CHECK(call) ::switchyard::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define SWITCHYARD_CUBLAS_CHECK(call) ::switchyard::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: configuration errors (too many threads, no kernel image for this GPU).
#define SWITCHYARD_CUDA_CHECK_LAUNCH() \
  ::switchyard::cuda::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
