#pragma once
// Top-k selection shared by the CPU gate and the CUDA gate kernel (one thread per token there):
// writes the indices of the k largest of values[0..n), best first; the lower index wins a tie.
#include <cstdint>

#if defined(__CUDACC__)
#define SWITCHYARD_HOST_DEVICE __host__ __device__
#else
#define SWITCHYARD_HOST_DEVICE
#endif

namespace switchyard {

SWITCHYARD_HOST_DEVICE inline void select_top_k(const float* values, int n, int k, std::int32_t* ids) {
  int count = 0;
  for (int i = 0; i < n; ++i) {
    if (count == k && !(values[i] > values[ids[k - 1]])) continue;
    int slot = count < k ? count++ : k - 1;
    while (slot > 0 && values[i] > values[ids[slot - 1]]) {
      ids[slot] = ids[slot - 1];
      --slot;
    }
    ids[slot] = i;
  }
}

}  // namespace switchyard
