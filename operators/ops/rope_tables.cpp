#include "operators/ops/rope_tables.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace switchyard {
namespace {

// transformers: `base ** (torch.arange(0, dim, 2).float() / dim)`: an f32 quotient, then an f32
// power (torch's is within an ulp of the correctly rounded one computed here).
float position_frequency(int i, int rope_dim, double theta) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
  return static_cast<float>(std::pow(static_cast<double>(static_cast<float>(theta)), static_cast<double>(exponent)));
}

// YaRN: the dimension whose wavelength fits `turns` turns into the original context.
double correction_dim(double turns, int rope_dim, double theta, double original_context) {
  return rope_dim * std::log(original_context / (turns * 2 * std::numbers::pi)) / (2 * std::log(theta));
}

}  // namespace

void check_rope_dim(int rope_dim) {
  if (rope_dim <= 0 || rope_dim % 2 != 0 || rope_dim > kMaxRopeDim)
    throw std::invalid_argument("rope: rope_dim " + std::to_string(rope_dim) + " must be even, in [2, " +
                                std::to_string(kMaxRopeDim) + "]");
}

RopeFrequencies rope_frequencies_default(int rope_dim, double theta) {
  check_rope_dim(rope_dim);
  RopeFrequencies result;
  result.inv_freq.resize(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) result.inv_freq[i] = 1.0f / position_frequency(i, rope_dim, theta);
  return result;
}

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

RopeFrequencies rope_frequencies_yarn(const YarnConfig& c) {
  check_rope_dim(c.rope_dim);
  RopeFrequencies result;
  if (c.attention_factor)
    result.attention_factor = static_cast<float>(*c.attention_factor);
  else if (c.mscale != 0 && c.mscale_all_dim != 0)
    result.attention_factor =
        static_cast<float>(yarn_get_mscale(c.factor, c.mscale) / yarn_get_mscale(c.factor, c.mscale_all_dim));
  else
    result.attention_factor = static_cast<float>(yarn_get_mscale(c.factor));

  // The ramp runs from `low` (fast dimensions, extrapolated) to `high` (slow ones, interpolated).
  double low = correction_dim(c.beta_fast, c.rope_dim, c.theta, c.original_max_position_embeddings);
  double high = correction_dim(c.beta_slow, c.rope_dim, c.theta, c.original_max_position_embeddings);
  if (c.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(c.rope_dim - 1));
  if (low == high) high += 0.001;  // as transformers: avoid dividing by zero

  const auto factor = static_cast<float>(c.factor);
  const auto ramp_start = static_cast<float>(low);
  const auto ramp_width = static_cast<float>(high - low);
  result.inv_freq.resize(c.rope_dim / 2);
  for (int i = 0; i < c.rope_dim / 2; ++i) {
    const float position_freq = position_frequency(i, c.rope_dim, c.theta);
    const float extrapolation = 1.0f / position_freq;
    const float interpolation = 1.0f / (factor * position_freq);
    const float ramp = std::clamp((static_cast<float>(i) - ramp_start) / ramp_width, 0.0f, 1.0f);
    const float extrapolation_share = 1.0f - ramp;
    const float interpolation_share = 1.0f - extrapolation_share;
    const float from_interpolation = interpolation * interpolation_share;
    const float from_extrapolation = extrapolation * extrapolation_share;
    result.inv_freq[i] = from_interpolation + from_extrapolation;
  }
  return result;
}

void rope_cos_sin(const RopeFrequencies& frequencies, std::int64_t first_position, std::int64_t positions, float* cos,
                  float* sin) {
  const std::size_t half = frequencies.inv_freq.size();
  const float scale = frequencies.attention_factor;
  for (std::int64_t p = 0; p < positions; ++p) {
    // transformers: position_ids.float() @ inv_freq, one f32 product, then f32 cos and sin.
    const auto position = static_cast<float>(first_position + p);
    for (std::size_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(position * frequencies.inv_freq[i]);
      cos[p * half + i] = static_cast<float>(std::cos(angle)) * scale;
      sin[p * half + i] = static_cast<float>(std::sin(angle)) * scale;
    }
  }
}

}  // namespace switchyard
