#pragma once
// cuBLAS, loaded when the first GPU operator asks for it, not when the process starts.
//
// cublas_on_demand.cpp defines the cuBLAS entry points that our sources call (cublasCreate_v2,
// cublasGemmEx, ...), with cublas_v2.h's exact prototypes, and each forwards to the function of the
// same name in libcublas.so.<major>, opened with dlopen on the first call. The executables do not
// link libcublas (nor, through it, the 540 MB libcublasLt): a command that never builds a GPU
// operator never maps them. Callers include <cublas_v2.h> and call cuBLAS as usual. A cuBLAS
// function that is not defined there is a link error ("undefined reference to cublasX"): add its
// forwarder beside the others.
//
// The CUDA runtime stays the static one linked into each executable (one per process); cuBLAS does
// not bring its own.
#include "core/shared_library.h"

namespace switchyard::cuda {

// The library, opened on the first call: LD_LIBRARY_PATH and the system's library cache first,
// then the CUDA toolkit's directory that this build was configured with. InputError (exit 2)
// naming each file tried and dlerror()'s reason when it cannot be loaded.
const SharedLibrary& cublas_library();

}  // namespace switchyard::cuda
