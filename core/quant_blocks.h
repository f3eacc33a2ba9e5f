#pragma once
// ggml's block-quantised weight formats, byte for byte as GGUF files store them. A row of `n`
// weights is n / block_elements consecutive blocks (core/dtype.h gives both sizes); scales are
// IEEE half floats (`std::uint16_t` bits here), all little-endian. These structs are the layout;
// core/quant_formats.h decodes and encodes them, operators/cpu/kernels/ multiplies them.
// Below, w is a weight's index inside its block, q its unsigned quant, d and dmin the block's
// half-float scales widened to f32; "sub-block s" is weights [16 s, 16 s + 16) or [32 s, 32 s + 32).
//
// Two families:
// - 32-weight blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): one scale `d` (and a minimum `m` for the _1
//   types) per 32 weights.
// - 256-weight super-blocks (the K types): 16 or 8 sub-blocks, each with a small integer scale
//   (and minimum) that the super-block's half-float `d` (and `dmin`) scale again.
#include <cstdint>

namespace switchyard::quant {

constexpr int kBlock = 32;       // weights in a Q4_0 ... Q8_0 block
constexpr int kSuperBlock = 256; // weights in a K-type super-block (ggml's QK_K)

// Q4_0: value = (q - 8) * d, q in [0, 16). qs[j] holds weight j in its low nibble and weight
// j + 16 in its high nibble (j in [0, 16)).
struct BlockQ4_0 {
  std::uint16_t d;
  std::uint8_t qs[kBlock / 2];
};
// Q4_1: value = q * d + m, q in [0, 16); nibbles as Q4_0's.
struct BlockQ4_1 {
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qs[kBlock / 2];
};
// Q5_0: value = (q - 16) * d, q in [0, 32): the low four bits as Q4_0's nibbles, the fifth bit of
// weight w in bit w of qh read as a little-endian 32-bit word (bit w % 8 of qh[w / 8]).
struct BlockQ5_0 {
  std::uint16_t d;
  std::uint8_t qh[4];
  std::uint8_t qs[kBlock / 2];
};
// Q5_1: value = q * d + m, q in [0, 32); bits as Q5_0's.
struct BlockQ5_1 {
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qh[4];
  std::uint8_t qs[kBlock / 2];
};
// Q8_0: value = q * d, q = qs[w] a signed byte.
struct BlockQ8_0 {
  std::uint16_t d;
  std::int8_t qs[kBlock];
};

// Q2_K: 16 sub-blocks of 16 weights; value = (d * scale) * q - dmin * min, q in [0, 4), where
// scales[w / 16] holds the sub-block's 4-bit scale in its low nibble and its 4-bit minimum in its
// high nibble. The quants are four to a byte: weight w is bits 2 p .. 2 p + 1 of
// qs[32 (w / 128) + w % 32], with p = (w % 128) / 32.
struct BlockQ2_K {
  std::uint8_t scales[kSuperBlock / 16];
  std::uint8_t qs[kSuperBlock / 4];
  std::uint16_t d;
  std::uint16_t dmin;
};
// Q3_K: 16 sub-blocks of 16 weights; value = (d * scale) * (q2 - (high ? 0 : 4)), where q2 (the
// low two bits) is packed as Q2_K's quants, high is bit w / 32 of hmask[w % 32], and scale is the
// sub-block's six-bit scale minus 32. The 16 six-bit scales fill 12 bytes: scale s's low four bits
// are the low nibble of scales[s] (s < 8) or the high nibble of scales[s - 8] (s >= 8); its high
// two bits are bits 2 (s / 4) .. 2 (s / 4) + 1 of scales[8 + s % 4].
struct BlockQ3_K {
  std::uint8_t hmask[kSuperBlock / 8];
  std::uint8_t qs[kSuperBlock / 4];
  std::uint8_t scales[12];
  std::uint16_t d;
};
// Q4_K: 8 sub-blocks of 32 weights; value = (d * scale) * q - dmin * min, q in [0, 16), with the
// sub-block's six-bit scale and minimum packed into 12 bytes (k4_scale_min below). Each 64 weights
// share 32 bytes of qs: weight w is the low nibble of qs[32 (w / 64) + w % 32] when w % 64 < 32,
// else its high nibble.
struct BlockQ4_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];
  std::uint8_t qs[kSuperBlock / 2];
};
// Q5_K: Q4_K with a fifth bit per weight: q = nibble + 16 * (bit w / 32 of qh[w % 32]).
struct BlockQ5_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[kSuperBlock / 8];
  std::uint8_t qs[kSuperBlock / 2];
};
// Q6_K: 16 sub-blocks of 16 weights with signed byte scales; value = (d * scales[w / 16]) * (q - 32),
// q in [0, 64). Per 128 weights (h = w / 128, r = w % 128, l = r % 32, p = r / 32): the low four
// bits are the low (p < 2) or high (p >= 2) nibble of ql[64 h + 32 (p % 2) + l], the high two bits
// are bits 2 p .. 2 p + 1 of qh[32 h + l].
struct BlockQ6_K {
  std::uint8_t ql[kSuperBlock / 2];
  std::uint8_t qh[kSuperBlock / 4];
  std::int8_t scales[kSuperBlock / 16];
  std::uint16_t d;
};

// Activations for the K types' integer dot products (never stored in a file): 256 signed bytes,
// the sums of each 16 of them (for the minimums' term) and a float scale. 64-byte aligned and
// padded to 320 bytes, bytes first, so that a kernel's 64-byte loads of qs never split a cache
// line (buffers of them are allocated 64-byte aligned).
struct alignas(64) BlockQ8_K {
  std::int8_t qs[kSuperBlock];
  std::int16_t bsums[kSuperBlock / 16];
  float d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 320);

// Q4_K's and Q5_K's 12 bytes of six-bit scales and minimums, for sub-block s in [0, 8):
//   s < 4:  scale = bytes[s] & 63, min = bytes[s + 4] & 63;
//   s >= 4: scale = (bytes[s + 4] & 15) | (bytes[s - 4] >> 6) << 4,
//           min   = (bytes[s + 4] >> 4) | (bytes[s] >> 6) << 4.
// (Bytes 0-3 carry the scales of sub-blocks 0-3 and, in their top two bits, the high bits of the
// scales of 4-7; bytes 4-7 likewise the minimums; bytes 8-11 the low nibbles of sub-blocks 4-7.)
struct ScaleMin {
  int scale;  // [0, 64)
  int min;    // [0, 64)
};
inline ScaleMin k4_scale_min(const std::uint8_t (&bytes)[12], int s) {
  if (s < 4) return {bytes[s] & 63, bytes[s + 4] & 63};
  return {(bytes[s + 4] & 15) | (bytes[s - 4] >> 6) << 4, (bytes[s + 4] >> 4) | (bytes[s] >> 6) << 4};
}
// The inverse: packs 8 (scale, min) pairs, each in [0, 64).
inline void k4_pack_scale_min(const ScaleMin (&pairs)[8], std::uint8_t (&bytes)[12]) {
  for (int s = 0; s < 4; ++s) {
    bytes[s] = static_cast<std::uint8_t>(pairs[s].scale | (pairs[s + 4].scale >> 4) << 6);
    bytes[s + 4] = static_cast<std::uint8_t>(pairs[s].min | (pairs[s + 4].min >> 4) << 6);
    bytes[s + 8] = static_cast<std::uint8_t>((pairs[s + 4].scale & 15) | (pairs[s + 4].min & 15) << 4);
  }
}

}  // namespace switchyard::quant
