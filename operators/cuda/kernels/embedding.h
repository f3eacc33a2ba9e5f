#pragma once
// Token embedding on the GPU: rows of the table, widened exactly to f32 or decoded from ggml's
// blocks, as CausalLM::prepare does on the CPU.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace switchyard::cuda {

// Device pointers. ids: [tokens] int32; table: [vocab, hidden] f32, bf16 or f16, or rows of one
// block type (hidden a multiple of its block, the table aligned as quant_rows.cuh says), each row
// decoded bit for bit as quant::dequantize_row; out: [tokens, hidden] f32. Ids are checked on the
// device, where nothing can be thrown: a row whose id is outside [0, vocab) is filled with NaN, so
// a bad id shows in the logits instead of reading out of bounds. Callers check ids on the host
// where they have them. Throws std::invalid_argument for another dtype, or blocks that do not fit.
void embedding(const std::int32_t* ids, std::int64_t tokens, const void* table, DType table_dtype, std::int64_t vocab,
               std::int64_t hidden, float* out, cudaStream_t stream);

}  // namespace switchyard::cuda
