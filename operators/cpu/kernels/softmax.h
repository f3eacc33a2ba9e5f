#pragma once
// Softmax over the last dimension in f32, shifted by the row maximum so that no exp overflows.
#include <cstdint>

namespace switchyard::cpu {

// x, out: [rows, n] f32; out may be x. A row of all -inf gives NaN, as in torch.
void softmax(const float* x, std::int64_t rows, std::int64_t n, float* out);

}  // namespace switchyard::cpu
