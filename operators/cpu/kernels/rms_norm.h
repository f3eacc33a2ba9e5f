#pragma once
// RMSNorm as transformers computes it (LlamaRMSNorm, DeepseekV3RMSNorm, Qwen3MoeRMSNorm,
// MixtralRMSNorm) in f32: variance = mean(x^2); out = weight * (x * rsqrt(variance + eps)).
// The mean is accumulated in double, so it is at least as close to exact as torch's f32 sum; the
// two products are rounded in transformers' order.
#include <cstdint>

#include "core/dtype.h"

namespace switchyard::cpu {

// x: [rows, dim] f32; weight: [dim] f32 or bf16; out: [rows, dim] f32, may be x itself.
// Throws std::invalid_argument for another weight dtype.
void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight, DType weight_dtype, float eps,
              float* out);

}  // namespace switchyard::cpu
