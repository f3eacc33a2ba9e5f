#include "core/random_weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>
#include <utility>

#include "core/error.h"

namespace switchyard {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so must the host be");

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // splitmix64's state increment

std::uint64_t splitmix64_finalize(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Output n (n >= 1) of a splitmix64 sequence started at `key`, reached without stepping through the
// n - 1 before it: that is what makes the generator counter-based.
std::uint64_t splitmix64_at(std::uint64_t key, std::uint64_t n) { return splitmix64_finalize(key + n * kGolden); }

// ln(u) for u in (0, 1]: exponent times ln 2 plus an odd series in s = (f - 1) / (f + 1) for the
// mantissa f in [sqrt(1/2), sqrt(2)), where |s| < 0.172 and five terms reach float precision.
// Branch-free: the mantissa's range is shifted by offsetting the bits before splitting them.
[[gnu::always_inline]] inline float log_unit_interval(float u) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(u) + (0x3f800000u - 0x3f3504f3u);
  const float exponent = static_cast<float>(static_cast<int>(bits >> 23) - 127);
  const float f = std::bit_cast<float>((bits & 0x7fffffu) + 0x3f3504f3u);
  const float s = (f - 1.0f) / (f + 1.0f);
  const float s2 = s * s;
  const float series = s * (2.0f + s2 * (2.0f / 3 + s2 * (2.0f / 5 + s2 * (2.0f / 7 + s2 * (2.0f / 9)))));
  return exponent * std::numbers::ln2_v<float> + series;
}

// (cos, sin) of the angle turn_fraction * 2 pi, turn_fraction = turn24 / 2^24. The top two bits pick
// the quadrant, the rest give x in [0, pi/2), where Taylor series to x^11 and x^12 are within 6e-8;
// the quadrant then rotates (cos x, sin x) with bit masks rather than an unpredictable branch.
[[gnu::always_inline]] inline std::pair<float, float> cos_sin_of_turn(std::uint32_t turn24) {
  const std::uint32_t quadrant = turn24 >> 22;
  const float x = static_cast<float>(turn24 & 0x3fffffu) * (0x1p-22f * std::numbers::pi_v<float> / 2);
  const float x2 = x * x;
  const float s =
      x * (1.0f + x2 * (-1.0f / 6 + x2 * (1.0f / 120 + x2 * (-1.0f / 5040 + x2 * (1.0f / 362880 +
                                                                                   x2 * (-1.0f / 39916800))))));
  const float c =
      1.0f + x2 * (-0.5f + x2 * (1.0f / 24 + x2 * (-1.0f / 720 + x2 * (1.0f / 40320 +
                                                                       x2 * (-1.0f / 3628800 + x2 * (1.0f / 479001600))))));
  const std::uint32_t swap = 0u - (quadrant & 1u);  // odd quadrants: (cos, sin) = (-sin x, cos x)
  const std::uint32_t sign = (quadrant & 2u) << 30; // quadrants 2, 3: both negated
  const std::uint32_t cb = std::bit_cast<std::uint32_t>(c), sb = std::bit_cast<std::uint32_t>(s);
  return {std::bit_cast<float>(((cb & ~swap) | ((sb ^ 0x80000000u) & swap)) ^ sign),
          std::bit_cast<float>(((sb & ~swap) | (cb & swap)) ^ sign)};
}

// Box-Muller, a batch at a time: pair p of the stream gives elements 2p (cosine) and 2p + 1 (sine).
// Only +, -, *, / and sqrt, no libm calls, so the values are within 1e-6 of the exact transform
// and the same whichever libm the program links. Hashing runs first, in its own loop, because the
// float loop after it vectorises (random_weights.cpp is built with -fno-math-errno for sqrt), which
// makes it 2.5x faster; vector and scalar lanes round alike, so chunking cannot change a value.
constexpr std::uint64_t kPairsPerBatch = 64;

// z[2k], z[2k + 1] for pairs first_pair + k, k < count <= kPairsPerBatch.
void normal_pairs(std::uint64_t key, std::uint64_t first_pair, std::uint64_t count, float* z) {
  float u1[kPairsPerBatch];
  std::uint32_t turn24[kPairsPerBatch];
  for (std::uint64_t k = 0; k < count; ++k) {
    const std::uint64_t pair = first_pair + k;
    // u1 in (0, 1], so log is finite; 53 bits of range put the tail at 8.5 sigma. Through int64
    // because x86-64 converts signed 64-bit integers in one instruction.
    u1[k] = static_cast<float>(static_cast<std::int64_t>((splitmix64_at(key, 2 * pair + 1) >> 11) + 1)) * 0x1p-53f;
    turn24[k] = static_cast<std::uint32_t>(splitmix64_at(key, 2 * pair + 2) >> 40);
  }
  for (std::uint64_t k = 0; k < count; ++k) {
    const float radius = std::sqrt(-2.0f * log_unit_interval(u1[k]));
    const auto [c, s] = cos_sin_of_turn(turn24[k]);
    z[2 * k] = radius * c;
    z[2 * k + 1] = radius * s;
  }
}

// Elements are stored one at a time through `store(offset, value)`; offsets count from `first`.
template <typename Store>
void fill_normal(std::uint64_t key, float std, std::uint64_t first, std::uint64_t count, Store store) {
  const std::uint64_t end = first + count;
  float z[2 * kPairsPerBatch];
  for (std::uint64_t pair = first / 2; 2 * pair < end; pair += kPairsPerBatch) {
    const std::uint64_t pairs = std::min(kPairsPerBatch, (end + 1) / 2 - pair);
    normal_pairs(key, pair, pairs, z);
    // A range may start or end in the middle of a pair.
    const std::uint64_t lo = std::max(2 * pair, first), hi = std::min(2 * (pair + pairs), end);
    for (std::uint64_t i = lo; i < hi; ++i) store(i - first, std * z[i - 2 * pair]);
  }
}

template <typename Store>
void fill_block(const WeightInit& init, std::uint64_t key, std::uint64_t first, std::uint64_t count, Store store) {
  switch (init.kind) {
    case WeightInit::Kind::normal:
      if (init.peak_every > 0 && init.row_elements > 0) {
        fill_normal(key, init.std, first, count, [&](std::uint64_t i, float v) {
          store(i, (first + i) / init.row_elements % init.peak_every == 0 ? v : v * kOffPeakScale);
        });
        return;
      }
      fill_normal(key, init.std, first, count, store);
      return;
    case WeightInit::Kind::ones:
      for (std::uint64_t i = 0; i < count; ++i) store(i, 1.0f);
      return;
    case WeightInit::Kind::zeros:
      for (std::uint64_t i = 0; i < count; ++i) store(i, 0.0f);
      return;
    case WeightInit::Kind::fp8_tile_scales:
      for (std::uint64_t i = 0; i < count; ++i) store(i, fp8_tile_scale(key, first + i, init.std));
      return;
  }
}

// Elements per OpenMP work item: large enough to amortise scheduling, small enough to balance.
constexpr std::uint64_t kBlockElements = 1 << 15;

}  // namespace

float fp8_tile_scale(std::uint64_t key, std::uint64_t tile, float std) {
  const std::uint64_t bits = splitmix64_finalize(key ^ 0x5ca1ab1e5ca1ab1eULL ^ (tile * kGolden));
  const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1)
  return std * (4.5f / 448.0f) * (0.75f + 0.5f * unit);
}

std::uint8_t e4m3_bits_from_f32(float value) {
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  float magnitude = std::fabs(value);
  if (!(magnitude < 448.0f)) return sign | 0x7E;  // 448 (NaN saturates too: no NaN in a weight)
  int exponent;
  std::frexp(magnitude, &exponent);  // magnitude = m * 2^exponent, m in [0.5, 1)
  exponent = std::max(exponent - 1, -6);  // 2^exponent <= magnitude; -6: the subnormal quantum
  // Three mantissa bits: the quantum is 2^(exponent - 3); rint rounds ties to even.
  const auto q = static_cast<int>(std::nearbyint(std::ldexp(magnitude, 3 - exponent)));
  if (q == 0) return sign;
  if (q < 8) return sign | static_cast<std::uint8_t>(q);  // subnormal (exponent -6 only)
  if (q == 16) ++exponent;                                 // rounded up to the next power of two
  const int mantissa = q == 16 ? 0 : q - 8;
  return sign | static_cast<std::uint8_t>((exponent + 7) << 3 | mantissa);
}

WeightInit weight_init_for(const Parameter& param) {
  switch (param.kind) {
    case TensorKind::norm: return {WeightInit::Kind::ones, 0.0f};
    case TensorKind::block_scale: return {WeightInit::Kind::ones, 0.0f};  // FP8 dequantisation scale of 1
    case TensorKind::router_bias:  // randomised on purpose, see the header
    case TensorKind::bias:
    default: return {WeightInit::Kind::normal, kInitializerRange};
  }
}

WeightInit weight_init_for(const Module& module, const Parameter& param, std::int64_t head_tokens) {
  WeightInit init = weight_init_for(param);
  if (param.dtype == DType::f8_e4m3 && param.shape.rank == 2)
    init.fp8_columns = static_cast<std::uint64_t>(param.shape.dims[1]);
  if (param.kind == TensorKind::block_scale && param.shape.rank == 2) {
    init = {WeightInit::Kind::fp8_tile_scales, kInitializerRange};
    init.fp8_columns = static_cast<std::uint64_t>(param.shape.dims[1]);
  }
  if (head_tokens > 0 && module.name == "lm_head" && param.name == "weight" && param.shape.rank == 2 &&
      init.kind == WeightInit::Kind::normal) {
    const auto rows = static_cast<std::uint64_t>(param.shape.dims[0]);
    init.row_elements = static_cast<std::uint64_t>(param.shape.dims[1]);
    init.peak_every = std::max<std::uint64_t>(1, rows / static_cast<std::uint64_t>(head_tokens));
  }
  return init;
}

std::uint64_t tensor_stream_key(std::uint64_t seed, std::string_view tensor_name) {
  std::uint64_t name_hash = 0xcbf29ce484222325ULL;  // FNV-1a 64
  for (char c : tensor_name) name_hash = (name_hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return splitmix64_finalize(splitmix64_finalize(seed + kGolden) ^ name_hash);
}

float standard_normal_at(std::uint64_t key, std::uint64_t index) {
  float z[2];
  normal_pairs(key, index / 2, 1, z);
  return z[index % 2];
}

std::uint16_t bf16_bits_from_f32(float value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // ties go to the even upper half
  return static_cast<std::uint16_t>(bits >> 16);
}

float f32_from_bf16_bits(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

void generate_weight_bytes(const WeightInit& init, std::uint64_t key, DType dtype, std::uint64_t first_element,
                           std::span<std::byte> out) {
  const bool fp8 = dtype == DType::f8_e4m3 && init.fp8_columns > 0 && init.kind == WeightInit::Kind::normal;
  if (dtype != DType::f32 && dtype != DType::bf16 && !fp8)
    throw InputError(std::string("random weights can be written as f32 or bf16 (or block-scaled FP8), not ") +
                     dtype_name(dtype));
  const std::uint64_t element_bytes = dtype == DType::f32 ? 4 : fp8 ? 1 : 2;
  if (out.size() % element_bytes) throw InputError("random weights: output buffer is not a whole number of elements");
  const std::uint64_t count = out.size() / element_bytes;
  const std::int64_t blocks = static_cast<std::int64_t>((count + kBlockElements - 1) / kBlockElements);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::uint64_t begin = static_cast<std::uint64_t>(b) * kBlockElements;
    const std::uint64_t n = std::min(kBlockElements, count - begin);
    std::byte* dst = out.data() + begin * element_bytes;
    if (fp8) {  // element e = (row, column): divided by its tile's scale, then rounded to E4M3
      const std::uint64_t columns = init.fp8_columns, tiles_per_row = (columns + kFp8Tile - 1) / kFp8Tile;
      const std::uint64_t at = first_element + begin;
      fill_block(init, key, at, n, [&](std::uint64_t i, float v) {
        const std::uint64_t row = (at + i) / columns, column = (at + i) % columns;
        const float scale = fp8_tile_scale(key, (row / kFp8Tile) * tiles_per_row + column / kFp8Tile, init.std);
        dst[i] = static_cast<std::byte>(e4m3_bits_from_f32(v / scale));
      });
    } else if (dtype == DType::f32)
      fill_block(init, key, first_element + begin, n, [dst](std::uint64_t i, float v) { std::memcpy(dst + 4 * i, &v, 4); });
    else
      fill_block(init, key, first_element + begin, n, [dst](std::uint64_t i, float v) {
        const std::uint16_t h = bf16_bits_from_f32(v);
        std::memcpy(dst + 2 * i, &h, 2);
      });
  }
}

}  // namespace switchyard
