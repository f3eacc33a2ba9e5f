#pragma once
// Decode products and prefill dequantisation on weights kept as ggml blocks in GPU memory
// (KLinearMarlin's storage: the checkpoint's bytes, no bf16 copy). gemv.h's gemv and gemv_swiglu
// call these for a block dtype; the shape rules are theirs, plus whole blocks: `in`, the group
// stride and the row offset are multiples of the type's block (32 or 256 weights), and the weight
// pointer keeps its blocks' alignment (1, 2 or 4 bytes; buffers from the pool are 256-aligned).
//
// Numerics: each weight is decoded exactly as the CPU's scalar reference decodes it
// (quant_rows.cuh); products with f32 x are accumulated in f32 as gemv does, so
// |y - ref| <= ~1e-5 * sum |w x| against a double reference over the dequantized weights.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "operators/cuda/kernels/gemv.h"

namespace switchyard::cuda {

// Whether `dtype` is one of the block types these take: every block type of core/dtype.h (ggml's
// Q8_0 ... Q5_1, Q2_K ... Q6_K, the IQ types and MXFP4).
bool quant_gemv_dtype(DType dtype);
bool quant_gemv_supports(const GemvShape& shape, DType dtype, const void* weight, const float* x);
void quant_gemv(const GemvShape& shape, const void* weight, DType dtype, const float* x, float* y,
                cudaStream_t stream);
bool quant_gemv_swiglu_supports(std::int64_t tokens, std::int64_t in, DType dtype, const void* gate, const void* up,
                                const float* x);
void quant_gemv_swiglu(std::int64_t tokens, std::int64_t in, std::int64_t rows, const void* gate, const void* up,
                       DType dtype, const float* x, float* h, cudaStream_t stream);

// rows x in weights of `dtype` (rows of whole blocks, as stored) -> out [rows, in] bf16 bits,
// each weight decoded as the CPU reference decodes it and rounded to nearest even: bit for bit
// quant::dequantize_rows_to_bf16. Device pointers; out 16-byte aligned. Throws
// std::invalid_argument for another dtype or a partial block.
void dequantize_to_bf16(DType dtype, const void* blocks, std::int64_t rows, std::int64_t in, std::uint16_t* out,
                        cudaStream_t stream);

}  // namespace switchyard::cuda
