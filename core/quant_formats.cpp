// Row-length checks and the matrix helpers over core/quant_dequantize.cpp's and
// core/quant_quantize.cpp's row functions.
#include "core/quant_formats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/half_float.h"
#include "core/quant_blocks.h"
#include "core/random_weights.h"

namespace switchyard::quant {

std::vector<int> half_scale_offsets(DType dtype) {
  auto at = [](std::size_t offset) { return static_cast<int>(offset); };
  switch (dtype) {
    case DType::q4_0: return {at(offsetof(BlockQ4_0, d))};
    case DType::q5_0: return {at(offsetof(BlockQ5_0, d))};
    case DType::q8_0: return {at(offsetof(BlockQ8_0, d))};
    case DType::q4_1: return {at(offsetof(BlockQ4_1, d)), at(offsetof(BlockQ4_1, m))};
    case DType::q5_1: return {at(offsetof(BlockQ5_1, d)), at(offsetof(BlockQ5_1, m))};
    case DType::q2_k: return {at(offsetof(BlockQ2_K, d)), at(offsetof(BlockQ2_K, dmin))};
    case DType::q3_k: return {at(offsetof(BlockQ3_K, d))};
    case DType::q4_k: return {at(offsetof(BlockQ4_K, d)), at(offsetof(BlockQ4_K, dmin))};
    case DType::q5_k: return {at(offsetof(BlockQ5_K, d)), at(offsetof(BlockQ5_K, dmin))};
    case DType::q6_k: return {at(offsetof(BlockQ6_K, d))};
    case DType::iq2_xxs: return {at(offsetof(BlockIQ2_XXS, d))};
    case DType::iq2_xs: return {at(offsetof(BlockIQ2_XS, d))};
    case DType::iq2_s: return {at(offsetof(BlockIQ2_S, d))};
    case DType::iq3_xxs: return {at(offsetof(BlockIQ3_XXS, d))};
    case DType::iq3_s: return {at(offsetof(BlockIQ3_S, d))};
    case DType::iq1_s: return {at(offsetof(BlockIQ1_S, d))};
    case DType::iq4_nl: return {at(offsetof(BlockIQ4_NL, d))};
    case DType::iq4_xs: return {at(offsetof(BlockIQ4_XS, d))};
    default: return {};
  }
}

void set_block_scales(DType dtype, void* block, float scale, float min) {
  auto* bytes = static_cast<std::uint8_t*>(block);
  if (dtype == DType::mxfp4) {
    const int e = scale > 0.0f ? std::clamp(static_cast<int>(std::lround(std::log2(scale))) + 127, 1, 254) : 127;
    bytes[offsetof(BlockMXFP4, e)] = static_cast<std::uint8_t>(e);
    return;
  }
  const std::uint16_t d = f32_to_f16(scale);
  if (dtype == DType::iq1_m) {  // d's four nibbles are the top nibbles of the four scale words
    std::uint16_t words[4];
    std::memcpy(words, bytes + offsetof(BlockIQ1_M, scales), sizeof words);
    for (int i = 0; i < 4; ++i)
      words[i] = static_cast<std::uint16_t>((words[i] & 0x0FFF) | ((d >> (4 * i)) & 0xF) << 12);
    std::memcpy(bytes + offsetof(BlockIQ1_M, scales), words, sizeof words);
    return;
  }
  const std::vector<int> offsets = half_scale_offsets(dtype);
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    const std::uint16_t bits = i == 0 ? d : f32_to_f16(min);
    std::memcpy(bytes + offsets[i], &bits, sizeof bits);
  }
}

bool has_row_codec(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || is_block_quantized(dtype);
}

void check_row_length(DType dtype, std::int64_t n, const char* operation) {
  if (!has_row_codec(dtype))
    throw std::invalid_argument(std::string(operation) + ": type " + dtype_name(dtype) +
                                " is not a weight format (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                                "q2_k, q3_k, q4_k, q5_k, q6_k, iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, "
                                "iq3_s, iq4_nl, iq4_xs, mxfp4)");
  const int block = dtype_info(dtype).block_elements;
  if (n < 0 || n % block != 0)
    throw std::invalid_argument(std::string(operation) + ": a row of " + std::to_string(n) + " weights as " +
                                dtype_name(dtype) + " is not a whole number of its " + std::to_string(block) +
                                "-weight blocks");
}

namespace {
// Rows are split over threads only when there is enough work to pay for waking them.
constexpr std::int64_t kParallelWeights = std::int64_t{1} << 16;

// Runs row_function(r) for every row, in parallel when big; an exception may not leave an OpenMP
// region, so the first one is kept and rethrown after the loop.
template <typename RowFunction>
void for_each_row(std::int64_t rows, std::int64_t n, RowFunction row_function) {
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 4) if (rows * n >= kParallelWeights && rows > 1)
  for (std::int64_t r = 0; r < rows; ++r) {
    try {
      row_function(r);
    } catch (...) {
#pragma omp critical(switchyard_quant_rows)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}
}  // namespace

void quantize_rows(DType dtype, const float* in, void* out, std::int64_t rows, std::int64_t n) {
  check_row_length(dtype, n, "quantize");
  if (rows < 0) throw std::invalid_argument("quantize: a negative row count " + std::to_string(rows));
  const auto row_bytes = static_cast<std::int64_t>(storage_bytes(dtype, static_cast<std::uint64_t>(n)));
  auto* bytes = static_cast<std::uint8_t*>(out);
  for_each_row(rows, n, [&](std::int64_t r) { quantize_row(dtype, in + r * n, bytes + r * row_bytes, n); });
}

void dequantize_rows(DType dtype, const void* in, float* out, std::int64_t rows, std::int64_t n) {
  check_row_length(dtype, n, "dequantize");
  if (rows < 0) throw std::invalid_argument("dequantize: a negative row count " + std::to_string(rows));
  const auto row_bytes = static_cast<std::int64_t>(storage_bytes(dtype, static_cast<std::uint64_t>(n)));
  const auto* bytes = static_cast<const std::uint8_t*>(in);
  for_each_row(rows, n, [&](std::int64_t r) { dequantize_row(dtype, bytes + r * row_bytes, out + r * n, n); });
}

void dequantize_rows_to_bf16(DType dtype, const void* in, std::uint16_t* out, std::int64_t rows, std::int64_t n) {
  check_row_length(dtype, n, "dequantize");
  if (rows < 0) throw std::invalid_argument("dequantize: a negative row count " + std::to_string(rows));
  const auto row_bytes = static_cast<std::int64_t>(storage_bytes(dtype, static_cast<std::uint64_t>(n)));
  const auto* bytes = static_cast<const std::uint8_t*>(in);
  for_each_row(rows, n, [&](std::int64_t r) {
    thread_local std::vector<float> row;
    row.resize(static_cast<std::size_t>(n));
    dequantize_row(dtype, bytes + r * row_bytes, row.data(), n);
    std::uint16_t* dst = out + r * n;
    for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_from_f32(row[static_cast<std::size_t>(i)]);
  });
}

}  // namespace switchyard::quant
