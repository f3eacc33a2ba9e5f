#include "operators/cuda/launch.cuh"

#include "operators/cuda/device_facts.h"

namespace switchyard::cuda {

bool programmatic_launch_supported() { return current_device_facts().compute_capability_major >= 9; }

bool bf16_tensor_cores_supported() { return current_device_facts().compute_capability_major >= 8; }

}  // namespace switchyard::cuda
