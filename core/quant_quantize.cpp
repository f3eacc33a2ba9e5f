// Our quantiser for ggml's block formats (core/quant_blocks.h gives the layouts).
//
// Method. Each block (or sub-block) is fitted in two steps:
//  1. Candidate scales. For a symmetric format (value = s * q) the weight of largest magnitude is
//     mapped to q = t for a few t around the top and the bottom quant level (the bottom one has
//     the extra negative level of [-8, 7] and the like); for an affine format (value = s * q + b)
//     the block's range is spread over a few level counts around the full one. The 32-weight
//     formats also try every integer t (level count) from 0.8 times the top: a block that is
//     already on a grid finds that grid again, so re-quantising decoded blocks gives them back.
//     Each candidate's quants are rounded, then the scale (and offset) that minimise the weighted
//     squared error for those quants are solved in closed form (least squares), and the candidate
//     with the least error is kept. One more round of re-quantising and re-solving follows (it
//     never increases the error).
//  2. The K types then quantise the sub-blocks' scales (and minimums) against the super-block's
//     half-float d (and dmin): the largest maps to the top integer level, the others round to the
//     nearest level. The weights are re-quantised with the scales the decoder will use; then d and
//     dmin are re-solved by least squares over the whole super-block for those integers, and the
//     better of the two encodings is kept.
// Half floats round to nearest even (as the file stores them) and every quant is re-rounded with
// the rounded scales, so the error measured after decoding is the error of the stored block.
//
// Error (RMS of the decoded error over the RMS of the row, on Gaussian rows; the bounds are in
// tests/core/test_quant_formats.cpp): Q8_0 0.54%, Q6_K 1.7%, Q5_K 3.6%, Q5_1 3.4%, Q5_0 4.0%,
// Q4_K 7.2%, Q4_1 7.1%, Q4_0 8.1%, Q3_K 14.4%, Q2_K 26.9%. The symmetric fits come within 0.5% of
// a brute-force search over 800 scales per block (Q4_0 8.08%, Q3_K-like blocks 14.3%); the affine
// fits within about 4% of a search that also moves the offset (three offsets per candidate win
// 1-2% for twice the time: not worth it for make-model's hundreds of MB). Q8_0 takes max / 127
// and ignores `importance`: its rounding error is already below what a search would win.
// Speed, one core (CPU time): a 2048 x 7168 matrix to Q4_K in about 0.35 s, Q6_K 0.45 s, Q2_K 0.6 s.
//
// Limits of the formats, not of the method: a block whose scale is below the smallest half
// subnormal (2^-24) decodes to zero, and a scale above 65504 saturates there.
//
// Rounding uses the add-and-subtract trick (exact round-to-nearest-even for |v| < 2^22) on values
// clamped to the quant range first, so loops vectorise on any x86-64; the file is compiled without
// FMA contraction, so the same input gives the same bytes on every machine.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/half_float.h"
#include "core/quant_blocks.h"
#include "core/quant_formats.h"
#include "core/quant_grids.h"

namespace switchyard::quant {
namespace {

constexpr float kHalfMax = 65504.0f;

// v clamped to [lo, hi], then rounded to the nearest integer (ties to even). A NaN (0 * inf, when a
// candidate scale of subnormal weights has no finite inverse) becomes lo, so that every quant
// converts to an integer without undefined behaviour.
inline float round_clamped(float v, float lo, float hi) {
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return (v + 12582912.0f) - 12582912.0f;  // 1.5 * 2^23
}

// The half float nearest to v (saturating at the largest finite half) and its value. A NaN (a fit
// whose float sums overflowed, for weights near f32's limit) becomes zero: the block stays finite.
struct Half {
  std::uint16_t bits;
  float value;
};
Half to_half(float v) {
  const std::uint16_t bits = f32_to_f16(std::isnan(v) ? 0.0f : std::clamp(v, -kHalfMax, kHalfMax));
  return {bits, f16_to_f32(bits)};
}

inline float inverse_or_zero(float s) { return s == 0.0f ? 0.0f : 1.0f / s; }

// Sums over a (sub-)block kept in 8 lanes and added in a fixed order at the end: the loops
// vectorise (a single float accumulator would not, as its order of additions must stay), and the
// result is the same whatever the vector width.
constexpr int kLanes = 8;
struct Lanes {
  float v[kLanes] = {};
  float sum() const { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }
};

// value = scale * q, q an integer in [qlo, qhi].
float fit_symmetric(const float* x, const float* w, int k, int qlo, int qhi, bool grid_levels) {
  float amax = 0.0f, extreme = 0.0f;
  for (int i = 0; i < k; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), extreme = x[i];
  if (amax == 0.0f) return 0.0f;
  double sxx = 0.0;
  for (int i = 0; i < k; ++i) sxx += double{w[i]} * x[i] * x[i];

  // Least squares for the quants of scale `s`: the best scale and its squared error.
  auto solve = [&](float s, float& best_scale) {
    const float inverse = 1.0f / s;
    Lanes sxq_lanes, sqq_lanes;
    for (int i = 0; i < k; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float q = round_clamped(x[i + l] * inverse, static_cast<float>(qlo), static_cast<float>(qhi));
        sxq_lanes.v[l] += w[i + l] * x[i + l] * q;
        sqq_lanes.v[l] += w[i + l] * q * q;
      }
    const float sxq = sxq_lanes.sum(), sqq = sqq_lanes.sum();
    if (sqq <= 0.0f) return sxx;
    best_scale = sxq / sqq;
    return sxx - double{sxq} * sxq / sqq;
  };

  float best = extreme / static_cast<float>(qhi);
  double best_error = solve(best, best);
  auto try_level = [&](float t) {
    float scale = extreme / t;
    const double error = solve(scale, scale);
    if (error < best_error) best_error = error, best = scale;
  };
  // The extreme on 0.8 to 1.3 times the top (or bottom) level: beyond 1 it clips and the rest get a
  // finer grid. With `grid_levels` also on each integer level from 0.8 times it: a block that is
  // already on a grid finds that grid again. (The K types go without: their sub-blocks' scales
  // share a super-block scale, and one sub-block's coarse grid would coarsen them all.)
  for (int level : {qhi, qlo}) {
    for (int step = 0; step < 6; ++step) try_level(static_cast<float>(level) * (0.8f + 0.1f * static_cast<float>(step)));
    const int sign = level < 0 ? -1 : 1;
    if (grid_levels)
      for (int t = static_cast<int>(std::ceil(0.8f * static_cast<float>(sign * level))); t < sign * level; ++t)
        try_level(static_cast<float>(sign * t));
  }
  float refined = best;
  if (solve(best, refined) <= best_error) best = refined;
  return best;
}

// value = scale * q + offset, q an integer in [0, qmax], scale >= 0; with `offset_at_most_zero`
// the offset is <= 0 (the K types store it as a minimum that is subtracted).
struct Affine {
  float scale;
  float offset;
};
Affine fit_affine(const float* x, const float* w, int k, int qmax, bool offset_at_most_zero, bool grid_levels) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < k; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  if (offset_at_most_zero) lo = std::min(lo, 0.0f);
  if (hi == lo) return {0.0f, lo};
  double sw = 0.0, sx = 0.0, sxx = 0.0;
  for (int i = 0; i < k; ++i) sw += w[i], sx += double{w[i]} * x[i], sxx += double{w[i]} * x[i] * x[i];

  // Least squares for the quants of (s, b): the best (scale, offset) and the squared error.
  auto solve = [&](Affine start, Affine& best) {
    const float inverse = 1.0f / start.scale;
    Lanes sq_lanes, sqq_lanes, sxq_lanes;
    for (int i = 0; i < k; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float q = round_clamped((x[i + l] - start.offset) * inverse, 0.0f, static_cast<float>(qmax));
        sq_lanes.v[l] += w[i + l] * q;
        sqq_lanes.v[l] += w[i + l] * q * q;
        sxq_lanes.v[l] += w[i + l] * x[i + l] * q;
      }
    const float sq = sq_lanes.sum(), sqq = sqq_lanes.sum(), sxq = sxq_lanes.sum();
    double s, b;
    const double det = sw * sqq - double{sq} * sq;
    if (det > 0.0) {
      s = (sw * sxq - sq * sx) / det;
      b = (double{sqq} * sx - double{sq} * sxq) / det;
    } else {
      s = 0.0, b = sw > 0.0 ? sx / sw : 0.0;
    }
    if (offset_at_most_zero && b > 0.0) b = 0.0, s = sqq > 0.0f ? sxq / double{sqq} : 0.0;
    if (s < 0.0) s = 0.0, b = offset_at_most_zero ? std::min(0.0, sw > 0.0 ? sx / sw : 0.0) : sx / sw;
    best = {static_cast<float>(s), static_cast<float>(b)};
    return sxx - 2 * s * sxq - 2 * b * sx + s * s * sqq + 2 * s * b * sq + b * b * sw;
  };

  Affine best{(hi - lo) / static_cast<float>(qmax), lo};
  double best_error = solve(best, best);
  auto try_levels = [&](float levels) {
    Affine candidate{(hi - lo) / levels, lo};
    const double error = solve(candidate, candidate);
    if (error < best_error && candidate.scale > 0.0f) best_error = error, best = candidate;
  };
  // The range spread over 0.85 to 1.25 times qmax levels (beyond 1 the extremes clip and the rest
  // get a finer grid); with `grid_levels` also over each integer level count from 0.8 qmax, as
  // fit_symmetric does.
  for (int step = 0; step < 9; ++step) try_levels(static_cast<float>(qmax) * (0.85f + 0.05f * static_cast<float>(step)));
  if (grid_levels)
    for (int levels = static_cast<int>(std::ceil(0.8f * static_cast<float>(qmax))); levels < qmax; ++levels)
      try_levels(static_cast<float>(levels));
  if (best.scale > 0.0f) {
    Affine refined = best;
    if (solve(best, refined) <= best_error && refined.scale > 0.0f) best = refined;
  }
  return best;
}

// --- the 32-weight formats ---------------------------------------------------------------------

void encode_q8_0(const float* x, const float*, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  const Half d = to_half(amax / 127.0f);
  b.d = d.bits;
  const float inverse = inverse_or_zero(d.value);
  for (int i = 0; i < kBlock; ++i) b.qs[i] = static_cast<std::int8_t>(round_clamped(x[i] * inverse, -127.0f, 127.0f));
}

// Q4_0 and Q5_0: the quants biased to [0, 2 * half_levels).
void symmetric_quants(const float* x, const float* w, int half_levels, std::uint16_t& d_bits, int* q) {
  const Half d = to_half(fit_symmetric(x, w, kBlock, -half_levels, half_levels - 1, true));
  d_bits = d.bits;
  const float inverse = inverse_or_zero(d.value);
  const auto lo = static_cast<float>(-half_levels), hi = static_cast<float>(half_levels - 1);
  for (int i = 0; i < kBlock; ++i) q[i] = static_cast<int>(round_clamped(x[i] * inverse, lo, hi)) + half_levels;
}

// Q4_1 and Q5_1: quants in [0, qmax].
void affine_quants(const float* x, const float* w, int qmax, std::uint16_t& d_bits, std::uint16_t& m_bits, int* q) {
  const Affine fit = fit_affine(x, w, kBlock, qmax, false, true);
  const Half d = to_half(fit.scale), m = to_half(fit.offset);
  d_bits = d.bits, m_bits = m.bits;
  const float inverse = inverse_or_zero(d.value);
  for (int i = 0; i < kBlock; ++i) q[i] = static_cast<int>(round_clamped((x[i] - m.value) * inverse, 0.0f, static_cast<float>(qmax)));
}

void pack_nibbles(const int* q, std::uint8_t (&qs)[kBlock / 2]) {
  for (int j = 0; j < kBlock / 2; ++j) qs[j] = static_cast<std::uint8_t>((q[j] & 15) | (q[j + kBlock / 2] & 15) << 4);
}
void pack_fifth_bits(const int* q, std::uint8_t (&qh)[4]) {
  std::uint32_t bits = 0;
  for (int j = 0; j < kBlock; ++j) bits |= static_cast<std::uint32_t>((q[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<std::uint8_t>(bits >> (8 * k));
}

void encode_q4_0(const float* x, const float* w, BlockQ4_0& b) {
  int q[kBlock];
  symmetric_quants(x, w, 8, b.d, q);
  pack_nibbles(q, b.qs);
}
void encode_q5_0(const float* x, const float* w, BlockQ5_0& b) {
  int q[kBlock];
  symmetric_quants(x, w, 16, b.d, q);
  pack_nibbles(q, b.qs);
  pack_fifth_bits(q, b.qh);
}
void encode_q4_1(const float* x, const float* w, BlockQ4_1& b) {
  int q[kBlock];
  affine_quants(x, w, 15, b.d, b.m, q);
  pack_nibbles(q, b.qs);
}
void encode_q5_1(const float* x, const float* w, BlockQ5_1& b) {
  int q[kBlock];
  affine_quants(x, w, 31, b.d, b.m, q);
  pack_nibbles(q, b.qs);
  pack_fifth_bits(q, b.qh);
}

// --- the K types -------------------------------------------------------------------------------

// A super-block with affine sub-blocks (Q2_K, Q4_K, Q5_K): value = (d * scale) * q - dmin * min.
struct AffineSuperBlock {
  Half d, dmin;
  int scale[16], min[16];
  int q[kSuperBlock];
};

// Re-quantises the weights for the block's integer scales; returns the weighted squared error.
double requantize_affine(const float* x, const float* w, int sub_size, int qmax, AffineSuperBlock& block) {
  double error = 0.0;
  for (int j = 0; j < kSuperBlock / sub_size; ++j) {
    const float scale = block.d.value * static_cast<float>(block.scale[j]);
    const float minimum = block.dmin.value * static_cast<float>(block.min[j]);
    const float inverse = inverse_or_zero(scale);
    for (int i = j * sub_size; i < (j + 1) * sub_size; ++i) {
      block.q[i] = static_cast<int>(round_clamped((x[i] + minimum) * inverse, 0.0f, static_cast<float>(qmax)));
      const float e = scale * static_cast<float>(block.q[i]) - minimum - x[i];
      error += double{w[i]} * e * e;
    }
  }
  return error;
}

void scales_against(const float* values, int count, int top, Half& d, int* levels) {
  float largest = 0.0f;
  for (int j = 0; j < count; ++j) largest = std::max(largest, values[j]);
  d = to_half(largest / static_cast<float>(top));
  const float inverse = inverse_or_zero(d.value);
  for (int j = 0; j < count; ++j) levels[j] = static_cast<int>(round_clamped(values[j] * inverse, 0.0f, static_cast<float>(top)));
}

AffineSuperBlock fit_affine_super_block(const float* x, const float* w, int sub_size, int qmax, int top) {
  const int subs = kSuperBlock / sub_size;
  float scales[16], mins[16];
  for (int j = 0; j < subs; ++j) {
    const Affine fit = fit_affine(x + j * sub_size, w + j * sub_size, sub_size, qmax, true, false);
    scales[j] = fit.scale, mins[j] = -fit.offset;
  }
  AffineSuperBlock block;
  scales_against(scales, subs, top, block.d, block.scale);
  scales_against(mins, subs, top, block.dmin, block.min);
  const double error = requantize_affine(x, w, sub_size, qmax, block);

  // d and dmin by least squares over the super-block for these integers: value = d * A - dmin * B.
  double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
  for (int i = 0; i < kSuperBlock; ++i) {
    const double a = block.scale[i / sub_size] * block.q[i], m = block.min[i / sub_size];
    saa += w[i] * a * a, sab += w[i] * a * m, sbb += w[i] * m * m, sxa += w[i] * x[i] * a, sxb += w[i] * x[i] * m;
  }
  const double det = saa * sbb - sab * sab;
  if (det > 0.0) {
    const double d = (sxa * sbb - sxb * sab) / det, dmin = (sxa * sab - sxb * saa) / det;
    if (d > 0.0 && dmin >= 0.0) {
      AffineSuperBlock refined = block;
      refined.d = to_half(static_cast<float>(d));
      refined.dmin = to_half(static_cast<float>(dmin));
      if (requantize_affine(x, w, sub_size, qmax, refined) < error) return refined;
    }
  }
  return block;
}

// A super-block with symmetric sub-blocks (Q3_K, Q6_K): value = (d * scale) * q, scale signed.
struct SymmetricSuperBlock {
  Half d;
  int scale[16];
  int q[kSuperBlock];  // signed, in [qlo, qhi]
};

double requantize_symmetric(const float* x, const float* w, int qlo, int qhi, SymmetricSuperBlock& block) {
  double error = 0.0;
  for (int j = 0; j < 16; ++j) {
    const float scale = block.d.value * static_cast<float>(block.scale[j]);
    const float inverse = inverse_or_zero(scale);
    for (int i = 16 * j; i < 16 * (j + 1); ++i) {
      block.q[i] = static_cast<int>(round_clamped(x[i] * inverse, static_cast<float>(qlo), static_cast<float>(qhi)));
      const float e = scale * static_cast<float>(block.q[i]) - x[i];
      error += double{w[i]} * e * e;
    }
  }
  return error;
}

// Sub-block scales in [-top - 1, top] against a positive d.
SymmetricSuperBlock fit_symmetric_super_block(const float* x, const float* w, int qlo, int qhi, int top) {
  float scales[16], largest = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_symmetric(x + 16 * j, w + 16 * j, 16, qlo, qhi, false);
    largest = std::max(largest, std::fabs(scales[j]));
  }
  SymmetricSuperBlock block;
  block.d = to_half(largest / static_cast<float>(top));
  const float inverse = inverse_or_zero(block.d.value);
  for (int j = 0; j < 16; ++j)
    block.scale[j] = static_cast<int>(round_clamped(scales[j] * inverse, static_cast<float>(-top - 1), static_cast<float>(top)));
  const double error = requantize_symmetric(x, w, qlo, qhi, block);

  double saa = 0, sxa = 0;
  for (int i = 0; i < kSuperBlock; ++i) {
    const double a = block.scale[i / 16] * block.q[i];
    saa += w[i] * a * a, sxa += w[i] * x[i] * a;
  }
  if (saa > 0.0 && sxa > 0.0) {
    SymmetricSuperBlock refined = block;
    refined.d = to_half(static_cast<float>(sxa / saa));
    if (requantize_symmetric(x, w, qlo, qhi, refined) < error) return refined;
  }
  return block;
}

void encode_q2_k(const float* x, const float* w, BlockQ2_K& b) {
  const AffineSuperBlock block = fit_affine_super_block(x, w, 16, 3, 15);
  b.d = block.d.bits, b.dmin = block.dmin.bits;
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<std::uint8_t>(block.scale[j] | block.min[j] << 4);
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int i = 0; i < kSuperBlock; ++i)  // weight i: bits 2p of qs[32 (i / 128) + i % 32]
    b.qs[32 * (i / 128) + i % 32] |= static_cast<std::uint8_t>(block.q[i] << (2 * ((i % 128) / 32)));
}

void encode_q3_k(const float* x, const float* w, BlockQ3_K& b) {
  const SymmetricSuperBlock block = fit_symmetric_super_block(x, w, -4, 3, 31);
  b.d = block.d.bits;
  std::memset(b.scales, 0, sizeof(b.scales));
  for (int s = 0; s < 16; ++s) {
    const int biased = block.scale[s] + 32;  // [0, 64)
    b.scales[s % 8] |= static_cast<std::uint8_t>((biased & 15) << (s < 8 ? 0 : 4));
    b.scales[8 + s % 4] |= static_cast<std::uint8_t>((biased >> 4) << (2 * (s / 4)));
  }
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.hmask, 0, sizeof(b.hmask));
  for (int i = 0; i < kSuperBlock; ++i) {
    const int biased = block.q[i] + 4;  // [0, 8): the high bit set means "no minus 4"
    b.qs[32 * (i / 128) + i % 32] |= static_cast<std::uint8_t>((biased & 3) << (2 * ((i % 128) / 32)));
    b.hmask[i % 32] |= static_cast<std::uint8_t>((biased >> 2) << (i / 32));
  }
}

void pack_k4_scales(const AffineSuperBlock& block, std::uint8_t (&bytes)[12]) {
  ScaleMin pairs[8];
  for (int j = 0; j < 8; ++j) pairs[j] = {block.scale[j], block.min[j]};
  k4_pack_scale_min(pairs, bytes);
}

void encode_q4_k(const float* x, const float* w, BlockQ4_K& b) {
  const AffineSuperBlock block = fit_affine_super_block(x, w, 32, 15, 63);
  b.d = block.d.bits, b.dmin = block.dmin.bits;
  pack_k4_scales(block, b.scales);
  for (int i = 0; i < kSuperBlock / 2; ++i) {  // byte 32 c + l: weights 64 c + l and 64 c + 32 + l
    const int c = i / 32, l = i % 32;
    b.qs[i] = static_cast<std::uint8_t>(block.q[64 * c + l] | block.q[64 * c + 32 + l] << 4);
  }
}

void encode_q5_k(const float* x, const float* w, BlockQ5_K& b) {
  const AffineSuperBlock block = fit_affine_super_block(x, w, 32, 31, 63);
  b.d = block.d.bits, b.dmin = block.dmin.bits;
  pack_k4_scales(block, b.scales);
  for (int i = 0; i < kSuperBlock / 2; ++i) {
    const int c = i / 32, l = i % 32;
    b.qs[i] = static_cast<std::uint8_t>((block.q[64 * c + l] & 15) | (block.q[64 * c + 32 + l] & 15) << 4);
  }
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int i = 0; i < kSuperBlock; ++i) b.qh[i % 32] |= static_cast<std::uint8_t>((block.q[i] >> 4) << (i / 32));
}

void encode_q6_k(const float* x, const float* w, BlockQ6_K& b) {
  const SymmetricSuperBlock block = fit_symmetric_super_block(x, w, -32, 31, 127);
  b.d = block.d.bits;
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<std::int8_t>(block.scale[j]);
  std::memset(b.ql, 0, sizeof(b.ql));
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int i = 0; i < kSuperBlock; ++i) {
    const int h = i / 128, p = (i % 128) / 32, l = i % 32;
    const int biased = block.q[i] + 32;  // [0, 64)
    b.ql[64 * h + 32 * (p % 2) + l] |= static_cast<std::uint8_t>((biased & 15) << (p < 2 ? 0 : 4));
    b.qh[32 * h + l] |= static_cast<std::uint8_t>((biased >> 4) << (2 * p));
  }
}

// --- codebook formats (IQ4_NL, IQ4_XS, MXFP4): value = s * table[code] ---------------------------

// The code of `table` nearest to v (the first of a tie).
int nearest_code(float v, const std::int8_t (&table)[16]) {
  int best = 0;
  float best_distance = std::fabs(v - static_cast<float>(table[0]));
  for (int c = 1; c < 16; ++c) {
    const float distance = std::fabs(v - static_cast<float>(table[c]));
    if (distance < best_distance) best_distance = distance, best = c;
  }
  return best;
}

// Codes of x [k] for scale s (all code 0's value where s is zero); returns the weighted squared
// error and the least-squares scale for those codes in `refit`.
double codebook_error(const float* x, const float* w, int k, float s, const std::int8_t (&table)[16], int* codes,
                      float& refit) {
  const float inverse = inverse_or_zero(s);
  double sxt = 0.0, stt = 0.0, sxx = 0.0;
  for (int i = 0; i < k; ++i) {
    codes[i] = nearest_code(x[i] * inverse, table);
    const double t = table[codes[i]];
    sxt += double{w[i]} * x[i] * t;
    stt += double{w[i]} * t * t;
    sxx += double{w[i]} * x[i] * x[i];
  }
  refit = stt > 0.0 ? static_cast<float>(sxt / stt) : 0.0f;
  return stt > 0.0 ? sxx - sxt * sxt / stt : sxx;
}

// The scale (either sign: the table is lopsided) whose codes fit x [k] best: the weight of largest
// magnitude on 0.85 to 1.15 times either end of the table, each refitted by least squares.
float fit_codebook(const float* x, const float* w, int k, const std::int8_t (&table)[16]) {
  float extreme = 0.0f;
  for (int i = 0; i < k; ++i)
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  if (extreme == 0.0f) return 0.0f;
  int codes[kSuperBlock];
  float best = 0.0f;
  double best_error = 0.0;
  bool first = true;
  for (int end : {static_cast<int>(*std::min_element(table, table + 16)), static_cast<int>(*std::max_element(table, table + 16))})
    for (int step = 0; step < 7; ++step) {
      float scale = extreme / (static_cast<float>(end) * (0.85f + 0.05f * static_cast<float>(step)));
      codebook_error(x, w, k, scale, table, codes, scale);
      float unused;
      const double error = codebook_error(x, w, k, scale, table, codes, unused);
      if (first || error < best_error) best_error = error, best = scale, first = false;
    }
  return best;
}

void pack_codes(const int* codes, std::uint8_t* qs) {
  for (int j = 0; j < kBlock / 2; ++j) qs[j] = static_cast<std::uint8_t>(codes[j] | codes[j + kBlock / 2] << 4);
}

void encode_iq4_nl(const float* x, const float* w, BlockIQ4_NL& b) {
  const Half d = to_half(fit_codebook(x, w, kBlock, kIq4Values));
  b.d = d.bits;
  int codes[kBlock];
  float unused;
  codebook_error(x, w, kBlock, d.value, kIq4Values, codes, unused);
  pack_codes(codes, b.qs);
}

// Each sub-block's scale fitted alone, then stored as d * (l - 32), l in [0, 64): the largest in
// magnitude on -32.
void encode_iq4_xs(const float* x, const float* w, BlockIQ4_XS& b) {
  float scales[8], extreme = 0.0f;
  for (int s = 0; s < 8; ++s) {
    scales[s] = fit_codebook(x + 32 * s, w + 32 * s, kBlock, kIq4Values);
    if (std::fabs(scales[s]) > std::fabs(extreme)) extreme = scales[s];
  }
  const Half d = to_half(extreme / -32.0f);
  b.d = d.bits;
  b.scales_h = 0;
  const float inverse = inverse_or_zero(d.value);
  for (int s = 0; s < 8; ++s) {
    const int level = static_cast<int>(round_clamped(scales[s] * inverse, -32.0f, 31.0f)) + 32;
    if (s % 2 == 0) b.scales_l[s / 2] = static_cast<std::uint8_t>(level & 0x0F);
    else b.scales_l[s / 2] |= static_cast<std::uint8_t>((level & 0x0F) << 4);
    b.scales_h |= static_cast<std::uint16_t>((level >> 4) << (2 * s));
    int codes[kBlock];
    float unused;
    codebook_error(x + 32 * s, w + 32 * s, kBlock, d.value * static_cast<float>(level - 32), kIq4Values, codes, unused);
    pack_codes(codes, b.qs + 16 * s);
  }
}

// The power-of-two scale: the one that puts the largest magnitude on the top code (6, doubled 12)
// or a step either side, whichever fits best.
void encode_mxfp4(const float* x, const float* w, BlockMXFP4& b) {
  float amax = 0.0f;
  for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  int codes[kBlock];
  float unused;
  int best_e = 0;
  if (amax > 0.0f) {
    const int top = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 1, 254);
    double best_error = 0.0;
    for (int e = std::max(top - 1, 1); e <= std::min(top + 1, 254); ++e) {
      const double error = codebook_error(x, w, kBlock, e8m0_half(static_cast<std::uint8_t>(e)), kMxfp4Values, codes, unused);
      if (best_e == 0 || error < best_error) best_error = error, best_e = e;
    }
  }
  b.e = static_cast<std::uint8_t>(best_e);
  codebook_error(x, w, kBlock, e8m0_half(b.e), kMxfp4Values, codes, unused);
  pack_codes(codes, b.qs);
}

// Encodes every block of the row; a block whose importance sums to zero is fitted unweighted.
template <typename Block, int kElements, void (*encode)(const float*, const float*, Block&)>
void encode_blocks(const float* in, void* out, std::int64_t n, const float* importance) {
  float ones[kElements];
  std::fill(ones, ones + kElements, 1.0f);
  for (std::int64_t i = 0; i < n / kElements; ++i) {
    const float* w = ones;
    if (importance) {
      w = importance + i * kElements;
      float sum = 0.0f;
      for (int k = 0; k < kElements; ++k) sum += w[k];
      if (!(sum > 0.0f)) w = ones;
    }
    Block block;
    encode(in + i * kElements, w, block);
    std::memcpy(static_cast<std::uint8_t*>(out) + i * sizeof(Block), &block, sizeof(Block));
  }
}

template <typename Bits, Bits (*narrow)(float)>
void narrow_row(const float* in, void* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const Bits bits = narrow(in[i]);
    std::memcpy(static_cast<std::uint8_t*>(out) + i * sizeof(Bits), &bits, sizeof(Bits));
  }
}

void check_finite(DType dtype, const float* values, std::int64_t n, const char* what, bool non_negative) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i]) || (non_negative && values[i] < 0.0f))
      throw std::invalid_argument(std::string("quantize to ") + dtype_name(dtype) + ": " + what + " " +
                                  std::to_string(i) + " is " + std::to_string(values[i]) +
                                  (non_negative ? ", not a finite value >= 0" : ", not a finite value"));
}

}  // namespace

bool has_encoder(DType dtype) {
  switch (dtype) {
    case DType::iq2_xxs: case DType::iq2_xs: case DType::iq2_s: case DType::iq3_xxs: case DType::iq3_s:
    case DType::iq1_s: case DType::iq1_m: return false;
    default: return has_row_codec(dtype);
  }
}

void quantize_row(DType dtype, const float* in, void* blocks, std::int64_t n, const float* importance) {
  check_row_length(dtype, n, "quantize");
  if (!has_encoder(dtype))
    throw std::invalid_argument(std::string("quantize to ") + dtype_name(dtype) +
                                ": Switchyard reads this type but does not write it (llama.cpp's llama-quantize "
                                "does, from an importance matrix)");
  if (dtype == DType::f32) return static_cast<void>(std::memcpy(blocks, in, static_cast<std::size_t>(n) * sizeof(float)));
  if (dtype == DType::f16) return narrow_row<std::uint16_t, f32_to_f16>(in, blocks, n);
  if (dtype == DType::bf16) return narrow_row<std::uint16_t, f32_to_bf16>(in, blocks, n);
  check_finite(dtype, in, n, "weight", false);
  if (importance) check_finite(dtype, importance, n, "importance of weight", true);
  switch (dtype) {
    case DType::q8_0: return encode_blocks<BlockQ8_0, kBlock, encode_q8_0>(in, blocks, n, importance);
    case DType::q4_0: return encode_blocks<BlockQ4_0, kBlock, encode_q4_0>(in, blocks, n, importance);
    case DType::q4_1: return encode_blocks<BlockQ4_1, kBlock, encode_q4_1>(in, blocks, n, importance);
    case DType::q5_0: return encode_blocks<BlockQ5_0, kBlock, encode_q5_0>(in, blocks, n, importance);
    case DType::q5_1: return encode_blocks<BlockQ5_1, kBlock, encode_q5_1>(in, blocks, n, importance);
    case DType::q2_k: return encode_blocks<BlockQ2_K, kSuperBlock, encode_q2_k>(in, blocks, n, importance);
    case DType::q3_k: return encode_blocks<BlockQ3_K, kSuperBlock, encode_q3_k>(in, blocks, n, importance);
    case DType::q4_k: return encode_blocks<BlockQ4_K, kSuperBlock, encode_q4_k>(in, blocks, n, importance);
    case DType::q5_k: return encode_blocks<BlockQ5_K, kSuperBlock, encode_q5_k>(in, blocks, n, importance);
    case DType::q6_k: return encode_blocks<BlockQ6_K, kSuperBlock, encode_q6_k>(in, blocks, n, importance);
    case DType::iq4_nl: return encode_blocks<BlockIQ4_NL, kBlock, encode_iq4_nl>(in, blocks, n, importance);
    case DType::iq4_xs: return encode_blocks<BlockIQ4_XS, kSuperBlock, encode_iq4_xs>(in, blocks, n, importance);
    case DType::mxfp4: return encode_blocks<BlockMXFP4, kBlock, encode_mxfp4>(in, blocks, n, importance);
    default: break;
  }
}

}  // namespace switchyard::quant
