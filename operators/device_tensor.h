#pragma once
// A weight's copy in GPU memory and the dtype it has there (bf16 or f32; f16 checkpoints are
// widened on upload). Declared by operators that may hold one; defined with the CUDA backend.
#include "core/dtype.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/device_memory_pool.h"
#endif

namespace switchyard {

struct DeviceTensor {
#if SWITCHYARD_HAVE_CUDA
  cuda::DeviceBuffer buffer;
#endif
  DType dtype = DType::f32;
};

}  // namespace switchyard
