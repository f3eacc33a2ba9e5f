#pragma once
// What ggml's block-quantised weights mean: decoding a row of blocks to f32 (the scalar reference
// every kernel is checked against) and our own quantiser that writes them. The layouts are
// core/quant_blocks.h's, bit for bit as llama.cpp reads and writes them.
//
// Types: every block type of core/dtype.h (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k, the IQ
// types and mxfp4) and the plain f32, f16 and bf16; quantize_row writes all but the lattice IQ
// types (has_encoder). A row of `n` weights is n / block_elements consecutive blocks
// (dtype_info(dtype).block_bytes each); `n` must be a multiple of block_elements (32 or 256).
// Any other type, a negative `n` or a partial block throws std::invalid_argument naming the type,
// the length and what is wrong; no other input is checked (the bytes of a block are all valid).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace switchyard::quant {

// The most weights a GPU projection kept in blocks dequantizes to bf16 at once for a prefill
// product (cuda::linear): whole rows, at least one, up to this many (32 MiB of bf16). The memory
// estimate counts the same chunk.
constexpr std::int64_t kDequantizeChunkWeights = std::int64_t{16} << 20;
inline std::int64_t dequantize_chunk_rows(std::int64_t rows, std::int64_t in) {
  const std::int64_t fit = in > 0 ? kDequantizeChunkWeights / in : rows;
  return std::max<std::int64_t>(1, std::min(rows, fit));
}

// Decodes `n` weights of one row stored as `dtype` into `out` [n] f32. Exactly the format's
// arithmetic in ggml's order, in float (d * q, (d * scale) * q - dmin * min, ...), so that a
// kernel may compare with it to the last bit where it keeps that order.
void dequantize_row(DType dtype, const void* blocks, float* out, std::int64_t n);

// Encodes `in` [n] f32 as `dtype` into `blocks` (storage_bytes(dtype, n) bytes). Deterministic:
// the same input gives the same bytes on every machine. For each block it chooses the scales
// (and minimums) by a small search that minimises the squared error, weighted by `importance`
// [n] (optional, finite and >= 0 per weight; nullptr, or a block whose importance sums to zero,
// weighs every weight the same; Q8_0 does not use it). The method and its error per type are
// written down in core/quant_quantize.cpp. For the block types a non-finite weight or a bad
// importance throws std::invalid_argument naming its index (a NaN would silently poison a whole
// block). f16 and bf16 round each weight to nearest even (NaN stays NaN, overflow goes to inf);
// f32 copies.
void quantize_row(DType dtype, const float* in, void* blocks, std::int64_t n,
                  const float* importance = nullptr);

// The same over a [rows, n] row-major matrix: row r's blocks start at r * storage_bytes(dtype, n).
// Rows run in parallel (OpenMP) when the matrix is big enough to pay for the threads.
void quantize_rows(DType dtype, const float* in, void* out, std::int64_t rows, std::int64_t n);
void dequantize_rows(DType dtype, const void* in, float* out, std::int64_t rows, std::int64_t n);
// The same rounded to bf16 (nearest even, NaN kept) into `out` [rows, n] bf16 bits, a row at a
// time through a per-thread f32 row: bit for bit the bf16 rounding of dequantize_rows' output,
// without holding the whole matrix in f32.
void dequantize_rows_to_bf16(DType dtype, const void* in, std::uint16_t* out, std::int64_t rows, std::int64_t n);

// Throws std::invalid_argument unless the functions above take rows of `n` weights of `dtype`;
// `operation` ("quantize", "dequantize") starts the message.
void check_row_length(DType dtype, std::int64_t n, const char* operation);
// Whether the functions above take `dtype` at all.
bool has_row_codec(DType dtype);
// Whether quantize_row writes `dtype`: every has_row_codec type but the IQ1, IQ2 and IQ3 ones,
// whose lattice search llama.cpp's quantizer does (they are read, never written, here).
bool has_encoder(DType dtype);

// Byte offsets of the half-float scales in one block of `dtype` (core/quant_blocks.h): d, and the
// minimum (m or dmin) where the type has one; empty for a plain type, for IQ1_M (whose d is spread
// over four words) and for MXFP4 (an exponent byte). For writers of random blocks whose scales
// must be finite (benchmarks, tests): set_block_scales writes them all.
std::vector<int> half_scale_offsets(DType dtype);
// Sets the scales of one block of `dtype` (a block type; any other is left alone) so that random
// bytes decode to finite weights: d = `scale` (as a half float; MXFP4's power of two nearest it;
// IQ1_M's d spread over its scale words, its sub-block scales kept) and the minimum = `min` where
// the type has one.
void set_block_scales(DType dtype, void* block, float scale, float min);

}  // namespace switchyard::quant
