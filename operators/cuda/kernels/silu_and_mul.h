#pragma once
// SwiGLU on the GPU, as operators/cpu/kernels/silu_and_mul.h: out = silu(gate) * up, silu(g) = g / (1 + e^-g),
// in f32. expf is within 2 ulps of e^x, so results agree with the CPU's to a few ulps.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace switchyard::cuda {

// Device pointers. gate, up, out: [count] f32; out may be gate or up. Queued on `stream`.
void silu_and_mul(const float* gate, const float* up, std::int64_t count, float* out, cudaStream_t stream);

// gate_up: [tokens, 2 * width] f32, each row the gate half then the up half; out: [tokens, width].
void silu_and_mul_fused(const float* gate_up, std::int64_t tokens, std::int64_t width, float* out,
                        cudaStream_t stream);

}  // namespace switchyard::cuda
