#pragma once
// routed_experts.h's decode path for an expert stack kept in ggml blocks (KExpertsMarlin's
// storage: the file's bytes, no bf16 copy), for routed_experts.cu. The same two kernels as for
// floats (gate and up with SwiGLU, then down with the weighted sum over the slots), a warp per
// weight row, each lane decoding pieces of 8 weights in registers (quant_rows.cuh) and
// accumulating their products with f32 x (or h) in f32, as quant_gemv does.
//
// Shapes (routed_experts_check_blocks): gate and up of one block type, down of any of the ten;
// hidden a multiple of gate's block (32 or 256 weights), inter of down's; x 16-byte aligned.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "operators/cuda/kernels/routed_experts.h"

namespace switchyard::cuda {

// Bytes of one expert's matrix of `rows` rows of `in` weights of `dtype` (blocks or floats).
std::int64_t expert_matrix_bytes(DType dtype, std::int64_t rows, std::int64_t in);

// An empty string when the decode kernels take a stack of blocks, else what they refuse.
std::string routed_experts_check_blocks(const ExpertStack& stack);

// The decode path's two kernels on blocks, queued on `stream`; arguments as routed_experts', h:
// [tokens * top_k, inter] f32 in the workspace.
void routed_experts_decode_blocks(cudaStream_t stream, const ExpertStack& stack, const float* x, std::int64_t tokens,
                                  const std::int32_t* ids, const float* weights, int top_k, float* out, float* h);

}  // namespace switchyard::cuda
