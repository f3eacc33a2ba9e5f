#pragma once
// For the GPU tests that run every block type (operators/cuda/kernels/quant_rows.cuh decodes them
// all): random blocks and their decoded weights, per type. The ten Q and K types come from
// tests/operators/cpu/kernels/quant_test_blocks.h (random blocks, and a decoder of its own); the
// IQ types and MXFP4 are written here: random bytes with finite scales, decoded by core's scalar
// reference (quant::dequantize_rows), which the GPU's decoders match bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/quant_formats.h"
#include "tests/operators/cpu/kernels/quant_test_blocks.h"

namespace switchyard::testing {

inline constexpr DType kCodebookTypes[] = {DType::iq2_xxs, DType::iq2_xs, DType::iq2_s, DType::iq3_xxs, DType::iq3_s,
                                           DType::iq1_s,   DType::iq1_m,  DType::iq4_nl, DType::iq4_xs, DType::mxfp4};

// Whether quant_test_blocks.h writes and decodes `dtype`'s blocks (else the helpers below do).
inline bool in_quant_test_blocks(DType dtype) {
  return std::find(std::begin(kBlockTypes), std::end(kBlockTypes), dtype) != std::end(kBlockTypes);
}

// kBlockTypes, then every type of kCodebookTypes it lacks.
inline std::vector<DType> all_block_types() {
  std::vector<DType> types(std::begin(kBlockTypes), std::end(kBlockTypes));
  for (const DType dtype : kCodebookTypes)
    if (!in_quant_test_blocks(dtype)) types.push_back(dtype);
  return types;
}

// Random bytes, then each block's d (quant::set_block_scales) a random value of either sign and a
// magnitude in [2^-8, 2^-6]: finite, never zero, weights of order 1 (an IQ2 weight is at most
// 167 d). MXFP4's exponent becomes the power of two nearest d, or 2^0 for a negative d.
inline std::vector<std::uint8_t> random_codebook_blocks(DType dtype, std::int64_t weights, std::mt19937& random) {
  const DTypeInfo& info = dtype_info(dtype);
  const std::int64_t blocks = weights / info.block_elements;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(blocks * info.block_bytes));
  for (auto& b : bytes) b = static_cast<std::uint8_t>(random());
  std::uniform_real_distribution<float> exponent(-8.0f, -6.0f);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float sign = random() & 1 ? 1.0f : -1.0f;  // drawn before the magnitude, on every compiler
    quant::set_block_scales(dtype, bytes.data() + b * info.block_bytes, sign * std::exp2(exponent(random)), 0.0f);
  }
  return bytes;
}

// Random blocks of any block type.
inline std::vector<std::uint8_t> random_test_blocks(DType dtype, std::int64_t weights, std::mt19937& random) {
  return in_quant_test_blocks(dtype) ? random_blocks(dtype, weights, random) : random_codebook_blocks(dtype, weights, random);
}

// The weights of [rows, in] blocks of any block type. For the IQ types and MXFP4 a weight is one
// product of the rounded sub-block scale and a grid or codebook value, so its magnitude (the scale
// of its rounding) is its own size.
inline std::vector<DecodedWeight> decode_test_rows(DType dtype, const std::uint8_t* data, std::int64_t rows,
                                                   std::int64_t in) {
  if (in_quant_test_blocks(dtype)) return decode_rows(dtype, data, rows, in);
  std::vector<float> values(static_cast<std::size_t>(rows * in));
  quant::dequantize_rows(dtype, data, values.data(), rows, in);
  std::vector<DecodedWeight> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = {values[i], std::fabs(static_cast<double>(values[i]))};
  return out;
}

}  // namespace switchyard::testing
