#include "operators/cpu/kernels/silu_and_mul.h"

#include <cmath>

namespace switchyard::cpu {

void silu_and_mul(Isa isa, const float* gate, const float* up, std::int64_t count, float* out) {
#if defined(SWITCHYARD_CPU_X86)
  if (isa != Isa::scalar && isa != Isa::avx2 && isa_supported(Isa::avx512)) return detail::silu_and_mul_avx512(gate, up, count, out);
#endif
  (void)isa;
  for (std::int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void silu_and_mul(const float* gate, const float* up, std::int64_t count, float* out) {
  silu_and_mul(chosen_isa(), gate, up, count, out);
}

void silu_and_mul_fused(const float* gate_up, std::int64_t tokens, std::int64_t width, float* out) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* row = gate_up + t * 2 * width;
    silu_and_mul(row, row + width, width, out + t * width);
  }
}

}  // namespace switchyard::cpu
