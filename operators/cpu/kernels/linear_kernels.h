#pragma once
// Internal to linear(): the per-instruction-set halves, one translation unit each (compiled with
// that set's flags), and what linear.cpp hands them. Plain data only: a shared inline function
// here could be emitted by an AVX-512 unit and picked by the linker for every caller.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "operators/cpu/kernels/linear.h"

namespace switchyard::cpu::detail {

// quantized: a block type of core/quant_blocks.h, LinearProblem::quant_dtype says which (quant_dot.h).
enum class LinearWeight { f32, bf16, f16, quantized };

// Raw 16-bit weights, typed so that templates can tell bf16 from f16.
struct Bf16Bits {
  std::uint16_t bits;
};
struct F16Bits {
  std::uint16_t bits;
};

struct LinearProblem {
  const float* x;  // [tokens, in] f32
  std::int64_t tokens;
  std::int64_t in;
  const void* weight;  // [out, in] in weight_type
  LinearWeight weight_type;
  std::int64_t out;
  float* y;  // [tokens, out] f32
  // With Isa::amx where cpu::linear_rounds_x: x rounded to bf16 in AMX's tile layout, zero-padded:
  // [ceil(tokens / 16)][ceil(in / 32)][16 pairs of inputs][16 tokens], a pair of bf16 values (the
  // lower input in the low half) a word. Else null.
  const std::uint32_t* x_tiles = nullptr;
  // bf16 weights of a tiles path's panel in chunk-major order when non-zero: weight (row, k) at
  // element ((k / 32) * weight_chunk_rows + row) * 32 + k % 32, so that a tile's 16 rows of one
  // 32-input chunk are 1 KiB in a row (row < weight_chunk_rows; in a multiple of 32). 0: row-major.
  std::int64_t weight_chunk_rows = 0;
  // With weight_type quantized: the block dtype, and for decode x quantised to activation blocks
  // (quant_dot.h), token t at x_quantized + t * x_quantized_stride bytes; null in prefill, which
  // reads x as f32.
  DType quant_dtype = DType::f32;
  const std::uint8_t* x_quantized = nullptr;
  std::int64_t x_quantized_stride = 0;
};

// 64-byte-aligned scratch (x's AMX tiles, x quantised to activation blocks): std::aligned_alloc'd
// (the size rounded up to 64 bytes), std::free'd; a failed allocation throws std::bad_alloc. The
// functions are defined in linear.cpp, compiled for every CPU.
struct FreeAligned {
  void operator()(void* p) const noexcept;
};
using AlignedWords = std::unique_ptr<std::uint32_t[], FreeAligned>;
using AlignedBytes = std::unique_ptr<std::uint8_t[], FreeAligned>;
AlignedWords aligned_words(std::size_t bytes);
AlignedBytes aligned_bytes(std::size_t bytes);
// Bytes of LinearProblem::x_tiles for x [tokens, in]: whole 1 KiB tiles.
std::size_t x_tiles_bytes(std::int64_t tokens, std::int64_t in);

// Token tile `tile` (tokens [16 tile, 16 tile + 16) of `tokens`) of LinearProblem::x_tiles from x
// [tokens, in]: each value rounded to bf16 (cpu::f32_to_bf16) at its place, zeros where no token or
// input is. The AVX-512 writer (x86, called only after isa_supported(Isa::avx512)) writes the same
// words: it converts a token's 32 inputs of a chunk at once and transposes 16 tokens' words.
void write_x_tile_scalar(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t tile,
                         std::uint32_t* tiles);
void write_x_tile_avx512(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t tile,
                         std::uint32_t* tiles);
// Chunks [chunk_begin, chunk_end) of that token tile alone (inputs [32 chunk_begin, 32 chunk_end),
// zeros past `in`), the other chunks' words untouched; token t's inputs from 32 chunk_begin on at
// x + t * x_stride (x holds only those columns: a block's slice of a wider x).
void write_x_tile_chunks_scalar(const float* x, std::int64_t x_stride, std::int64_t tokens, std::int64_t in,
                                std::int64_t tile, std::int64_t chunk_begin, std::int64_t chunk_end,
                                std::uint32_t* tiles);
void write_x_tile_chunks_avx512(const float* x, std::int64_t x_stride, std::int64_t tokens, std::int64_t in,
                                std::int64_t tile, std::int64_t chunk_begin, std::int64_t chunk_end,
                                std::uint32_t* tiles);

// A C tile c [16 rows][16 tokens] f32 (64-byte aligned) into y [token][row]: y[t * y_stride + r] =
// c[16 r + t] for r < rows, t < tokens (each at most 16); nothing else of y is written. AVX-512 (x86,
// called only after isa_supported(Isa::avx512)): a transpose in registers, a token's rows stored at
// once.
void store_c_tile_avx512(const float* c, std::int64_t rows, std::int64_t tokens, float* y, std::int64_t y_stride);

// One thread's rectangle of y: rows [row_begin, row_end) of tokens [token_begin, token_end).
struct LinearBlock {
  std::int64_t row_begin, row_end;
  std::int64_t token_begin, token_end;
};

void linear_block_scalar(const LinearProblem& problem, const LinearBlock& block);
void linear_block_avx2(const LinearProblem& problem, const LinearBlock& block);
void linear_block_avx512(const LinearProblem& problem, const LinearBlock& block);
void linear_block_amx(const LinearProblem& problem, const LinearBlock& block);
// With x_tiles: AMX's tiles product computed by AVX512-BF16's vdpbf16ps (linear_avx512_bf16.cpp),
// else linear_block_avx512.
void linear_block_tiles_avx512_bf16(const LinearProblem& problem, const LinearBlock& block);

// One ISA's block functions: for plain weights and for block-quantised ones (quant_dot.h).
using BlockFn = void (*)(const LinearProblem&, const LinearBlock&);
struct BlockFunctions {
  BlockFn plain, quantized;
};
// linear_batch and gated_batch with `blocks` in place of an ISA's own, each call rounding x where
// `rounds_like` would (cpu::linear_rounds_x): tests run a plain C++ emulation of a variant this CPU
// lacks through the batches' own bookkeeping.
void linear_batch_with(Isa rounds_like, BlockFunctions blocks, std::span<const LinearCall> calls);
void gated_batch_with(Isa rounds_like, BlockFunctions blocks, std::span<const GatedCall> calls);

}  // namespace switchyard::cpu::detail
