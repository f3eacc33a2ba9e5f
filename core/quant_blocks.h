#pragma once
// ggml's block-quantised weight formats, byte for byte as GGUF files store them. A row of `n`
// weights is n / block_elements consecutive blocks (core/dtype.h gives both sizes); scales are
// IEEE half floats (`std::uint16_t` bits here), all little-endian. These structs are the layout;
// core/quant_formats.h decodes and encodes them, operators/cpu/kernels/ multiplies them.
// Below, w is a weight's index inside its block, q its unsigned quant, d and dmin the block's
// half-float scales widened to f32; "sub-block s" is weights [16 s, 16 s + 16) or [32 s, 32 s + 32).
//
// Three families:
// - 32-weight blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): one scale `d` (and a minimum `m` for the _1
//   types) per 32 weights.
// - 256-weight super-blocks (the K types): 16 or 8 sub-blocks, each with a small integer scale
//   (and minimum) that the super-block's half-float `d` (and `dmin`) scale again.
// - The IQ types and MXFP4: signed values from a fixed codebook instead of evenly spaced quants.
//   IQ4_NL, IQ4_XS and MXFP4 map 4-bit codes through 16 values (core/quant_grids.h); the IQ1, IQ2
//   and IQ3 types store, per 8 or 4 weights, an index into a lattice grid of magnitudes (or of
//   -1/0/1 for IQ1) and separate sign bits. Their sub-block scales are odd multiples of d.
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

// ---- IQ types and MXFP4 (core/quant_grids.h holds the grids and codebooks) ----------------------
// Below, "group g" is weights [8 g, 8 g + 8) of the super-block, "sub-block s" weights
// [32 s, 32 s + 32); grid[i] is point i of the type's grid, its byte j the magnitude of weight j;
// sign bit j set means weight j is negated; signs(k) is the 8-bit pattern of a 7-bit sign index k
// (iq2_signs: the eighth bit gives an even count of minus signs).

// IQ2_XXS (2.06 bits a weight): sub-block s is the two little-endian words a = qs[4s], qs[4s + 1]
// and b = qs[4s + 2], qs[4s + 3] (as 32-bit words: a = bytes 8 s .. 8 s + 3 of qs, b the next
// four). Group 4 s + l (l < 4): grid index byte l of a, sign index bits 7 l .. 7 l + 6 of b.
// value = d * (0.5 + (b >> 28)) * 0.25 * grid[index][j], signed by signs(sign index).
struct BlockIQ2_XXS {
  std::uint16_t d;
  std::uint16_t qs[kSuperBlock / 8];
};
// IQ2_XS (2.31 bits): group g: q = qs[g], grid index q & 511, sign index q >> 9; the scale of
// weights [16 h, 16 h + 16) is nibble h % 2 (low first) of scales[h / 2]:
// value = d * (0.5 + scale) * 0.25 * grid[index][j], signed.
struct BlockIQ2_XS {
  std::uint16_t d;
  std::uint16_t qs[kSuperBlock / 8];
  std::uint8_t scales[kSuperBlock / 32];
};
// IQ2_S (2.56 bits): group g = 4 s + l: grid index qs[g] | bits 2 l, 2 l + 1 of qh[s] as bits 8-9,
// the eight sign bits in qs[32 + g]; scales as IQ2_XS's, value likewise.
struct BlockIQ2_S {
  std::uint16_t d;
  std::uint8_t qs[kSuperBlock / 4];
  std::uint8_t qh[kSuperBlock / 32];
  std::uint8_t scales[kSuperBlock / 32];
};
// IQ3_XXS (3.06 bits): weights [4 k, 4 k + 4) are the four bytes of grid point qs[k] (k < 64);
// sub-block s's word w = bytes 64 + 4 s .. 64 + 4 s + 3 of qs holds group 4 s + l's sign index in
// bits 7 l .. 7 l + 6 and the scale in bits 28-31: value = d * (0.5 + (w >> 28)) * 0.5 * magnitude,
// signed.
struct BlockIQ3_XXS {
  std::uint16_t d;
  std::uint8_t qs[3 * kSuperBlock / 8];
};
// IQ3_S (3.44 bits): weights [4 k, 4 k + 4) are grid point qs[k] | (bit k % 8 of qh[k / 8]) << 8;
// group g's sign bits are signs[g]; sub-block s's scale is nibble s % 2 of scales[s / 2]:
// value = d * (1 + 2 * scale) * magnitude, signed.
struct BlockIQ3_S {
  std::uint16_t d;
  std::uint8_t qs[kSuperBlock / 4];
  std::uint8_t qh[kSuperBlock / 32];
  std::uint8_t signs[kSuperBlock / 8];
  std::uint8_t scales[kSuperBlock / 64];
};
// IQ1_S (1.56 bits): sub-block s's word h = qh[s]; group 4 s + l is grid point
// qs[4 s + l] | ((h >> 3 l) & 7) << 8 of -1/0/1 values; scale = (h >> 12) & 7, and bit 15 of h
// picks the shift: value = d * (2 scale + 1) * (point[j] + (bit 15 ? -0.125 : 0.125)).
struct BlockIQ1_S {
  std::uint16_t d;
  std::uint8_t qs[kSuperBlock / 8];
  std::uint16_t qh[kSuperBlock / 32];
};
// IQ1_M (1.75 bits): group g = 4 s + l is grid point qs[g] | (nibble n & 7) << 8 where n is nibble
// l % 2 (low first) of qh[2 s + l / 2], and n's bit 3 picks the shift (-0.125 where set). The
// eight bytes of scales are four little-endian words sc[0..3]: d's half-float bits are their top
// nibbles (sc[0] >> 12 | (sc[1] >> 8 & 0xF0) | (sc[2] >> 4 & 0xF00) | (sc[3] & 0xF000)); the
// three-bit scale of weights [16 h, 16 h + 16) is bits 3 (h % 4) .. 3 (h % 4) + 2 of sc[h / 4]:
// value = d * (2 scale + 1) * (point[j] + shift).
struct BlockIQ1_M {
  std::uint8_t qs[kSuperBlock / 8];
  std::uint8_t qh[kSuperBlock / 16];
  std::uint8_t scales[kSuperBlock / 32];
};
// IQ4_NL: 32 weights, nibbles as Q4_0's; value = d * kIq4Values[q].
struct BlockIQ4_NL {
  std::uint16_t d;
  std::uint8_t qs[kBlock / 2];
};
// IQ4_XS (4.25 bits): sub-block s's six-bit scale is nibble s % 2 of scales_l[s / 2] | bits 2 s,
// 2 s + 1 of scales_h as bits 4-5; its 32 weights are nibbles of qs[16 s .. 16 s + 15] as Q4_0's:
// value = d * (scale - 32) * kIq4Values[q].
struct BlockIQ4_XS {
  std::uint16_t d;
  std::uint16_t scales_h;
  std::uint8_t scales_l[kSuperBlock / 64];
  std::uint8_t qs[kSuperBlock / 2];
};
// MXFP4 (OCP microscaling FP4, as ggml stores it): 32 weights, nibbles as Q4_0's; e is a power-of-
// two exponent (E8M0): value = e8m0_half(e) * kMxfp4Values[q] (E2M1 values doubled, the scale
// halved).
struct BlockMXFP4 {
  std::uint8_t e;
  std::uint8_t qs[kBlock / 2];
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
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82 &&
              sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110 && sizeof(BlockIQ1_S) == 50 &&
              sizeof(BlockIQ1_M) == 56 && sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 &&
              sizeof(BlockMXFP4) == 17);

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
