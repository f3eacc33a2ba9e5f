#pragma once
// ggml's block-quantised weight formats, byte for byte as GGUF files store them. A row of `n`
// weights is n / block_elements consecutive blocks (core/dtype.h gives both sizes); scales are
// IEEE half floats (`std::uint16_t` bits here), all little-endian. These structs are the layout
// only: core/quant_formats.h decodes and encodes them, operators/kernels/cpu/ multiplies them.
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

// Q4_0: w = d * (q - 8), q in [0, 16). qs[j] holds weight j in its low nibble and weight j + 16 in
// its high nibble.
struct BlockQ4_0 {
  std::uint16_t d;
  std::uint8_t qs[kBlock / 2];
};
// Q4_1: w = d * q + m, q in [0, 16); nibbles as Q4_0.
struct BlockQ4_1 {
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qs[kBlock / 2];
};
// Q5_0: w = d * (q - 16), q in [0, 32): the low four bits as Q4_0's nibbles, the fifth bit of
// weight j in bit j of the little-endian 32-bit qh.
struct BlockQ5_0 {
  std::uint16_t d;
  std::uint8_t qh[4];
  std::uint8_t qs[kBlock / 2];
};
// Q5_1: w = d * q + m, q in [0, 32); bits as Q5_0.
struct BlockQ5_1 {
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qh[4];
  std::uint8_t qs[kBlock / 2];
};
// Q8_0: w = d * q, q a signed byte.
struct BlockQ8_0 {
  std::uint16_t d;
  std::int8_t qs[kBlock];
};

// Q2_K: 16 sub-blocks of 16 weights. scales[i]: the low nibble is sub-block i's scale, the high
// nibble its minimum; w = d * scale * q - dmin * min, q in [0, 4). The 2-bit values are packed four
// to a byte: for each half of 128 weights, byte j (of 32) holds, in bits 2s..2s+1, weight 32 s + j.
struct BlockQ2_K {
  std::uint8_t scales[kSuperBlock / 16];
  std::uint8_t qs[kSuperBlock / 4];
  std::uint16_t d;
  std::uint16_t dmin;
};
// Q3_K: 16 sub-blocks of 16 weights; w = d * (scale - 32) * (q - 4 * !high_bit), q's low two bits
// packed as Q2_K's, its third bit in hmask, and 16 six-bit scales packed into 12 bytes.
struct BlockQ3_K {
  std::uint8_t hmask[kSuperBlock / 8];
  std::uint8_t qs[kSuperBlock / 4];
  std::uint8_t scales[12];
  std::uint16_t d;
};
// Q4_K: 8 sub-blocks of 32 weights, each with a six-bit scale and a six-bit minimum packed into
// 12 bytes; w = d * scale * q - dmin * min, q in [0, 16). For each 64 weights, 32 bytes hold the
// first 32 in their low nibbles and the next 32 in their high nibbles.
struct BlockQ4_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];
  std::uint8_t qs[kSuperBlock / 2];
};
// Q5_K: Q4_K with a fifth bit per weight in qh: weight 32 s + j's fifth bit is bit s of qh[j].
struct BlockQ5_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[kSuperBlock / 8];
  std::uint8_t qs[kSuperBlock / 2];
};
// Q6_K: 16 sub-blocks of 16 weights with signed byte scales; w = d * scale * (q - 32), q in
// [0, 64): four low bits in ql, two high bits in qh.
struct BlockQ6_K {
  std::uint8_t ql[kSuperBlock / 2];
  std::uint8_t qh[kSuperBlock / 4];
  std::int8_t scales[kSuperBlock / 16];
  std::uint16_t d;
};

// Activations for the K types' integer dot products (never stored in a file): a float scale, 256
// signed bytes, and the sums of each 16 of them (for the minimums' term).
struct BlockQ8_K {
  float d;
  std::int8_t qs[kSuperBlock];
  std::int16_t bsums[kSuperBlock / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

}  // namespace switchyard::quant
