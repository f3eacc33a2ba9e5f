#pragma once
// Linear layer on the GPU: y = x W^T, W in transformers' layout [out, in].
//
// Decode (at most kGemvMaxTokens tokens, `in` a multiple of 8, aligned operands) runs as a
// matrix-vector product (gemv.h): f32 x times the widened weights, f32 accumulation, no rounding of
// x. Everything else goes through cuBLAS:
//   W bf16: x is rounded to bf16 (cuBLAS multiplies bf16 by bf16), products are accumulated in
//           f32 (CUBLAS_COMPUTE_32F), y is f32. Rounding x to 8 significant bits makes y differ
//           from the CPU's f32-activation result by about 2^-9 of sum |x * W| per output;
//           this is what transformers computes on a GPU with a bf16 model.
//   W f32:  plain f32 GEMM (no TF32), within f32 rounding of the CPU result.
//   W in ggml blocks (quant_gemv.h): decode as gemv on the blocks; more tokens dequantize the
//           rows to bf16, a bounded chunk at a time, and multiply as the bf16 path does.
#include <cstdint>

#include "core/dtype.h"
#include "operators/cuda/kernels/device_context.h"

namespace switchyard::cuda {

// Device pointers. x: [tokens, in] f32; weight: [out, in] f32, bf16 or a block type; y: [tokens, out] f32, not
// overlapping x. Queued on the context's stream; the bf16 copy of x comes from its pool. Throws
// std::invalid_argument for another dtype or a dimension beyond cuBLAS's 32-bit sizes.
void linear(DeviceContext& context, const float* x, std::int64_t tokens, std::int64_t in, const void* weight,
            DType weight_dtype, std::int64_t out, float* y);

bool linear_supports(DType weight_dtype);

}  // namespace switchyard::cuda
