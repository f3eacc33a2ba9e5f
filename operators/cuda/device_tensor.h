#pragma once
// A weight's copy in GPU memory and the dtype it has there (bf16, f32 or ggml blocks; f16
// checkpoints are widened on upload). Declared by operators that may hold one; defined with the CUDA backend.
#include <memory>

#include "core/dtype.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/device_memory_pool.h"
#endif

namespace switchyard {

struct DeviceTensor {
#if SWITCHYARD_HAVE_CUDA
  cuda::DeviceBuffer buffer;  // its own storage, or empty for a view
  // A view: rows of another tensor's storage (weights stacked for one launch), kept alive here.
  const void* view = nullptr;
  std::shared_ptr<const DeviceTensor> owner;
  const void* data() const { return view != nullptr ? view : buffer.data(); }
#endif
  DType dtype = DType::f32;
};

}  // namespace switchyard
