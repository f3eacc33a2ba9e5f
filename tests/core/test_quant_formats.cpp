// ggml's block formats (core/quant_formats.h). The decoder is checked on random blocks against a
// plain decoder written here in double precision from the bit description, weight by weight and
// byte offset by byte offset (no struct of core/quant_blocks.h is used): for each weight it finds
// its bits, so the index arithmetic is not the decoder's loops. The quantiser is checked by its
// error on random rows, by re-quantising decoded rows, and for its refusals.
#include <doctest/doctest.h>

#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/quant_formats.h"
#include "core/random_weights.h"
#include "core/text.h"
#include "tests/test_seed.h"
#include "tests/test_support.h"

using switchyard::testing::test_seed;

namespace sy = switchyard;
namespace quant = switchyard::quant;

namespace {

using Bytes = std::vector<std::uint8_t>;

// An IEEE half's value, from its fields.
double half_value(const std::uint8_t* at) {
  const unsigned bits = at[0] | at[1] << 8;
  const int exponent = (bits >> 10) & 31;
  const int mantissa = bits & 1023;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

// `count` bits of the byte string starting at bit `first` (bit 0 = the lowest bit of byte 0).
int bits_at(const std::uint8_t* bytes, int first, int count) {
  int value = 0;
  for (int k = 0; k < count; ++k) value |= ((bytes[(first + k) / 8] >> ((first + k) % 8)) & 1) << k;
  return value;
}

// One decoded weight: its value and the sum of the magnitudes of the terms that make it (the scale
// of the float rounding the decoder may add).
struct Expected {
  double value;
  double magnitude;
};

// Q2_K/Q3_K's 2-bit quant of weight w: bits 2p of byte 32 (w / 128) + w % 32, p = (w % 128) / 32.
int two_bit_quant(const std::uint8_t* qs, int w) {
  return bits_at(qs, 8 * (32 * (w / 128) + w % 32) + 2 * ((w % 128) / 32), 2);
}

// Q4_K/Q5_K's six-bit scale (or, with `minimum`, minimum) of sub-block s from the 12 packed bytes.
int k4_six_bit(const std::uint8_t* packed, int s, bool minimum) {
  if (s < 4) return bits_at(packed, 8 * (s + (minimum ? 4 : 0)), 6);
  const int low = bits_at(packed, 8 * (s + 4) + (minimum ? 4 : 0), 4);
  const int high = bits_at(packed, 8 * (minimum ? s : s - 4) + 6, 2);
  return low + 16 * high;
}

Expected reference_weight(sy::DType dtype, const std::uint8_t* b, int w) {
  switch (dtype) {
    case sy::DType::q4_0: {
      const int q = bits_at(b + 2, 8 * (w % 16) + 4 * (w / 16), 4);
      const double v = half_value(b) * (q - 8);
      return {v, std::fabs(v)};
    }
    case sy::DType::q4_1: {
      const int q = bits_at(b + 4, 8 * (w % 16) + 4 * (w / 16), 4);
      const double dq = half_value(b) * q, m = half_value(b + 2);
      return {dq + m, std::fabs(dq) + std::fabs(m)};
    }
    case sy::DType::q5_0: {
      const int q = bits_at(b + 6, 8 * (w % 16) + 4 * (w / 16), 4) + 16 * bits_at(b + 2, w, 1);
      const double v = half_value(b) * (q - 16);
      return {v, std::fabs(v)};
    }
    case sy::DType::q5_1: {
      const int q = bits_at(b + 8, 8 * (w % 16) + 4 * (w / 16), 4) + 16 * bits_at(b + 4, w, 1);
      const double dq = half_value(b) * q, m = half_value(b + 2);
      return {dq + m, std::fabs(dq) + std::fabs(m)};
    }
    case sy::DType::q8_0: {
      const double v = half_value(b) * static_cast<std::int8_t>(b[2 + w]);
      return {v, std::fabs(v)};
    }
    case sy::DType::q2_k: {  // scales @0, qs @16, d @80, dmin @82
      const int scale = bits_at(b, 8 * (w / 16), 4), minimum = bits_at(b, 8 * (w / 16) + 4, 4);
      const double dq = half_value(b + 80) * scale * two_bit_quant(b + 16, w);
      const double m = half_value(b + 82) * minimum;
      return {dq - m, std::fabs(dq) + std::fabs(m)};
    }
    case sy::DType::q3_k: {  // hmask @0, qs @32, scales @96, d @108
      const int s = w / 16;
      const int low = s < 8 ? bits_at(b + 96, 8 * s, 4) : bits_at(b + 96, 8 * (s - 8) + 4, 4);
      const int scale = low + 16 * bits_at(b + 96, 8 * (8 + s % 4) + 2 * (s / 4), 2) - 32;
      const int high = bits_at(b, 8 * (w % 32) + w / 32, 1);
      const double v = half_value(b + 108) * scale * (two_bit_quant(b + 32, w) - (high ? 0 : 4));
      return {v, std::fabs(v)};
    }
    case sy::DType::q4_k:
    case sy::DType::q5_k: {  // d @0, dmin @2, scales @4; Q4_K: qs @16; Q5_K: qh @16, qs @48
      const bool five = dtype == sy::DType::q5_k;
      const std::uint8_t* qs = b + (five ? 48 : 16);
      int q = bits_at(qs, 8 * (32 * (w / 64) + w % 32) + (w % 64 < 32 ? 0 : 4), 4);
      if (five) q += 16 * bits_at(b + 16, 8 * (w % 32) + w / 32, 1);
      const double dq = half_value(b) * k4_six_bit(b + 4, w / 32, false) * q;
      const double m = half_value(b + 2) * k4_six_bit(b + 4, w / 32, true);
      return {dq - m, std::fabs(dq) + std::fabs(m)};
    }
    case sy::DType::q6_k: {  // ql @0, qh @128, scales @192, d @208
      const int h = w / 128, p = (w % 128) / 32, l = w % 32;
      const int low = bits_at(b, 8 * (64 * h + 32 * (p % 2) + l) + (p < 2 ? 0 : 4), 4);
      const int high = bits_at(b + 128, 8 * (32 * h + l) + 2 * p, 2);
      const double v = half_value(b + 208) * static_cast<std::int8_t>(b[192 + w / 16]) * (low + 16 * high - 32);
      return {v, std::fabs(v)};
    }
    default: FAIL("no reference for " << sy::dtype_name(dtype)); return {0, 0};
  }
}

// Byte offsets of a block's half floats (d, and dmin or m), which random blocks must keep finite.
std::vector<int> half_offsets(sy::DType dtype) {
  switch (dtype) {
    case sy::DType::q4_0: case sy::DType::q5_0: case sy::DType::q8_0: return {0};
    case sy::DType::q4_1: case sy::DType::q5_1: case sy::DType::q4_k: case sy::DType::q5_k: return {0, 2};
    case sy::DType::q2_k: return {80, 82};
    case sy::DType::q3_k: return {108};
    case sy::DType::q6_k: return {208};
    default: return {};
  }
}

const sy::DType kBlockTypes[] = {sy::DType::q8_0, sy::DType::q4_0, sy::DType::q4_1, sy::DType::q5_0,
                                 sy::DType::q5_1, sy::DType::q2_k, sy::DType::q3_k, sy::DType::q4_k,
                                 sy::DType::q5_k, sy::DType::q6_k};

// Random blocks: random bytes, with every half-float scale a random finite half (any exponent
// but 31, so subnormals and both signs too).
Bytes random_blocks(sy::DType dtype, int blocks, std::mt19937& random) {
  const int block_bytes = sy::dtype_info(dtype).block_bytes;
  Bytes bytes(static_cast<std::size_t>(blocks) * block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(byte(random));
  std::uniform_int_distribution<int> exponent(0, 30);
  for (int i = 0; i < blocks; ++i)
    for (int offset : half_offsets(dtype)) {
      std::uint8_t* half = bytes.data() + static_cast<std::size_t>(i) * block_bytes + offset;
      half[1] = static_cast<std::uint8_t>((half[1] & 0x83) | exponent(random) << 2);
    }
  return bytes;
}

}  // namespace

TEST_CASE("quant formats: dequantize_row equals a plain double decoder of the bit layout") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  // Float rounding: each weight is at most three float operations on exact inputs (two products
  // and a sum), so |decoded - exact| <= 3 * 2^-24 * (sum of the terms' magnitudes) plus nothing
  // for subnormals (the smallest product, 2^-24 * 2^-24, is far above f32's subnormal range).
  const double kRelative = 3.0 * std::ldexp(1.0, -24);
  for (sy::DType dtype : kBlockTypes) {
    const std::string type = sy::dtype_name(dtype);
    CAPTURE(type);
    const int elements = sy::dtype_info(dtype).block_elements;
    const int block_bytes = sy::dtype_info(dtype).block_bytes;
    const int blocks = 64;
    const Bytes bytes = random_blocks(dtype, blocks, random);
    std::vector<float> decoded(static_cast<std::size_t>(blocks) * elements);
    quant::dequantize_row(dtype, bytes.data(), decoded.data(), static_cast<std::int64_t>(decoded.size()));
    int wrong = 0;
    for (int i = 0; i < blocks; ++i)
      for (int w = 0; w < elements; ++w) {
        const Expected expected = reference_weight(dtype, bytes.data() + i * block_bytes, w);
        const double got = decoded[static_cast<std::size_t>(i) * elements + w];
        if (std::fabs(got - expected.value) > kRelative * expected.magnitude && wrong++ < 5)
          FAIL_CHECK("block " << i << " weight " << w << ": " << got << " instead of " << expected.value);
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("quant formats: the half-float scales sit where ggml's block layouts put them") {
  // ggml-common.h's structs: d (and m or dmin) first in the 32-weight blocks and in Q4_K/Q5_K,
  // after the scales and quants in Q2_K (16 + 64 bytes), Q3_K (32 + 64 + 12) and Q6_K (128 + 64 + 16).
  CHECK(quant::half_scale_offsets(sy::DType::q4_0) == std::vector<int>{0});
  CHECK(quant::half_scale_offsets(sy::DType::q5_0) == std::vector<int>{0});
  CHECK(quant::half_scale_offsets(sy::DType::q8_0) == std::vector<int>{0});
  CHECK(quant::half_scale_offsets(sy::DType::q4_1) == std::vector<int>{0, 2});
  CHECK(quant::half_scale_offsets(sy::DType::q5_1) == std::vector<int>{0, 2});
  CHECK(quant::half_scale_offsets(sy::DType::q4_k) == std::vector<int>{0, 2});
  CHECK(quant::half_scale_offsets(sy::DType::q5_k) == std::vector<int>{0, 2});
  CHECK(quant::half_scale_offsets(sy::DType::q2_k) == std::vector<int>{80, 82});
  CHECK(quant::half_scale_offsets(sy::DType::q3_k) == std::vector<int>{108});
  CHECK(quant::half_scale_offsets(sy::DType::q6_k) == std::vector<int>{208});
  CHECK(quant::half_scale_offsets(sy::DType::bf16).empty());
}

TEST_CASE("quant formats: plain types decode exactly, rows decode block after block") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  const int n = 1000;
  std::vector<std::uint16_t> halves(n);
  for (auto& h : halves) {
    h = static_cast<std::uint16_t>(bits(random));
    if (((h >> 10) & 31) == 31) h &= 0xbfff;  // finite: the reference below has no inf or NaN
  }
  std::vector<float> out(n);
  quant::dequantize_row(sy::DType::f16, halves.data(), out.data(), n);
  for (int i = 0; i < n; ++i) {
    const std::uint8_t bytes[2] = {static_cast<std::uint8_t>(halves[i]), static_cast<std::uint8_t>(halves[i] >> 8)};
    REQUIRE(out[i] == half_value(bytes));
  }
  quant::dequantize_row(sy::DType::bf16, halves.data(), out.data(), n);
  for (int i = 0; i < n; ++i) {
    const std::uint32_t widened = std::uint32_t{halves[i]} << 16;
    float expected;
    std::memcpy(&expected, &widened, 4);
    REQUIRE(std::memcmp(&out[i], &expected, 4) == 0);
  }
  std::vector<float> values(n);
  std::normal_distribution<float> normal;
  for (auto& v : values) v = normal(random);
  quant::dequantize_row(sy::DType::f32, values.data(), out.data(), n);
  CHECK(out == values);

  // dequantize_rows is dequantize_row per row; an unaligned row (one byte in) decodes the same.
  for (sy::DType dtype : kBlockTypes) {
    const std::string type = sy::dtype_name(dtype);
    CAPTURE(type);
    const int elements = sy::dtype_info(dtype).block_elements;
    const int rows = 3, row_blocks = 5, row = elements * row_blocks;
    const Bytes bytes = random_blocks(dtype, rows * row_blocks, random);
    std::vector<float> all(static_cast<std::size_t>(rows) * row), one(row);
    quant::dequantize_rows(dtype, bytes.data(), all.data(), rows, row);
    Bytes shifted(bytes.size() + 1);
    std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
    const std::size_t row_bytes = sy::storage_bytes(dtype, row);
    for (int r = 0; r < rows; ++r) {
      quant::dequantize_row(dtype, shifted.data() + 1 + r * row_bytes, one.data(), row);
      CHECK(std::memcmp(one.data(), all.data() + static_cast<std::size_t>(r) * row, row * sizeof(float)) == 0);
    }
    // Straight to bf16: each weight is the bf16 rounding of its f32 value, big matrices (threads) too.
    for (const int many : {rows, 700}) {
      const Bytes blocks = random_blocks(dtype, many * row_blocks, random);
      std::vector<float> wide(static_cast<std::size_t>(many) * row);
      std::vector<std::uint16_t> narrow(wide.size());
      quant::dequantize_rows(dtype, blocks.data(), wide.data(), many, row);
      quant::dequantize_rows_to_bf16(dtype, blocks.data(), narrow.data(), many, row);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < wide.size(); ++i) differ += narrow[i] != sy::bf16_bits_from_f32(wide[i]);
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("quant formats: partial blocks and other types are refused with a clear message") {
  std::vector<float> out(512);
  Bytes bytes(4096);
  CHECK_THROWS_WITH_AS(quant::dequantize_row(sy::DType::q4_k, bytes.data(), out.data(), 100),
                       "dequantize: a row of 100 weights as q4_k is not a whole number of its 256-weight blocks",
                       std::invalid_argument);
  CHECK_THROWS_AS(quant::dequantize_row(sy::DType::q8_0, bytes.data(), out.data(), 33), std::invalid_argument);
  CHECK_THROWS_AS(quant::dequantize_row(sy::DType::q8_0, bytes.data(), out.data(), -32), std::invalid_argument);
  CHECK_THROWS_AS(quant::dequantize_rows(sy::DType::q6_k, bytes.data(), out.data(), 2, 255), std::invalid_argument);
  CHECK_THROWS_WITH_AS(quant::dequantize_row(sy::DType::i32, bytes.data(), out.data(), 32),
                       doctest::Contains("type i32 is not a weight format"), std::invalid_argument);
  CHECK_THROWS_AS(quant::dequantize_row(sy::DType::f8_e4m3, bytes.data(), out.data(), 32), std::invalid_argument);
  quant::dequantize_row(sy::DType::q4_0, bytes.data(), out.data(), 0);  // an empty row is a row
}

namespace {

// The RMS of the decoding error over the RMS of the row, after quantize_row then dequantize_row.
double relative_rms_error(sy::DType dtype, const std::vector<float>& row, const float* importance = nullptr) {
  const auto n = static_cast<std::int64_t>(row.size());
  Bytes blocks(sy::storage_bytes(dtype, row.size()));
  std::vector<float> decoded(row.size());
  quant::quantize_row(dtype, row.data(), blocks.data(), n, importance);
  quant::dequantize_row(dtype, blocks.data(), decoded.data(), n);
  double error = 0.0, energy = 0.0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    error += (double{decoded[i]} - row[i]) * (double{decoded[i]} - row[i]);
    energy += double{row[i]} * row[i];
  }
  return std::sqrt(error / energy);
}

std::vector<float> gaussian_row(std::size_t n, std::mt19937& random) {
  std::normal_distribution<float> normal;
  std::vector<float> row(n);
  for (auto& v : row) v = normal(random);
  return row;
}

// The kinds of rows the error bounds hold for.
enum class RowKind { gaussian, outliers, special_blocks, tiny, huge, negative };
const RowKind kRowKinds[] = {RowKind::gaussian, RowKind::outliers, RowKind::special_blocks,
                             RowKind::tiny, RowKind::huge, RowKind::negative};
const char* row_kind_name(RowKind kind) {
  const char* names[] = {"gaussian", "outliers", "special_blocks", "tiny", "huge", "negative"};
  return names[static_cast<int>(kind)];
}

std::vector<float> test_row(RowKind kind, std::size_t n, std::mt19937& random) {
  std::vector<float> row = gaussian_row(n, random);
  switch (kind) {
    case RowKind::gaussian: break;
    case RowKind::outliers: {  // one weight in 64 ten times as large
      std::uniform_int_distribution<std::size_t> at(0, n - 1);
      for (std::size_t k = 0; k < n / 64; ++k) row[at(random)] *= 10.0f;
      break;
    }
    case RowKind::special_blocks:  // a zero super-block and a constant one (the row is >= 768 long)
      std::fill(row.begin(), row.begin() + 256, 0.0f);
      std::fill(row.begin() + 256, row.begin() + 512, row[600]);
      break;
    case RowKind::tiny: for (auto& v : row) v *= 1.0f / 1024; break;  // scales still normal halves
    case RowKind::huge: for (auto& v : row) v *= 1024.0f; break;
    case RowKind::negative: for (auto& v : row) v = -std::fabs(v); break;
  }
  return row;
}

struct ErrorBound {
  sy::DType dtype;
  int quant_bits;
  double bound;          // RMS error / RMS of the row, the worst over kRowKinds but outliers
  double outlier_bound;  // the same for RowKind::outliers (a block's outlier coarsens its grid)
};
// Bounds: the worst measured over 400 seeds and the three lengths, times about 1.15 (typical
// values are in core/quant_quantize.cpp). For Gaussian blocks the symmetric fits are within 0.5% of
// a brute-force search over 800 scales per block: the bounds are the formats' more than the method's.
const ErrorBound kErrorBounds[] = {
    {sy::DType::q8_0, 8, 0.0072, 0.0175}, {sy::DType::q6_k, 6, 0.023, 0.044},
    {sy::DType::q5_k, 5, 0.046, 0.066},   {sy::DType::q5_1, 5, 0.045, 0.068},
    {sy::DType::q5_0, 5, 0.052, 0.109},   {sy::DType::q4_k, 4, 0.092, 0.133},
    {sy::DType::q4_1, 4, 0.093, 0.137},   {sy::DType::q4_0, 4, 0.109, 0.204},
    {sy::DType::q3_k, 3, 0.19, 0.26},     {sy::DType::q2_k, 2, 0.333, 0.405},
};

}  // namespace

TEST_CASE("quant formats: quantize then dequantize stays within each type's error bound") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  for (const ErrorBound& bound : kErrorBounds) {
    const std::string type = sy::dtype_name(bound.dtype);
    CAPTURE(type);
    double worst = 0.0, worst_outliers = 0.0;
    for (RowKind kind : kRowKinds)
      for (std::size_t n : {768, 2048, 4096}) {
        const std::string row = row_kind_name(kind);
        CAPTURE(row);
        CAPTURE(n);
        const double error = relative_rms_error(bound.dtype, test_row(kind, n, random));
        const bool outliers = kind == RowKind::outliers;
        CHECK(error < (outliers ? bound.outlier_bound : bound.bound));
        (outliers ? worst_outliers : worst) = std::max(outliers ? worst_outliers : worst, error);
      }
    MESSAGE(type << ": relative RMS error at worst " << worst << " (bound " << bound.bound << "), with outliers "
                 << worst_outliers << " (bound " << bound.outlier_bound << ")");
  }
  // Fewer bits per quant never get a tighter bound.
  for (const ErrorBound& more : kErrorBounds)
    for (const ErrorBound& fewer : kErrorBounds)
      if (fewer.quant_bits < more.quant_bits) {
        CHECK(fewer.bound > more.bound);
        CHECK(fewer.outlier_bound > more.outlier_bound);
      }
  // The plain types round each weight once.
  const std::vector<float> row = gaussian_row(1024, random);
  CHECK(relative_rms_error(sy::DType::f32, row) == 0.0);
  CHECK(relative_rms_error(sy::DType::f16, row) < std::ldexp(1.0, -11));
  CHECK(relative_rms_error(sy::DType::bf16, row) < std::ldexp(1.0, -8));
}

namespace {
const sy::DType kSmallBlockTypes[] = {sy::DType::q8_0, sy::DType::q4_0, sy::DType::q4_1, sy::DType::q5_0,
                                      sy::DType::q5_1};

std::vector<float> round_trip(sy::DType dtype, const std::vector<float>& row, Bytes* bytes = nullptr) {
  const auto n = static_cast<std::int64_t>(row.size());
  Bytes blocks(sy::storage_bytes(dtype, row.size()));
  std::vector<float> decoded(row.size());
  quant::quantize_row(dtype, row.data(), blocks.data(), n);
  quant::dequantize_row(dtype, blocks.data(), decoded.data(), n);
  if (bytes) *bytes = blocks;
  return decoded;
}
}  // namespace

namespace {

// Random blocks that use their whole range, as a quantiser that maps the extremes to the end levels
// writes them (ggml's reference does): Q8_0 has a weight at +-127 (and none at -128), Q4_0/Q5_0 one
// at the bottom level, Q4_1/Q5_1 one at 0 and one at the top, with d >= 0.
Bytes full_range_blocks(sy::DType dtype, int blocks, std::mt19937& random) {
  Bytes bytes = random_blocks(dtype, blocks, random);
  const int block_bytes = sy::dtype_info(dtype).block_bytes;
  std::uniform_int_distribution<int> weight(0, 31);
  for (int i = 0; i < blocks; ++i) {
    std::uint8_t* b = bytes.data() + static_cast<std::size_t>(i) * block_bytes;
    const int low = weight(random), high = (low + 1 + weight(random) % 31) % 32;  // two weights
    // Sets weight w's nibble in qs to `value`'s low four bits and its qh bit (when qh) to the fifth.
    auto set = [&](std::uint8_t* qs, std::uint8_t* qh, int w, int value) {
      std::uint8_t& byte = qs[w % 16];
      byte = static_cast<std::uint8_t>(w < 16 ? (byte & 0xf0) | (value & 15) : (byte & 0x0f) | (value & 15) << 4);
      if (qh) qh[w / 8] = static_cast<std::uint8_t>((qh[w / 8] & ~(1 << (w % 8))) | ((value >> 4) & 1) << (w % 8));
    };
    switch (dtype) {
      case sy::DType::q8_0:
        for (int w = 0; w < 32; ++w)
          if (b[2 + w] == 0x80) b[2 + w] = 0x81;
        b[2 + low] = high % 2 ? 0x7f : 0x81;
        break;
      case sy::DType::q4_0: set(b + 2, nullptr, low, 0); break;
      case sy::DType::q5_0: set(b + 6, b + 2, low, 0); break;
      // The _1 types' d is >= 0 (max - min over the levels): with d < 0 the block's minimum
      // m + qmax d could lie below the smallest half, where no m can reach it.
      case sy::DType::q4_1: b[1] &= 0x7f, set(b + 4, nullptr, low, 0), set(b + 4, nullptr, high, 15); break;
      case sy::DType::q5_1: b[1] &= 0x7f, set(b + 8, b + 4, low, 0), set(b + 8, b + 4, high, 31); break;
      default: break;
    }
  }
  return bytes;
}

// Counts the weights of `again` that differ from `once` by more than 2^-10 of their 32-weight
// block's largest magnitude (failing the first few), and returns how many differ at all.
int compare_blocks(const std::vector<float>& once, const std::vector<float>& again, int& beyond) {
  int changed = 0;
  for (std::size_t b = 0; b < once.size(); b += 32) {
    float largest = 0.0f;
    for (std::size_t i = b; i < b + 32; ++i) largest = std::max(largest, std::fabs(once[i]));
    for (std::size_t i = b; i < b + 32; ++i) {
      changed += once[i] != again[i];
      if (std::fabs(once[i] - again[i]) > std::ldexp(largest, -10) && beyond++ < 3)
        FAIL_CHECK("weight " << i << ": " << once[i] << " comes back as " << again[i]);
    }
  }
  return changed;
}

}  // namespace

TEST_CASE("quant formats: re-quantising decoded 32-weight blocks gives back the same values") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  // Within rounding: a block may come back as an equal grid written with another offset (Q4_1's
  // and Q5_1's m), whose half float rounds once more: 2^-10 of the block's largest magnitude.
  for (sy::DType dtype : kSmallBlockTypes) {
    const std::string type = sy::dtype_name(dtype);
    CAPTURE(type);
    // Blocks this quantiser wrote, from rows with outliers.
    const std::vector<float> once = round_trip(dtype, test_row(RowKind::outliers, 4096, random));
    int beyond = 0;
    const int changed = compare_blocks(once, round_trip(dtype, once), beyond);
    // Random full-range blocks (random bytes, random finite half scales of any exponent).
    const int blocks = 2048;
    const Bytes bytes = full_range_blocks(dtype, blocks, random);
    std::vector<float> decoded(static_cast<std::size_t>(blocks) * 32);
    quant::dequantize_row(dtype, bytes.data(), decoded.data(), blocks * 32);
    const int changed_random = compare_blocks(decoded, round_trip(dtype, decoded), beyond);
    MESSAGE(type << ": " << changed << " of " << once.size() << " re-quantised weights changed in the last bits, "
                 << changed_random << " of " << decoded.size() << " from random full-range blocks");
    CHECK(beyond == 0);
  }
}

TEST_CASE("quant formats: zero and constant super-blocks, importance, determinism, matrices") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::normal_distribution<float> normal;
  for (const ErrorBound& bound : kErrorBounds) {
    const sy::DType dtype = bound.dtype;
    const std::string type = sy::dtype_name(dtype);
    CAPTURE(type);
    // A zero row decodes to exact zeros; a constant row (either sign) to the constant within the
    // half-float rounding of the scales (2^-11 each, a product of two: 2^-9 with margin). The
    // constants are at least 1 in magnitude so that every scale is a normal half (a subnormal d
    // has fewer bits, and the grid's step then limits the error instead).
    std::vector<float> row(512, 0.0f);
    for (float decoded : round_trip(dtype, row)) REQUIRE(decoded == 0.0f);
    const float magnitude = 1.0f + std::fabs(normal(random));
    for (float constant : {magnitude, -magnitude, 1.0f + std::fabs(normal(random))}) {
      std::fill(row.begin(), row.end(), constant);
      CAPTURE(constant);
      for (float decoded : round_trip(dtype, row)) REQUIRE(std::fabs(decoded - constant) <= std::ldexp(std::fabs(constant), -9));
    }

    // Importance buys accuracy where it is given: one weight in 8 counts 100 times.
    const std::vector<float> values = gaussian_row(4096, random);
    std::vector<float> importance(values.size(), 1.0f);
    std::uniform_int_distribution<int> one_in(0, 7);
    for (auto& w : importance) w = one_in(random) == 0 ? 100.0f : 1.0f;
    auto weighted_error = [&](const float* given) {
      Bytes blocks(sy::storage_bytes(dtype, values.size()));
      std::vector<float> decoded(values.size());
      quant::quantize_row(dtype, values.data(), blocks.data(), 4096, given);
      quant::dequantize_row(dtype, blocks.data(), decoded.data(), 4096);
      double error = 0.0;
      for (std::size_t i = 0; i < values.size(); ++i)
        error += importance[i] * (double{decoded[i]} - values[i]) * (double{decoded[i]} - values[i]);
      return error;
    };
    const double with = weighted_error(importance.data()), without = weighted_error(nullptr);
    MESSAGE(type << ": importance-weighted error " << with << " with importance, " << without << " without");
    if (dtype != sy::DType::q8_0) CHECK(with < 0.95 * without);  // Q8_0's scale is max / 127 regardless
    std::vector<float> zero_importance(values.size(), 0.0f);
    Bytes unweighted, zero_weighted(sy::storage_bytes(dtype, values.size()));
    round_trip(dtype, values, &unweighted);
    quant::quantize_row(dtype, values.data(), zero_weighted.data(), 4096, zero_importance.data());
    CHECK(zero_weighted == unweighted);  // all-zero importance: fitted unweighted

    // quantize_rows (threaded when big) is quantize_row row by row, and the same bytes every time.
    const std::int64_t rows = 40, n = 2048;
    std::vector<float> matrix(static_cast<std::size_t>(rows * n));
    for (auto& v : matrix) v = normal(random);
    Bytes all(sy::storage_bytes(dtype, rows * n)), again(all.size()), one(sy::storage_bytes(dtype, n));
    quant::quantize_rows(dtype, matrix.data(), all.data(), rows, n);
    quant::quantize_rows(dtype, matrix.data(), again.data(), rows, n);
    CHECK(all == again);
    for (std::int64_t r = 0; r < rows; r += 13) {
      quant::quantize_row(dtype, matrix.data() + r * n, one.data(), n);
      CHECK(std::memcmp(one.data(), all.data() + r * one.size(), one.size()) == 0);
    }
    std::vector<float> decoded(matrix.size());
    quant::dequantize_rows(dtype, all.data(), decoded.data(), rows, n);
    for (std::int64_t r = 0; r < rows; r += 13) {
      std::vector<float> decoded_row(static_cast<std::size_t>(n));
      quant::dequantize_row(dtype, all.data() + r * one.size(), decoded_row.data(), n);
      CHECK(std::memcmp(decoded_row.data(), decoded.data() + r * n, n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("quant formats: quantize refuses partial blocks, other types and non-finite values") {
  std::vector<float> in(1024, 1.0f);
  Bytes out(8192);
  CHECK_THROWS_WITH_AS(quant::quantize_row(sy::DType::q2_k, in.data(), out.data(), 300),
                       "quantize: a row of 300 weights as q2_k is not a whole number of its 256-weight blocks",
                       std::invalid_argument);
  CHECK_THROWS_AS(quant::quantize_row(sy::DType::q5_1, in.data(), out.data(), 31), std::invalid_argument);
  CHECK_THROWS_AS(quant::quantize_rows(sy::DType::q4_0, in.data(), out.data(), 2, 48), std::invalid_argument);
  CHECK_THROWS_WITH_AS(quant::quantize_row(sy::DType::u8, in.data(), out.data(), 32),
                       doctest::Contains("type u8 is not a weight format"), std::invalid_argument);
  in[37] = std::nanf("");
  CHECK_THROWS_WITH_AS(quant::quantize_row(sy::DType::q4_k, in.data(), out.data(), 256),
                       doctest::Contains("weight 37 is nan, not a finite value"), std::invalid_argument);
  in[37] = 1.0f;
  std::vector<float> importance(1024, 1.0f);
  importance[5] = -1.0f;
  CHECK_THROWS_WITH_AS(quant::quantize_row(sy::DType::q8_0, in.data(), out.data(), 32, importance.data()),
                       doctest::Contains("importance of weight 5 is -1"), std::invalid_argument);
  // In a matrix big enough for threads, the error still comes back as an exception.
  std::vector<float> matrix(64 * 4096, 0.5f);
  Bytes blocks(sy::storage_bytes(sy::DType::q4_0, matrix.size()));
  matrix[50 * 4096 + 7] = INFINITY;
  CHECK_THROWS_WITH_AS(quant::quantize_rows(sy::DType::q4_0, matrix.data(), blocks.data(), 64, 4096),
                       doctest::Contains("weight 7 is inf"), std::invalid_argument);
}

TEST_CASE("quant formats: weights beyond the half floats' range decode to finite values") {
  // Subnormal floats and values far below 2^-24 have no half scale: they decode to zero. Near f32's
  // limit the fit's float sums overflow and the scales saturate at 65504: the blocks still decode
  // to finite values (no NaN, no undefined conversion).
  std::vector<float> tiny(512), huge(512);
  std::mt19937 random(test_seed());
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < tiny.size(); ++i) {
    tiny[i] = (i % 3 == 0 ? 1e-39f : 1e-30f) * normal(random);
    huge[i] = 1e37f * normal(random);
  }
  tiny[7] = 0.0f;
  for (const ErrorBound& bound : kErrorBounds) {
    const std::string type = sy::dtype_name(bound.dtype);
    CAPTURE(type);
    for (float decoded : round_trip(bound.dtype, tiny)) REQUIRE(std::fabs(decoded) <= 1e-29f);
    for (float decoded : round_trip(bound.dtype, huge)) REQUIRE(std::isfinite(decoded));
  }
}

TEST_CASE("quant formats: quantising a 2048 x 7168 matrix to Q4_K (time printed, not checked)") {
  const std::int64_t rows = 2048, n = 7168;
  std::mt19937 random(test_seed());
  const std::vector<float> matrix = gaussian_row(static_cast<std::size_t>(rows * n), random);
  Bytes blocks(sy::storage_bytes(sy::DType::q4_k, rows * n));
  const std::size_t row_bytes = sy::storage_bytes(sy::DType::q4_k, n);
  timespec cpu0, cpu1;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  const auto wall0 = std::chrono::steady_clock::now();
  for (std::int64_t r = 0; r < rows; ++r) quant::quantize_row(sy::DType::q4_k, matrix.data() + r * n, blocks.data() + r * row_bytes, n);
  const auto wall1 = std::chrono::steady_clock::now();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
  quant::quantize_rows(sy::DType::q4_k, matrix.data(), blocks.data(), rows, n);
  const auto wall2 = std::chrono::steady_clock::now();
  const double cpu_s = (cpu1.tv_sec - cpu0.tv_sec) + 1e-9 * (cpu1.tv_nsec - cpu0.tv_nsec);
  MESSAGE("Q4_K, 2048 x 7168 (" << rows * n * 4 / 1e6 << " MB of f32): one core " << cpu_s << " s of CPU time ("
          << std::chrono::duration<double>(wall1 - wall0).count() << " s wall); quantize_rows "
          << std::chrono::duration<double>(wall2 - wall1).count() << " s wall on " << omp_get_max_threads() << " threads");
}

namespace {

// The IQ types and MXFP4: their codebooks are the formats', so the independent reference is the
// tool that defines the files (llama.cpp's gguf-py), run on blocks committed beside its values.
const sy::DType kCodebookTypes[] = {sy::DType::iq2_xxs, sy::DType::iq2_xs, sy::DType::iq2_s, sy::DType::iq3_xxs,
                                    sy::DType::iq3_s,   sy::DType::iq1_s,  sy::DType::iq1_m, sy::DType::iq4_nl,
                                    sy::DType::iq4_xs,  sy::DType::mxfp4};

Bytes read_fixture(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  REQUIRE_MESSAGE(file.good(), path);
  return Bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// Decodes `blocks` (rows x row_bytes) as `dtype` and counts the values that differ from `values`
// in any bit.
std::size_t bits_differing(sy::DType dtype, const Bytes& blocks, const Bytes& values, std::int64_t rows,
                           std::int64_t columns) {
  REQUIRE(values.size() == static_cast<std::size_t>(rows * columns) * sizeof(float));
  REQUIRE(blocks.size() == static_cast<std::size_t>(rows) * sy::storage_bytes(dtype, static_cast<std::uint64_t>(columns)));
  std::vector<float> ours(static_cast<std::size_t>(rows * columns));
  quant::dequantize_rows(dtype, blocks.data(), ours.data(), rows, columns);
  std::size_t differing = 0, nonzero = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    differing += std::memcmp(&ours[i], values.data() + i * sizeof(float), sizeof(float)) != 0;
    nonzero += ours[i] != 0.0f;
  }
  CHECK(nonzero > ours.size() / 4);  // real weights, not a block of zeros
  return differing;
}

std::optional<sy::DType> dtype_named(const std::string& ggml_name) {
  const std::string lower = sy::to_lower(ggml_name);
  for (const sy::DTypeInfo& info : sy::all_dtypes())
    if (lower == info.name) return info.dtype;
  return std::nullopt;
}

// A fixture folder's manifest.json.
nlohmann::json read_manifest(const std::string& folder) {
  std::ifstream file(folder + "manifest.json");
  REQUIRE_MESSAGE(file.good(), folder << "manifest.json");
  return nlohmann::json::parse(file);
}

}  // namespace

TEST_CASE("quant formats: random IQ and MXFP4 blocks decode to gguf-py's values bit for bit") {
  // scripts/quant-random-fixtures.py: random bytes (every grid point and sign pattern) with finite
  // scales, decoded by llama.cpp's gguf-py.
  const std::string folder = sy::testing::source_path("tests/fixtures/quant_blocks/random/");
  const nlohmann::json manifest = read_manifest(folder);
  std::set<sy::DType> seen;
  for (const nlohmann::json& entry : manifest) {
    const std::string type = entry.at("type");
    CAPTURE(type);
    const std::optional<sy::DType> dtype = dtype_named(type);
    REQUIRE(dtype.has_value());
    CHECK(sy::dtype_info(*dtype).ggml_type == entry.at("ggml_type").get<int>());
    CHECK(sy::dtype_from_ggml_type(entry.at("ggml_type").get<std::uint32_t>()) == *dtype);
    CHECK(bits_differing(*dtype, read_fixture(folder + entry.at("blocks").get<std::string>()),
                         read_fixture(folder + entry.at("values").get<std::string>()), 1,
                         entry.at("columns").get<std::int64_t>()) == 0);
    seen.insert(*dtype);
  }
  CHECK(seen.size() == std::size(kCodebookTypes));
}

TEST_CASE("quant formats: llama-quantize's IQ and MXFP4 blocks decode to gguf-py's values bit for bit") {
  // scripts/quant-block-fixtures.sh: llama.cpp's llama-quantize (with an importance matrix from its
  // llama-imatrix) wrote each type; the rows of an expert tensor as stored, and gguf-py's values.
  const std::string folder = sy::testing::source_path("tests/fixtures/quant_blocks/");
  const nlohmann::json manifest = read_manifest(folder);
  std::set<sy::DType> seen;
  for (const nlohmann::json& entry : manifest) {
    const std::string type = entry.at("type"), tensor = entry.at("tensor");
    CAPTURE(type);
    CAPTURE(tensor);
    const std::optional<sy::DType> dtype = dtype_named(type);
    REQUIRE(dtype.has_value());
    CHECK(sy::dtype_info(*dtype).ggml_type == entry.at("ggml_type").get<int>());
    const std::int64_t rows = entry.at("rows"), columns = entry.at("columns");
    CHECK(entry.at("row_bytes").get<std::uint64_t>() == sy::storage_bytes(*dtype, static_cast<std::uint64_t>(columns)));
    CHECK(bits_differing(*dtype, read_fixture(folder + entry.at("blocks").get<std::string>()),
                         read_fixture(folder + entry.at("values").get<std::string>()), rows, columns) == 0);
    seen.insert(*dtype);
  }
  CHECK(seen.size() == std::size(kCodebookTypes));
}

TEST_CASE("quant formats: random blocks of every block type decode to finite weights after set_block_scales") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (const sy::DTypeInfo& info : sy::all_dtypes()) {
    if (!sy::is_block_quantized(info.dtype)) continue;
    const std::string type = info.name;
    CAPTURE(type);
    Bytes bytes = random_blocks(info.dtype, 16, random);
    for (int b = 0; b < 16; ++b) {
      // Every byte of the scales' fields set to 0xFF first: NaN or infinite halves unless rewritten.
      for (int offset : quant::half_scale_offsets(info.dtype)) bytes[b * info.block_bytes + offset + 1] = 0xFF;
      quant::set_block_scales(info.dtype, bytes.data() + b * info.block_bytes, scale(random), scale(random));
    }
    std::vector<float> decoded(16 * static_cast<std::size_t>(info.block_elements));
    quant::dequantize_row(info.dtype, bytes.data(), decoded.data(), static_cast<std::int64_t>(decoded.size()));
    CHECK(std::all_of(decoded.begin(), decoded.end(), [](float v) { return std::isfinite(v) && std::fabs(v) < 1e3f; }));
    CHECK(std::count(decoded.begin(), decoded.end(), 0.0f) < static_cast<std::ptrdiff_t>(decoded.size() / 2));
  }
}

TEST_CASE("quant formats: iq4_nl, iq4_xs and mxfp4 encode within their error bounds; lattice types are refused") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  // Bounds: about 1.15 times the worst of 25 seeds on Gaussian rows (0.077, 0.080, 0.120; Q4_0's
  // bound is 0.109: the non-uniform codebook fits a bell better, MXFP4's power-of-two scales worse).
  const struct {
    sy::DType dtype;
    double bound;
  } bounds[] = {{sy::DType::iq4_nl, 0.089}, {sy::DType::iq4_xs, 0.093}, {sy::DType::mxfp4, 0.138}};
  for (const auto& bound : bounds) {
    const std::string type = sy::dtype_name(bound.dtype);
    CAPTURE(type);
    double worst = 0.0;
    for (std::size_t n : {768, 2048, 4096}) {
      const double error = relative_rms_error(bound.dtype, gaussian_row(n, random));
      worst = std::max(worst, error);
      CHECK(error < bound.bound);
    }
    MESSAGE(type << ": relative RMS error at worst " << worst << " (bound " << bound.bound << ")");
    // Deterministic: the same row gives the same bytes.
    const std::vector<float> row = gaussian_row(2048, random);
    Bytes first(sy::storage_bytes(bound.dtype, row.size())), second(first.size());
    quant::quantize_row(bound.dtype, row.data(), first.data(), static_cast<std::int64_t>(row.size()));
    quant::quantize_row(bound.dtype, row.data(), second.data(), static_cast<std::int64_t>(row.size()));
    CHECK(first == second);
  }
  for (sy::DType dtype : kCodebookTypes) {
    const std::string type = sy::dtype_name(dtype);
    CAPTURE(type);
    const bool writes = dtype == sy::DType::iq4_nl || dtype == sy::DType::iq4_xs || dtype == sy::DType::mxfp4;
    CHECK(quant::has_encoder(dtype) == writes);
    if (writes) continue;
    std::vector<float> row(256, 0.5f);
    Bytes blocks(sy::storage_bytes(dtype, 256));
    CHECK_THROWS_WITH_AS(quant::quantize_row(dtype, row.data(), blocks.data(), 256),
                         doctest::Contains("reads this type but does not write it"), std::invalid_argument);
  }
  // A partial block of a 256-weight IQ type is refused like a K type's.
  std::vector<float> out(512);
  Bytes bytes(4096);
  CHECK_THROWS_WITH_AS(quant::dequantize_row(sy::DType::iq2_xxs, bytes.data(), out.data(), 288),
                       "dequantize: a row of 288 weights as iq2_xxs is not a whole number of its 256-weight blocks",
                       std::invalid_argument);
}
