#include "operators/cpu/kernels/rms_norm.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "operators/cpu/kernels/half.h"

namespace switchyard::cpu {
namespace {

inline float widen(float w) { return w; }
inline float widen(std::uint16_t bf16) { return bf16_to_f32(bf16); }

template <class W>
void rms_norm_rows(const float* x, std::int64_t rows, std::int64_t dim, const W* weight, float eps, float* out) {
  for (std::int64_t row = 0; row < rows; ++row) {
    const float* in = x + row * dim;
    double sum_squares = 0;
    for (std::int64_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(in[i]) * in[i];
    const auto variance = static_cast<float>(sum_squares / static_cast<double>(dim));
    // torch.rsqrt of the f32 sum variance + eps, within an ulp (computed in double, rounded once).
    const auto inverse_rms = static_cast<float>(1.0 / std::sqrt(static_cast<double>(variance + eps)));
    float* o = out + row * dim;
    for (std::int64_t i = 0; i < dim; ++i) o[i] = widen(weight[i]) * (in[i] * inverse_rms);
  }
}

}  // namespace

void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight, DType weight_dtype, float eps,
              float* out) {
  if (dim <= 0) return;
  switch (weight_dtype) {
    case DType::f32: return rms_norm_rows(x, rows, dim, static_cast<const float*>(weight), eps, out);
    case DType::bf16: return rms_norm_rows(x, rows, dim, static_cast<const std::uint16_t*>(weight), eps, out);
    default:
      throw std::invalid_argument(std::string("rms_norm: weights of dtype ") + dtype_name(weight_dtype) +
                                  " are not supported (f32 and bf16 are)");
  }
}

}  // namespace switchyard::cpu
