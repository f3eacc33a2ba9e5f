// The scalar reference decoders of ggml's block formats (core/quant_blocks.h gives the layouts).
// Each follows ggml's arithmetic and its order of float operations: the block's half-float scales
// widened to f32, the sub-block scale multiplied in first (d * scale), then the quant, then the
// minimum subtracted. The file is compiled with -ffp-contract=off so that no compiler fuses
// `a * q - m` into one rounding, which would change the last bit.
#include <cstring>

#include "core/half_float.h"
#include "core/quant_blocks.h"
#include "core/quant_formats.h"
#include "core/quant_grids.h"

namespace switchyard::quant {
namespace {

// Blocks are copied out rather than cast in place: a caller's row (a mapped file, a byte buffer)
// need not be aligned for the struct's half floats.
template <typename Block>
Block load_block(const void* blocks, std::int64_t index) {
  Block block;
  std::memcpy(&block, static_cast<const std::uint8_t*>(blocks) + index * sizeof(Block), sizeof(Block));
  return block;
}

void decode_q4_0(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kBlock / 2; ++j) {
    y[j] = static_cast<float>((b.qs[j] & 0x0f) - 8) * d;
    y[j + kBlock / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
  }
}

void decode_q4_1(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int j = 0; j < kBlock / 2; ++j) {
    y[j] = static_cast<float>(b.qs[j] & 0x0f) * d + m;
    y[j + kBlock / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
  }
}

std::uint32_t load_qh(const std::uint8_t (&qh)[4]) {
  return std::uint32_t{qh[0]} | std::uint32_t{qh[1]} << 8 | std::uint32_t{qh[2]} << 16 |
         std::uint32_t{qh[3]} << 24;
}

// The 5-bit quants of Q5_0 and Q5_1: weight j's fifth bit is bit j of qh (j in [0, 32)).
void five_bit_quants(const std::uint8_t (&qs)[kBlock / 2], const std::uint8_t (&qh_bytes)[4], int* q) {
  const std::uint32_t qh = load_qh(qh_bytes);
  for (int j = 0; j < kBlock / 2; ++j) {
    q[j] = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + kBlock / 2] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kBlock / 2)) & 1u) << 4);
  }
}

void decode_q5_0(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  int q[kBlock];
  five_bit_quants(b.qs, b.qh, q);
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
}

void decode_q5_1(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  int q[kBlock];
  five_bit_quants(b.qs, b.qh, q);
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j]) * d + m;
}

void decode_q8_0(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void decode_q2_k(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* q = b.qs + 32 * half;
    for (int shift = 0; shift < 4; ++shift) {
      for (int part = 0; part < 2; ++part) {  // two sub-blocks of 16 share each 2-bit plane
        const std::uint8_t sc = b.scales[8 * half + 2 * shift + part];
        const float dl = d * static_cast<float>(sc & 0x0f);
        const float ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[16 * part + l] >> (2 * shift)) & 3) - ml;
      }
    }
  }
}

// Q3_K's 16 six-bit scales (biased by 32) from its 12 bytes: scale i's low four bits are the low
// (i < 8) or high (i >= 8) nibble of byte i % 8, its high two bits are bits 2 (i / 4) of byte
// 8 + i % 4.
void q3_k_scales(const std::uint8_t (&packed)[12], int* scales) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? packed[i] & 0x0f : packed[i - 8] >> 4;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = (low | high << 4) - 32;
  }
}

void decode_q3_k(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  int scales[16];
  q3_k_scales(b.scales, scales);
  int sub_block = 0;
  int hmask_bit = 0;  // weight w's high bit is bit w / 32 of hmask[w % 32]
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* q = b.qs + 32 * half;
    for (int shift = 0; shift < 4; ++shift, ++hmask_bit) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d * static_cast<float>(scales[sub_block++]);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          const int low = (q[l] >> (2 * shift)) & 3;
          const int minus = (b.hmask[l] >> hmask_bit) & 1 ? 0 : 4;
          *y++ = dl * static_cast<float>(low - minus);
        }
      }
    }
  }
}

void decode_q4_k(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int chunk = 0; chunk < 4; ++chunk) {  // 64 weights: sub-blocks 2 chunk and 2 chunk + 1
    const std::uint8_t* q = b.qs + 32 * chunk;
    const ScaleMin low = k4_scale_min(b.scales, 2 * chunk);
    const ScaleMin high = k4_scale_min(b.scales, 2 * chunk + 1);
    const float d1 = d * static_cast<float>(low.scale), m1 = dmin * static_cast<float>(low.min);
    const float d2 = d * static_cast<float>(high.scale), m2 = dmin * static_cast<float>(high.min);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}

void decode_q5_k(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int chunk = 0; chunk < 4; ++chunk) {
    const std::uint8_t* q = b.qs + 32 * chunk;
    const ScaleMin low = k4_scale_min(b.scales, 2 * chunk);
    const ScaleMin high = k4_scale_min(b.scales, 2 * chunk + 1);
    const float d1 = d * static_cast<float>(low.scale), m1 = dmin * static_cast<float>(low.min);
    const float d2 = d * static_cast<float>(high.scale), m2 = dmin * static_cast<float>(high.min);
    for (int l = 0; l < 32; ++l) {
      const int fifth = (b.qh[l] >> (2 * chunk)) & 1;
      *y++ = d1 * static_cast<float>((q[l] & 0x0f) | fifth << 4) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int fifth = (b.qh[l] >> (2 * chunk + 1)) & 1;
      *y++ = d2 * static_cast<float>((q[l] >> 4) | fifth << 4) - m2;
    }
  }
}

void decode_q6_k(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int half = 0; half < 2; ++half) {  // 128 weights: 64 bytes of ql, 32 of qh, 8 scales
    const std::uint8_t* ql = b.ql + 64 * half;
    const std::uint8_t* qh = b.qh + 32 * half;
    const std::int8_t* sc = b.scales + 8 * half;
    float* out = y + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int sub = l / 16;
      const int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      out[l] = d * static_cast<float>(sc[sub]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(sc[sub + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(sc[sub + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(sc[sub + 6]) * static_cast<float>(q4);
    }
  }
}

// ---- IQ types and MXFP4: a point of a grid, its signs, the sub-block's scale ----------------

// Byte j of a grid point (core/quant_grids.h: little-endian words).
inline int grid_byte(std::uint64_t point, int j) { return static_cast<int>((point >> (8 * j)) & 0xFF); }

// Eight weights: db * magnitude, negated where the sign bit is set (ggml's order: db * grid, then
// the sign).
void signed_points8(float db, std::uint64_t point, std::uint8_t signs, float* y) {
  for (int j = 0; j < 8; ++j)
    y[j] = db * static_cast<float>(grid_byte(point, j)) * ((signs >> j) & 1 ? -1.0f : 1.0f);
}

std::uint32_t word_at(const std::uint8_t* bytes) {
  std::uint32_t w;
  std::memcpy(&w, bytes, sizeof w);
  return w;
}

void decode_iq2_xxs(const BlockIQ2_XXS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 8; ++s, y += 32) {
    const std::uint32_t a = b.qs[4 * s] | std::uint32_t{b.qs[4 * s + 1]} << 16;
    const std::uint32_t w = b.qs[4 * s + 2] | std::uint32_t{b.qs[4 * s + 3]} << 16;
    const float db = d * (0.5f + static_cast<float>(w >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l)
      signed_points8(db, kIq2xxsGrid[(a >> (8 * l)) & 0xFF], iq2_signs(w >> (7 * l)), y + 8 * l);
  }
}

// IQ2_XS's and IQ2_S's two scales of a sub-block from its scale byte: weights [0, 16) take the
// low nibble, [16, 32) the high one; d * (0.5 + nibble) * 0.25 in ggml's order.
void iq2_scales(float d, std::uint8_t byte, float (&db)[2]) {
  db[0] = d * (0.5f + static_cast<float>(byte & 0x0F)) * 0.25f;
  db[1] = d * (0.5f + static_cast<float>(byte >> 4)) * 0.25f;
}

void decode_iq2_xs(const BlockIQ2_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 8; ++s, y += 32) {
    float db[2];
    iq2_scales(d, b.scales[s], db);
    for (int l = 0; l < 4; ++l) {
      const std::uint16_t q = b.qs[4 * s + l];
      signed_points8(db[l / 2], kIq2xsGrid[q & 511], iq2_signs(q >> 9), y + 8 * l);
    }
  }
}

void decode_iq2_s(const BlockIQ2_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 8; ++s, y += 32) {
    float db[2];
    iq2_scales(d, b.scales[s], db);
    for (int l = 0; l < 4; ++l) {
      const int index = b.qs[4 * s + l] | ((b.qh[s] >> (2 * l)) & 3) << 8;
      signed_points8(db[l / 2], kIq2sGrid[index], b.qs[32 + 4 * s + l], y + 8 * l);
    }
  }
}

void decode_iq3_xxs(const BlockIQ3_XXS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 8; ++s, y += 32) {
    const std::uint32_t w = word_at(b.qs + 64 + 4 * s);
    const float db = d * (0.5f + static_cast<float>(w >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const std::uint64_t point = kIq3xxsGrid[b.qs[8 * s + 2 * l]] |
                                  std::uint64_t{kIq3xxsGrid[b.qs[8 * s + 2 * l + 1]]} << 32;
      signed_points8(db, point, iq2_signs(w >> (7 * l)), y + 8 * l);
    }
  }
}

void decode_iq3_s(const BlockIQ3_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 8; ++s, y += 32) {
    const float db = d * static_cast<float>(1 + 2 * ((b.scales[s / 2] >> (4 * (s % 2))) & 0x0F));
    for (int l = 0; l < 4; ++l) {
      const int k = 8 * s + 2 * l;  // the group's two grid points
      const int first = b.qs[k] | ((b.qh[s] >> (2 * l)) & 1) << 8;
      const int second = b.qs[k + 1] | ((b.qh[s] >> (2 * l + 1)) & 1) << 8;
      const std::uint64_t point = kIq3sGrid[first] | std::uint64_t{kIq3sGrid[second]} << 32;
      signed_points8(db, point, b.signs[4 * s + l], y + 8 * l);
    }
  }
}

// Eight IQ1 weights: dl * (point + delta), the point's bytes signed.
void shifted_points8(float dl, std::uint64_t point, float delta, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(static_cast<std::int8_t>(grid_byte(point, j))) + delta);
}

void decode_iq1_s(const BlockIQ1_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 8; ++s, y += 32) {
    const std::uint16_t h = b.qh[s];
    const float dl = d * static_cast<float>(2 * ((h >> 12) & 7) + 1);
    const float delta = h & 0x8000 ? -kIq1Delta : kIq1Delta;
    for (int l = 0; l < 4; ++l)
      shifted_points8(dl, kIq1sGrid[b.qs[4 * s + l] | ((h >> (3 * l)) & 7) << 8], delta, y + 8 * l);
  }
}

void decode_iq1_m(const BlockIQ1_M& b, float* y) {
  const float d = f16_to_f32(iq1_m_d_bits(b.scales));
  std::uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  for (int s = 0; s < 8; ++s, y += 32) {
    for (int l = 0; l < 4; ++l) {
      const int h = 2 * s + l / 2;  // the 16 weights' scale
      const float dl = d * static_cast<float>(2 * ((sc[h / 4] >> (3 * (h % 4))) & 7) + 1);
      const int nibble = (b.qh[2 * s + l / 2] >> (4 * (l % 2))) & 0x0F;
      const float delta = nibble & 8 ? -kIq1Delta : kIq1Delta;
      shifted_points8(dl, kIq1sGrid[b.qs[4 * s + l] | (nibble & 7) << 8], delta, y + 8 * l);
    }
  }
}

// 32 weights of 4-bit codes as Q4_0's nibbles, each value scale * table[code].
void codebook32(float scale, const std::uint8_t* qs, const std::int8_t (&table)[16], float* y) {
  for (int j = 0; j < kBlock / 2; ++j) {
    y[j] = scale * static_cast<float>(table[qs[j] & 0x0F]);
    y[j + kBlock / 2] = scale * static_cast<float>(table[qs[j] >> 4]);
  }
}

void decode_iq4_nl(const BlockIQ4_NL& b, float* y) { codebook32(f16_to_f32(b.d), b.qs, kIq4Values, y); }

void decode_iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < 8; ++s) {
    const int scale = ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F) | ((b.scales_h >> (2 * s)) & 3) << 4;
    codebook32(d * static_cast<float>(scale - 32), b.qs + 16 * s, kIq4Values, y + 32 * s);
  }
}

void decode_mxfp4(const BlockMXFP4& b, float* y) { codebook32(e8m0_half(b.e), b.qs, kMxfp4Values, y); }

template <typename Block, int kElements, void (*decode)(const Block&, float*)>
void decode_blocks(const void* blocks, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n / kElements; ++i) decode(load_block<Block>(blocks, i), out + i * kElements);
}

template <typename Bits, float (*widen)(Bits)>
void widen_row(const void* in, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    Bits bits;
    std::memcpy(&bits, static_cast<const std::uint8_t*>(in) + i * sizeof(Bits), sizeof(Bits));
    out[i] = widen(bits);
  }
}

}  // namespace

void dequantize_row(DType dtype, const void* blocks, float* out, std::int64_t n) {
  check_row_length(dtype, n, "dequantize");
  switch (dtype) {
    case DType::f32: std::memcpy(out, blocks, static_cast<std::size_t>(n) * sizeof(float)); return;
    case DType::f16: return widen_row<std::uint16_t, f16_to_f32>(blocks, out, n);
    case DType::bf16: return widen_row<std::uint16_t, bf16_to_f32>(blocks, out, n);
    case DType::q4_0: return decode_blocks<BlockQ4_0, kBlock, decode_q4_0>(blocks, out, n);
    case DType::q4_1: return decode_blocks<BlockQ4_1, kBlock, decode_q4_1>(blocks, out, n);
    case DType::q5_0: return decode_blocks<BlockQ5_0, kBlock, decode_q5_0>(blocks, out, n);
    case DType::q5_1: return decode_blocks<BlockQ5_1, kBlock, decode_q5_1>(blocks, out, n);
    case DType::q8_0: return decode_blocks<BlockQ8_0, kBlock, decode_q8_0>(blocks, out, n);
    case DType::q2_k: return decode_blocks<BlockQ2_K, kSuperBlock, decode_q2_k>(blocks, out, n);
    case DType::q3_k: return decode_blocks<BlockQ3_K, kSuperBlock, decode_q3_k>(blocks, out, n);
    case DType::q4_k: return decode_blocks<BlockQ4_K, kSuperBlock, decode_q4_k>(blocks, out, n);
    case DType::q5_k: return decode_blocks<BlockQ5_K, kSuperBlock, decode_q5_k>(blocks, out, n);
    case DType::q6_k: return decode_blocks<BlockQ6_K, kSuperBlock, decode_q6_k>(blocks, out, n);
    case DType::iq2_xxs: return decode_blocks<BlockIQ2_XXS, kSuperBlock, decode_iq2_xxs>(blocks, out, n);
    case DType::iq2_xs: return decode_blocks<BlockIQ2_XS, kSuperBlock, decode_iq2_xs>(blocks, out, n);
    case DType::iq2_s: return decode_blocks<BlockIQ2_S, kSuperBlock, decode_iq2_s>(blocks, out, n);
    case DType::iq3_xxs: return decode_blocks<BlockIQ3_XXS, kSuperBlock, decode_iq3_xxs>(blocks, out, n);
    case DType::iq3_s: return decode_blocks<BlockIQ3_S, kSuperBlock, decode_iq3_s>(blocks, out, n);
    case DType::iq1_s: return decode_blocks<BlockIQ1_S, kSuperBlock, decode_iq1_s>(blocks, out, n);
    case DType::iq1_m: return decode_blocks<BlockIQ1_M, kSuperBlock, decode_iq1_m>(blocks, out, n);
    case DType::iq4_nl: return decode_blocks<BlockIQ4_NL, kBlock, decode_iq4_nl>(blocks, out, n);
    case DType::iq4_xs: return decode_blocks<BlockIQ4_XS, kSuperBlock, decode_iq4_xs>(blocks, out, n);
    case DType::mxfp4: return decode_blocks<BlockMXFP4, kBlock, decode_mxfp4>(blocks, out, n);
    default: break;  // check_row_length refused every other type
  }
}

}  // namespace switchyard::quant
