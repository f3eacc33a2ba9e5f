#pragma once
// For the quantised kernels' tests: random blocks of every block type, and a decoder of our own,
// element by element in double precision, written from core/quant_blocks.h's layout comments
// independently of the kernels' unpacking (it indexes each weight's bits where the kernels shift
// whole registers). The IQ types and MXFP4 decode by core's reference decoder instead
// (quant::dequantize_row, bit-equal to gguf-py's), whose float arithmetic is exact for them: every
// value is a scale of at most 17 significant bits times a codebook or grid value of at most 7.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/quant_blocks.h"
#include "core/quant_formats.h"
#include "operators/cpu/kernels/half.h"

namespace switchyard::testing {

inline constexpr DType kBlockTypes[] = {DType::q4_0,   DType::q4_1,    DType::q5_0,  DType::q5_1,  DType::q8_0,
                                        DType::q2_k,   DType::q3_k,    DType::q4_k,  DType::q5_k,  DType::q6_k,
                                        DType::iq2_xxs, DType::iq2_xs, DType::iq2_s, DType::iq3_xxs, DType::iq3_s,
                                        DType::iq1_s,  DType::iq1_m,   DType::iq4_nl, DType::iq4_xs, DType::mxfp4};

// Whether decode_rows takes `dtype` from core's reference decoder (the IQ types and MXFP4).
inline bool decoded_by_core(DType dtype) { return dtype >= DType::iq2_xxs && is_block_quantized(dtype); }

// One decoded weight: its value, and the sum of the magnitudes of the terms it is made of (the
// scale a kernel's float rounding is proportional to: w = d * scale * q - dmin * min can cancel).
struct DecodedWeight {
  double value, magnitude;
};

// Random bytes everywhere, then every half-float scale set to a random finite value of about 2^-6
// (either sign), so that weights are of order 1 and no scale is inf or NaN; IQ1_M's d, spread over
// its scale words, and MXFP4's exponent by quant::set_block_scales (positive, MXFP4's a power of
// two). The scale offsets are
// looked up once, outside the loop over blocks: GCC 13.3 at -O3 dropped the Q6_K case of a switch
// on the dtype inside that loop (it unswitched the loop into a jump table that missed it), leaving
// Q6_K's d random. The final pass makes any such slip a test failure that names this helper.
inline std::vector<std::uint8_t> random_blocks(DType dtype, std::int64_t weights, std::mt19937& random) {
  const DTypeInfo& info = dtype_info(dtype);
  const std::int64_t blocks = weights / info.block_elements;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(blocks * info.block_bytes));
  for (auto& b : bytes) b = static_cast<std::uint8_t>(random());
  std::uniform_real_distribution<float> magnitude(0.25f, 1.0f);
  const std::vector<int> offsets = quant::half_scale_offsets(dtype);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (const int offset : offsets) {
      const float sign = random() & 1 ? 1.0f : -1.0f;  // drawn before the magnitude, on every compiler
      const std::uint16_t bits = cpu::f32_to_f16(sign * magnitude(random) / 64.0f);
      std::memcpy(bytes.data() + b * info.block_bytes + offset, &bits, 2);
    }
  if (dtype == DType::iq1_m || dtype == DType::mxfp4)
    for (std::int64_t b = 0; b < blocks; ++b)
      quant::set_block_scales(dtype, bytes.data() + b * info.block_bytes, magnitude(random) / 64.0f, 0.0f);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (const int offset : offsets) {
      std::uint16_t bits;
      std::memcpy(&bits, bytes.data() + b * info.block_bytes + offset, 2);
      if ((bits & 0x7c00) == 0x7c00)
        throw std::logic_error("random_blocks: a scale of block " + std::to_string(b) + " is inf or NaN");
    }
  return bytes;
}

namespace quant_test_detail {
inline double half_at(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return cpu::f16_to_f32(bits);
}
// Q4_K's and Q5_K's six-bit scale (min = false) or minimum of sub-block j, bit by bit.
inline int six_bit(const std::uint8_t* scales, int j, bool min) {
  if (j < 4) return scales[j + (min ? 4 : 0)] & 63;
  const int low = min ? scales[j + 4] >> 4 : scales[j + 4] & 15;
  const int high = scales[j - (min ? 0 : 4)] >> 6;
  return low | high << 4;
}
}  // namespace quant_test_detail

// Weight i (0 <= i < block_elements) of the block at `block`.
inline DecodedWeight decode_weight(DType dtype, const std::uint8_t* block, int i) {
  using namespace quant_test_detail;
  switch (dtype) {
    case DType::q4_0: case DType::q4_1: case DType::q5_0: case DType::q5_1: {
      const bool has_min = dtype == DType::q4_1 || dtype == DType::q5_1, five = dtype == DType::q5_0 || dtype == DType::q5_1;
      const std::uint8_t* qs = block + (has_min ? 4 : 2) + (five ? 4 : 0);
      int q = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
      if (five) {
        const std::uint8_t* qh = block + (has_min ? 4 : 2);
        q |= ((qh[i / 8] >> (i % 8)) & 1) << 4;
      }
      const double d = half_at(block), m = has_min ? half_at(block + 2) : 0.0;
      const int offset = has_min ? 0 : (five ? 16 : 8);
      return {d * (q - offset) + m, std::fabs(d * q) + std::fabs(d * offset) + std::fabs(m)};
    }
    case DType::q8_0: {
      const double v = half_at(block) * static_cast<std::int8_t>(block[2 + i]);
      return {v, std::fabs(v)};
    }
    case DType::q2_k: {
      const std::uint8_t* qs = block + 16;
      const int q = (qs[32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32))) & 3;
      const int scale = block[i / 16] & 15, min = block[i / 16] >> 4;
      const double a = half_at(block + 80) * scale * q, b = half_at(block + 82) * min;
      return {a - b, std::fabs(a) + std::fabs(b)};
    }
    case DType::q3_k: {
      const std::uint8_t *hmask = block, *qs = block + 32, *scales = block + 96;
      const int n = i / 128, s = i % 128 / 32, l = i % 32;
      const int high = (hmask[l] >> (4 * n + s)) & 1;
      const int q = ((qs[32 * n + l] >> (2 * s)) & 3) - (high ? 0 : 4);
      // The 12 bytes as three little-endian words; scale g's byte of the four words they unpack to.
      std::uint32_t w[3];
      std::memcpy(w, scales, 12);
      const std::uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303;
      const std::uint32_t unpacked[4] = {(w[0] & low4) | ((w[2] & low2) << 4), (w[1] & low4) | (((w[2] >> 2) & low2) << 4),
                                         ((w[0] >> 4) & low4) | (((w[2] >> 4) & low2) << 4),
                                         ((w[1] >> 4) & low4) | (((w[2] >> 6) & low2) << 4)};
      const int g = i / 16;
      const int scale = static_cast<int>((unpacked[g / 4] >> (8 * (g % 4))) & 0xff) - 32;
      const double v = half_at(block + 108) * scale * q;
      return {v, std::fabs(half_at(block + 108) * scale) * (q + 8.0)};  // as (q + 4) - 4
    }
    case DType::q4_k: case DType::q5_k: {
      const bool five = dtype == DType::q5_k;
      const std::uint8_t *scales = block + 4, *qh = block + 16, *qs = block + 16 + (five ? 32 : 0);
      const int j = i / 32, l = i % 32;
      int q = j % 2 == 0 ? qs[32 * (j / 2) + l] & 15 : qs[32 * (j / 2) + l] >> 4;
      if (five) q |= ((qh[l] >> j) & 1) << 4;
      const double a = half_at(block) * six_bit(scales, j, false) * q, b = half_at(block + 2) * six_bit(scales, j, true);
      return {a - b, std::fabs(a) + std::fabs(b)};
    }
    case DType::q6_k: {
      const std::uint8_t *ql = block, *qh = block + 128;
      const auto* scales = reinterpret_cast<const std::int8_t*>(block + 192);
      const int n = i / 128, k = i % 128 / 32, l = i % 32;
      const std::uint8_t low_byte = ql[64 * n + l + 32 * (k % 2)];
      const int q = (k < 2 ? low_byte & 15 : low_byte >> 4) | (((qh[32 * n + l] >> (2 * k)) & 3) << 4);
      const double ds = half_at(block + 208) * scales[i / 16];
      return {ds * (q - 32), std::fabs(ds) * (q + 32.0)};
    }
    default: return {0.0, 0.0};
  }
}

// The rows [rows, in] of `dtype` at `data`, decoded.
inline std::vector<DecodedWeight> decode_rows(DType dtype, const std::uint8_t* data, std::int64_t rows, std::int64_t in) {
  const DTypeInfo& info = dtype_info(dtype);
  std::vector<DecodedWeight> out(static_cast<std::size_t>(rows * in));
  if (decoded_by_core(dtype)) {  // one product a weight: its magnitude is its value's
    std::vector<float> row(static_cast<std::size_t>(in));
    const auto row_bytes = static_cast<std::int64_t>(storage_bytes(dtype, static_cast<std::uint64_t>(in)));
    for (std::int64_t r = 0; r < rows; ++r) {
      quant::dequantize_row(dtype, data + r * row_bytes, row.data(), in);
      for (std::int64_t k = 0; k < in; ++k)
        out[static_cast<std::size_t>(r * in + k)] = {row[static_cast<std::size_t>(k)], std::fabs(double{row[static_cast<std::size_t>(k)]})};
    }
    return out;
  }
  for (std::int64_t e = 0; e < rows * in; ++e)
    out[static_cast<std::size_t>(e)] = decode_weight(dtype, data + e / info.block_elements * info.block_bytes,
                                                     static_cast<int>(e % info.block_elements));
  return out;
}

}  // namespace switchyard::testing
