// ggml's block formats (core/quant_formats.h). The decoder is checked on random blocks against a
// plain decoder written here in double precision from the bit description, weight by weight and
// byte offset by byte offset (no struct of core/quant_blocks.h is used): for each weight it finds
// its bits, so the index arithmetic is not the decoder's loops. The quantiser is checked by its
// error on random rows, by re-quantising decoded rows, and for its refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/quant_formats.h"
#include "tests/test_seed.h"

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
