#include "operators/cpu/kernels/rope.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace switchyard::cpu {

void apply_rope(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride, std::int64_t head_stride,
                int rope_dim, const float* cos, const float* sin, RopeLayout layout) {
  check_rope_dim(rope_dim);
  const int half = rope_dim / 2;
  float input[kMaxRopeDim];
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (std::int64_t h = 0; h < heads; ++h) {
      float* v = x + t * token_stride + h * head_stride;
      std::copy(v, v + rope_dim, input);
      const bool pairs_in = layout != RopeLayout::half_split;
      const bool pairs_out = layout == RopeLayout::interleaved;
      for (int j = 0; j < half; ++j) {
        const float a = pairs_in ? input[2 * j] : input[j];
        const float b = pairs_in ? input[2 * j + 1] : input[j + half];
        // transformers' order: (x * cos) + (rotate_half(x) * sin), each product rounded.
        const float first = a * c[j] - b * s[j];
        const float second = b * c[j] + a * s[j];
        v[pairs_out ? 2 * j : j] = first;
        v[pairs_out ? 2 * j + 1 : j + half] = second;
      }
    }
  }
}

}  // namespace switchyard::cpu
