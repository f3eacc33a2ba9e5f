#include "operators/cpu/kernels/softmax.h"

#include <cmath>

namespace switchyard::cpu {

void softmax(const float* x, std::int64_t rows, std::int64_t n, float* out) {
  for (std::int64_t row = 0; row < rows; ++row) {
    const float* in = x + row * n;
    float* o = out + row * n;
    float max = -INFINITY;
    for (std::int64_t i = 0; i < n; ++i) max = std::fmax(max, in[i]);
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      o[i] = std::exp(in[i] - max);
      sum += o[i];
    }
    const auto inverse = static_cast<float>(1.0 / sum);
    for (std::int64_t i = 0; i < n; ++i) o[i] *= inverse;
  }
}

}  // namespace switchyard::cpu
