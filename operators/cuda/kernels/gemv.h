#pragma once
// Matrix-vector products for decode (a few tokens), where a GEMM library's tiles waste the
// bandwidth that bounds the step: one warp per output row streams the row once with 16-byte
// loads, widens bf16 exactly, multiplies by f32 x and accumulates in f32, for every token at once.
// Unlike cuda::linear's cuBLAS path, x is not rounded to bf16: only f32 accumulation errs.
//
// Rows may come in groups that each read their own slice of the weight and of x (the heads of
// MLA's value projection): row r belongs to group g = r / rows_per_group, reads weight row
// weight + g * weight_group_stride + weight_row_offset + (r % rows_per_group) * in, x at
// x + t * x_token_stride + g * x_group_stride, and writes y[t * y_token_stride + r].
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace switchyard::cuda {

constexpr std::int64_t kGemvMaxTokens = 8;

struct GemvShape {
  std::int64_t tokens = 1, in = 0, rows = 0;
  std::int64_t rows_per_group = 0;       // 0: one group of all rows
  std::int64_t weight_group_stride = 0;  // elements
  std::int64_t weight_row_offset = 0;    // elements
  std::int64_t x_group_stride = 0, x_token_stride = 0;  // floats; x_token_stride 0: in
  std::int64_t y_token_stride = 0;                      // floats; 0: rows
};

// Whether gemv takes these: tokens in [1, kGemvMaxTokens], f32 or bf16 weights, `in` a multiple
// of 8, and every pointer and stride keeping 16-byte alignment; or weights kept as ggml blocks
// (quant_gemv.h: whole blocks, offsets in weights as for the others).
bool gemv_supports(const GemvShape& shape, DType weight_dtype, const void* weight, const float* x);

// Device pointers, queued on `stream`. Throws std::invalid_argument when !gemv_supports.
void gemv(const GemvShape& shape, const void* weight, DType weight_dtype, const float* x, float* y,
          cudaStream_t stream);

// SwiGLU's first half for decode in one launch: h[t, j] = silu(gate_j . x_t) * (up_j . x_t) for the
// rows j of gate and up ([rows, in] each, same dtype); x: [tokens, in]; h: [tokens, rows]. The
// products as gemv, silu as cuda::silu_and_mul. Same conditions as gemv_supports (one group), block
// types included.
bool gemv_swiglu_supports(std::int64_t tokens, std::int64_t in, DType weight_dtype, const void* gate, const void* up,
                          const float* x);
void gemv_swiglu(std::int64_t tokens, std::int64_t in, std::int64_t rows, const void* gate, const void* up,
                 DType weight_dtype, const float* x, float* h, cudaStream_t stream);

}  // namespace switchyard::cuda
