#pragma once
// AMX's tiles path in plain C++, for tests on any CPU: the arithmetic of linear_amx.cpp's block
// (x read from its bf16 tiles, bf16 weights, f32 sums) and of the block types' tiles path (bf16
// panels of the dequantised rows), run through linear_batch's and gated_batch's own bookkeeping
// (detail::linear_batch_with). What only an AMX machine can test is the tile instructions.
// Compiled into the test binary only; the product carries no emulator.
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "operators/cpu/kernels/linear.h"
#include "operators/cpu/kernels/linear_kernels.h"

namespace switchyard::testing {

// The AMX block's product with x from LinearProblem::x_tiles (bf16 weights, row-major or
// chunk-major); without tiles, the scalar variant's block (as the AMX block falls back).
void linear_block_tiles_emulated(const cpu::detail::LinearProblem& problem, const cpu::detail::LinearBlock& block);
// Block-type weights: the tiles path on bf16 panels that dequantize_rows_bf16_emulated writes;
// without tiles, the scalar variant's integer products.
void quant_linear_block_tiles_emulated(const cpu::detail::LinearProblem& problem,
                                       const cpu::detail::LinearBlock& block);
// `count` rows of `in` weights of `dtype` (a block type) as bf16, chunk-major with `chunk_rows`
// (>= count) rows a chunk: dequantize_rows_scalar's values rounded by cpu::f32_to_bf16.
void dequantize_rows_bf16_emulated(DType dtype, const void* rows, std::int64_t in, std::int64_t count,
                                   std::uint16_t* out, std::int64_t chunk_rows);

// cpu::linear_batch and cpu::gated_batch as an AMX machine runs them, with the blocks above.
void linear_batch_emulating_amx(std::span<const cpu::LinearCall> calls);
void gated_batch_emulating_amx(std::span<const cpu::GatedCall> calls);

}  // namespace switchyard::testing
