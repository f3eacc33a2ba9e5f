#pragma once
// The codebooks of ggml's IQ types and MXFP4 (core/quant_blocks.h says how blocks index them).
// They are part of the formats: a file stores indices into them. The lattice grids come from
// core/quant_grid_values.inc, which scripts/quant-grids.py writes from llama.cpp's gguf-py.
//
// Packing: a point of an IQ2 or IQ1 grid is a 64-bit word whose byte j is weight j's value (IQ2:
// a magnitude 8, 25 or 43; IQ1: a signed byte -1, 0 or 1); a point of an IQ3 grid is a 32-bit word
// of four magnitudes (IQ3_XXS: 4 ... 62; IQ3_S: 1 ... 15). Bytes are little-endian, so the words
// may be read as byte arrays.
#include <bit>
#include <cstdint>
#include <cstring>

namespace switchyard::quant {

extern const std::uint64_t kIq2xxsGrid[256];
extern const std::uint64_t kIq2xsGrid[512];
extern const std::uint64_t kIq2sGrid[1024];
extern const std::uint32_t kIq3xxsGrid[256];
extern const std::uint32_t kIq3sGrid[512];
extern const std::uint64_t kIq1sGrid[2048];

// IQ4_NL's and IQ4_XS's 16 values, non-uniform to follow a weight distribution's bell.
inline constexpr std::int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                               1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4's E2M1 codes (sign, 2-bit exponent, 1-bit mantissa) doubled into integers: code c means
// kMxfp4Values[c] / 2.
inline constexpr std::int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// IQ1_S's and IQ1_M's shift of every grid value: value = scale * (point + or - kIq1Delta).
inline constexpr float kIq1Delta = 0.125f;

// The sign bits of 8 weights from a 7-bit index: bit 7 is set where bits 0-6 have an odd count, so
// that every pattern negates an even number of weights.
constexpr std::uint8_t iq2_signs(unsigned index) {
  index &= 127u;
  return static_cast<std::uint8_t>(index | (std::popcount(index) & 1u) << 7);
}

// MXFP4's E8M0 exponent as the float 2^(e - 128), half the block's scale (the codes are doubled):
// 2^-127 and 2^-126 are subnormal bit patterns, e = 255 gives 2^127 (never NaN).
inline float e8m0_half(std::uint8_t e) {
  const std::uint32_t bits = e < 2 ? std::uint32_t{0x00200000} << e : std::uint32_t{e - 1u} << 23;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// IQ1_M's half-float d from the top nibbles of its four scale words (core/quant_blocks.h).
inline std::uint16_t iq1_m_d_bits(const std::uint8_t (&scales)[8]) {
  std::uint16_t sc[4];
  std::memcpy(sc, scales, sizeof sc);
  return static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                    (sc[3] & 0xF000));
}

}  // namespace switchyard::quant
