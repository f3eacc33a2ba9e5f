#pragma once
// Internal to linear(): products of block-quantised weights (core/quant_blocks.h) with activations.
//
// Integer path (always for the 256-weight types: the K types, the IQ1/IQ2/IQ3 types and IQ4_XS;
// below kQuantPrefillTokens tokens for the 32-weight ones): each token's x is quantised once per
// call to signed bytes with a float scale per block (ActivationBlock32 for the 32-weight types,
// BlockQ8_K for the 256-weight ones), and every weight row is multiplied in integers, block by
// block: a block's weights are unpacked once per group of tokens (4 to 16 by ISA and type) and
// meet each token of the group while in registers or L1, so in decode the weights are read from
// memory once per call. The per-ISA halves compute the same integer sums exactly and differ only
// in the order they add the float terms.
//
// Panel path (the 32-weight types, Q4_0 ... Q8_0, IQ4_NL and MXFP4, from kQuantPrefillTokens
// tokens): up to 64 weight rows at a time are dequantised to f32 in a thread-local panel and the
// f32 block kernel of the same ISA multiplies them by every token of the block: the weights are
// unpacked once per call, x keeps its f32 values.
//
// Tiles path (Isa::amx and Isa::avx512bf16, kQuantPrefillTokens tokens or more:
// cpu::linear_rounds_x): 32 weight rows at a time are dequantised and rounded to bf16 in a
// thread-local panel, which the AMX block (or AVX512-BF16's dot products) multiplies by x's bf16
// tiles (LinearProblem::x_tiles); x is neither quantised nor read as f32.
//
// Every row is `in / block_elements` consecutive blocks; linear.cpp checks that `in` is a multiple
// of the block before any of this runs.
#include <cstdint>

#include "core/dtype.h"
#include "core/quant_blocks.h"
#include "operators/cpu/kernels/isa.h"  // has_avx512_vnni, has_avx512_bf16
#include "operators/cpu/kernels/linear_kernels.h"

namespace switchyard::cpu::detail {

// 32 inputs of a token for the 32-weight types: x[i] ~= d * qs[i], qs in [-127, 127];
// sum = sum of qs (for the weights' offset), d_sum = d * sum (for Q4_1's and Q5_1's minimum).
struct ActivationBlock32 {
  float d;
  float d_sum;
  std::int32_t sum;
  std::int8_t qs[quant::kBlock];
};

// Whether `weight` (a block type) takes the K types' activations (BlockQ8_K): every type of
// 256-weight blocks (the K types, the IQ1, IQ2 and IQ3 types, IQ4_XS); the 32-weight ones (Q4_0 ...
// Q8_0, IQ4_NL, MXFP4) take ActivationBlock32.
inline bool takes_q8_k(DType weight) {
  return is_block_quantized(weight) && dtype_info(weight).block_elements == quant::kSuperBlock;
}
// Bytes of one token's quantised activations for `in` inputs against weights of `weight`.
std::int64_t activation_bytes(DType weight, std::int64_t in);
// Tokens [token_begin, token_end) of x [tokens, in] as activations for `weight`, token t at
// out + t * activation_bytes(weight, in); out 64-byte aligned. Round to nearest; d = max |x| / 127 per block (0 for an
// all-zero block). The same code on every ISA, so every variant multiplies the same bytes.
void quantize_activations(DType weight, const float* x, std::int64_t token_begin, std::int64_t token_end,
                          std::int64_t in, std::uint8_t* out);
// One token's blocks, as quantize_activations writes them: `block` (32 or 256) inputs a block, in a
// multiple of it; each block's d and qs written `block_stride` bytes after the last block's, and
// sums16[i] = the sum of qs[16 i .. 16 i + 15] (in / 16 of them). The AVX2 one (x86, called only
// after isa_supported(Isa::avx2)) writes the same bytes: the same IEEE operations, lane by lane.
void quantize_blocks_scalar(const float* x, std::int64_t in, int block, std::int64_t block_stride, float* d,
                            std::int8_t* qs, std::int32_t* sums16);
void quantize_blocks_avx2(const float* x, std::int64_t in, int block, std::int64_t block_stride, float* d,
                          std::int8_t* qs, std::int32_t* sums16);

// `count` rows of `in` weights of `dtype` to f32, out [count, in]: the plain decoder the scalar
// variant and tests trust, w = d * scale * q - dmin * min (per type as core/quant_blocks.h says).
void dequantize_rows_scalar(DType dtype, const void* rows, std::int64_t in, std::int64_t count, float* out);
void dequantize_rows_avx2(DType dtype, const void* rows, std::int64_t in, std::int64_t count, float* out);

// linear()'s block for quantised weights (LinearProblem::weight_type == quantized), per ISA: the
// integer path when x_quantized is set, else the panel path. The AVX-512 one needs
// AVX512-VNNI (has_avx512_vnni()); linear.cpp runs the AVX2 one on AVX-512 CPUs without it.
void quant_linear_block_scalar(const LinearProblem& problem, const LinearBlock& block);
void quant_linear_block_avx2(const LinearProblem& problem, const LinearBlock& block);
void quant_linear_block_avx512(const LinearProblem& problem, const LinearBlock& block);

// The panel path, shared by every ISA: rows of the block 64 at a time dequantised by `dequantize`
// into a thread-local [64, in] f32 panel, multiplied by `f32_block` into a thread-local
// [tokens, 64] y, copied into y.
using DequantizeRowsFn = void (*)(DType, const void*, std::int64_t, std::int64_t, float*);
using F32BlockFn = void (*)(const LinearProblem&, const LinearBlock&);
void quant_prefill_block(const LinearProblem& problem, const LinearBlock& block, DequantizeRowsFn dequantize,
                         F32BlockFn f32_block);

// The tiles path: rows of the block 32 at a time dequantised by `dequantize_bf16` straight into a
// thread-local bf16 panel, chunk-major (LinearProblem::weight_chunk_rows = 32), multiplied by
// `tiles_block` (a bf16 block function that reads x_tiles) into a thread-local [tokens, 32] y,
// copied into y.
using DequantizeBf16Fn = void (*)(DType, const void*, std::int64_t, std::int64_t, std::uint16_t*, std::int64_t);
void quant_tiles_block_bf16(const LinearProblem& problem, const LinearBlock& block, DequantizeBf16Fn dequantize_bf16,
                            F32BlockFn tiles_block);
// `count` rows of `in` weights of `dtype` to bf16, chunk-major with chunk_rows (>= count) rows a
// chunk: weight (r, k) at out[((k / 32) * chunk_rows + r) * 32 + k % 32]; the rows past `count`
// untouched. AVX512-BF16 (only where has_avx512_bf16()): dequantize_rows_avx2's values, rounded to
// nearest even (cpu::f32_to_bf16's bits).
void dequantize_rows_bf16_avx512(DType dtype, const void* rows, std::int64_t in, std::int64_t count, std::uint16_t* out,
                                 std::int64_t chunk_rows);
// linear()'s block for quantised weights on AMX: the tiles path when x_tiles is set, else the
// AVX-512 VNNI variant.
void quant_linear_block_amx(const LinearProblem& problem, const LinearBlock& block);
// The same on AVX512-BF16 without AMX: its tiles path multiplies by vdpbf16ps.
void quant_linear_block_avx512_bf16(const LinearProblem& problem, const LinearBlock& block);

}  // namespace switchyard::cpu::detail
