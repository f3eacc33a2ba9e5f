// operators/cuda/kernels/cublas_on_demand: the cuBLAS entry points we define forward to libcublas, opened
// on first use. Needs no GPU: the library loads, and its status functions run, without one.
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include <cublas_v2.h>

#include <string>

#include <doctest/doctest.h>

#include "core/shared_library.h"
#include "operators/cuda/kernels/cublas_on_demand.h"

using namespace switchyard;

TEST_CASE("cuBLAS on demand: the forwarders call libcublas's own functions") {
  // Whether another test opened it first or not, a call through a forwarder maps it now.
  const char* name = cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(shared_library_loaded("libcublas.so"));
  const SharedLibrary& library = cuda::cublas_library();
  INFO("cuBLAS from " << library.file);
  using StatusText = const char*(cublasStatus_t);
  auto* const real_name = reinterpret_cast<StatusText*>(library.symbol("cublasGetStatusName"));
  auto* const real_string = reinterpret_cast<StatusText*>(library.symbol("cublasGetStatusString"));
  // Our definition is not the library's (it forwards), and gives what the library's gives.
  CHECK(reinterpret_cast<void*>(real_name) != reinterpret_cast<void*>(&cublasGetStatusName));
  CHECK(std::string(name) == real_name(CUBLAS_STATUS_NOT_SUPPORTED));
  for (const cublasStatus_t status : {CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_ALLOC_FAILED,
                                      CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_EXECUTION_FAILED}) {
    INFO("status " << static_cast<int>(status));
    CHECK(std::string(cublasGetStatusName(status)) == real_name(status));
    CHECK(std::string(cublasGetStatusString(status)) == real_string(status));
    CHECK(std::string(cublasGetStatusName(status)).starts_with("CUBLAS_STATUS_"));
  }
  // A call that needs no device: a null handle is refused by cuBLAS itself, through the forwarder.
  CHECK(cublasSetStream(nullptr, nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
}

#endif  // SWITCHYARD_HAVE_CUDA
