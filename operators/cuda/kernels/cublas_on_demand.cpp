// The cuBLAS entry points our sources call, each forwarding to libcublas opened on first use
// (cublas_on_demand.h says why). The definitions repeat cublas_v2.h's prototypes, so a prototype
// that changes with a new toolkit is a compile error here, not a wrong call.
#include "operators/cuda/kernels/cublas_on_demand.h"

#include <cublas_v2.h>

#include <string>

namespace switchyard::cuda {
namespace {

#define SWITCHYARD_STRINGIFY_VALUE(x) #x
#define SWITCHYARD_STRINGIFY(x) SWITCHYARD_STRINGIFY_VALUE(x)
// The soname the linker would have recorded: cuBLAS keeps its ABI within a major version.
constexpr const char* kCublasSoname = "libcublas.so." SWITCHYARD_STRINGIFY(CUBLAS_VER_MAJOR);

// Calls cuBLAS's function `name` with `arguments`: looked up on the first call of each forwarder
// (Tag, a type local to the forwarder, gives each its own cached pointer), then called directly.
// Arguments are deduced by value, the types the forwarder's parameters have, so the pointer has
// the real function's type.
template <typename Tag, typename Result, typename... Arguments>
Result call_cublas(const char* name, Arguments... arguments) {
  static auto* const real = reinterpret_cast<Result (*)(Arguments...)>(cublas_library().symbol(name));
  return real(arguments...);
}

}  // namespace

const SharedLibrary& cublas_library() {
  // A static local: opened once even when several threads build operators; if opening throws,
  // the next call tries again.
  static const SharedLibrary library = open_shared_library(
      {kCublasSoname, std::string(SWITCHYARD_CUBLAS_DIRECTORY) + "/" + kCublasSoname},
      "cuBLAS (needed by the GPU operators)",
      "install the CUDA toolkit's cuBLAS " SWITCHYARD_STRINGIFY(CUBLAS_VER_MAJOR)
      ".x, or add the directory that holds it to LD_LIBRARY_PATH");
  return library;
}

}  // namespace switchyard::cuda

// A forwarder's body: `name` of cuBLAS, returning `Result`, called with the parameters.
#define SWITCHYARD_CUBLAS_FORWARD(Result, name, ...) \
  struct Tag;                                         \
  return ::switchyard::cuda::call_cublas<Tag, Result>(#name, __VA_ARGS__)

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  SWITCHYARD_CUBLAS_FORWARD(cublasStatus_t, cublasCreate_v2, handle);
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  SWITCHYARD_CUBLAS_FORWARD(cublasStatus_t, cublasDestroy_v2, handle);
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  SWITCHYARD_CUBLAS_FORWARD(cublasStatus_t, cublasSetStream_v2, handle, stream);
}

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t workspace_bytes) {
  SWITCHYARD_CUBLAS_FORWARD(cublasStatus_t, cublasSetWorkspace_v2, handle, workspace, workspace_bytes);
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  SWITCHYARD_CUBLAS_FORWARD(const char*, cublasGetStatusName, status);
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  SWITCHYARD_CUBLAS_FORWARD(const char*, cublasGetStatusString, status);
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void* alpha, const void* a, cudaDataType a_type,
                                         int lda, const void* b, cudaDataType b_type, int ldb, const void* beta,
                                         void* c, cudaDataType c_type, int ldc, cublasComputeType_t compute_type,
                                         cublasGemmAlgo_t algo) {
  SWITCHYARD_CUBLAS_FORWARD(cublasStatus_t, cublasGemmEx, handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb,
                            beta, c, c_type, ldc, compute_type, algo);
}

cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType a_type, int lda, long long int stride_a, const void* b,
    cudaDataType b_type, int ldb, long long int stride_b, const void* beta, void* c, cudaDataType c_type, int ldc,
    long long int stride_c, int batch_count, cublasComputeType_t compute_type, cublasGemmAlgo_t algo) {
  SWITCHYARD_CUBLAS_FORWARD(cublasStatus_t, cublasGemmStridedBatchedEx, handle, transa, transb, m, n, k, alpha, a, a_type, lda,
                            stride_a, b, b_type, ldb, stride_b, beta, c, c_type, ldc, stride_c, batch_count,
                            compute_type, algo);
}

}  // extern "C"
