#pragma once
// The SwiGLU activation of the MLPs and experts: out = silu(gate) * up, silu(g) = g / (1 + e^-g),
// in f32 as transformers' `act_fn(gate_proj(x)) * up_proj(x)`.
#include <cstdint>

#include "operators/cpu/kernels/isa.h"

namespace switchyard::cpu {

// gate, up, out: [count] f32; out may be gate or up. The chosen ISA's variant (isa.h): from
// AVX-512 on, 16 lanes with its own exp (a few ulp from libm's expf); the scalar one otherwise.
void silu_and_mul(const float* gate, const float* up, std::int64_t count, float* out);
void silu_and_mul(Isa isa, const float* gate, const float* up, std::int64_t count, float* out);

// gate_up: [tokens, 2 * width] f32, each row the gate half then the up half (a fused
// gate_up_proj); out: [tokens, width] f32.
void silu_and_mul_fused(const float* gate_up, std::int64_t tokens, std::int64_t width, float* out);

namespace detail {
void silu_and_mul_avx512(const float* gate, const float* up, std::int64_t count, float* out);
}  // namespace detail

}  // namespace switchyard::cpu
