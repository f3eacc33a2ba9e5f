#pragma once
// The double-precision attention reference and the error measure that the GPU attention tests
// (operators/cuda/kernels/test_attention.cpp, test_mla_decode.cpp) share; test_attention.cpp's header
// explains the tolerance.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "operators/cpu/kernels/causal_attention.h"
#include "tests/cuda_test_support.h"

namespace switchyard::testing {

constexpr double kTolerance = 3e-5;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A cache [rows, width] whose first `visible` rows are drawn and the rest NaN.
inline std::vector<float> cache_with_garbage(std::int64_t rows, std::int64_t width, std::int64_t visible,
                                      std::mt19937& random) {
  std::vector<float> cache(static_cast<std::size_t>(rows * width), kNaN);
  const std::vector<float> drawn = uniform(static_cast<std::size_t>(visible * width), -1, 1, random);
  std::copy(drawn.begin(), drawn.end(), cache.begin());
  return cache;
}

// A cache as a bf16 cache holds it: every value rounded to bf16 in place (so that the references
// see exactly what the kernels read, NaN staying NaN) and the bits returned.
inline std::vector<std::uint16_t> round_to_bf16(std::vector<float>& values) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    bits[i] = cpu::f32_to_bf16(values[i]);
    values[i] = cpu::bf16_to_f32(bits[i]);
  }
  return bits;
}

// The device copy of a cache in `dtype` (f32 or bf16); for bf16 `values` are rounded in place first.
inline cuda::DeviceBuffer cache_to_device(cuda::DeviceContext& context, std::vector<float>& values, DType dtype) {
  REQUIRE((dtype == DType::f32 || dtype == DType::bf16));
  if (dtype == DType::f32) return to_device(context, values);
  return to_device(context, round_to_bf16(values));
}

// Exact attention and the scale its errors are measured against (see the tolerances above).
struct Exact {
  std::vector<double> out;        // [tokens, heads, v_dim]
  std::vector<double> magnitude;  // (1 + S) * sum_r p_r |v_r|
};

// Query t sees rows [0, min(first + t + 1, max_visible)). score(t, h, r, magnitude) returns
// scale * q.k in double and sets magnitude = |scale| * sum |q k|; value(h, r) is the row's v_dim values.
template <typename Score, typename Value>
Exact exact_attention(std::int64_t tokens, std::int64_t heads, std::int64_t v_dim, std::int64_t first, Score score,
                      Value value, std::int64_t max_visible = std::numeric_limits<std::int64_t>::max()) {
  Exact e;
  e.out.assign(static_cast<std::size_t>(tokens * heads * v_dim), 0.0);
  e.magnitude.assign(e.out.size(), 0.0);
  std::vector<double> p;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t visible = std::min(first + t + 1, max_visible);
      p.assign(static_cast<std::size_t>(visible), 0.0);
      double peak = -INFINITY, largest = 0, total = 0;
      for (std::int64_t r = 0; r < visible; ++r) {
        double magnitude = 0;
        p[r] = score(t, h, r, magnitude);
        peak = std::max(peak, p[r]);
        largest = std::max(largest, magnitude);
      }
      for (double& x : p) total += x = std::exp(x - peak);
      double* out = e.out.data() + (t * heads + h) * v_dim;
      double* magnitude = e.magnitude.data() + (t * heads + h) * v_dim;
      for (std::int64_t r = 0; r < visible; ++r) {
        const double w = p[r] / total;
        const float* row = value(h, r);
        for (std::int64_t i = 0; i < v_dim; ++i) {
          out[i] += w * row[i];
          magnitude[i] += w * std::fabs(row[i]);
        }
      }
      for (std::int64_t i = 0; i < v_dim; ++i) magnitude[i] *= 1 + largest;
    }
  return e;
}

// The largest |got - want| / magnitude (infinite for a NaN) and where.
struct Worst {
  double ratio = 0;
  std::size_t at = 0;
};
template <typename Want>
Worst worst_error(const std::vector<float>& got, const std::vector<Want>& want, const std::vector<double>& magnitude) {
  Worst worst;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double difference = std::fabs(got[i] - static_cast<double>(want[i]));
    double ratio = difference == 0 ? 0 : difference / magnitude[i];
    if (std::isnan(ratio)) ratio = INFINITY;
    if (ratio > worst.ratio) worst = {ratio, i};
  }
  return worst;
}

// Checks got against the exact result and, when given, the CPU kernel's; returns the largest ratio.
inline double check_against(const std::vector<float>& got, const Exact& exact, const std::vector<float>* cpu_out,
                     std::int64_t heads, std::int64_t v_dim) {
  REQUIRE(got.size() == exact.out.size());
  const Worst w = worst_error(got, exact.out, exact.magnitude);
  INFO("largest error at token " << w.at / (heads * v_dim) << ", head " << w.at / v_dim % heads << ", element "
                                 << w.at % v_dim << ": " << got[w.at] << " vs exact " << exact.out[w.at]
                                 << ", magnitude " << exact.magnitude[w.at] << ", ratio " << w.ratio);
  CHECK(w.ratio <= kTolerance);
  if (cpu_out != nullptr) {
    const Worst c = worst_error(got, *cpu_out, exact.magnitude);
    INFO("largest difference from the CPU kernel at element " << c.at << ": " << got[c.at] << " vs "
                                                              << (*cpu_out)[c.at] << ", ratio " << c.ratio);
    CHECK(c.ratio <= 2 * kTolerance);
  }
  return w.ratio;
}

// ---- MLA (absorbed) ------------------------------------------------------------------------------

struct MlaShape {
  std::int64_t tokens, heads, latent_dim, rope_dim, position, max_context;
  float scale;
  DType cache_dtype = DType::f32;
};

inline std::string describe(const MlaShape& s) {
  std::ostringstream out;
  out << "mla: tokens " << s.tokens << ", heads " << s.heads << ", latent " << s.latent_dim << ", rope "
      << s.rope_dim << ", position " << s.position << ", max_context " << s.max_context << ", scale " << s.scale
      << ", " << dtype_name(s.cache_dtype) << " cache";
  return out.str();
}

struct MlaInputs {
  std::vector<float> q_latent, q_rope, latent_cache, rope_cache;
};

inline Exact exact_mla(const MlaShape& s, const MlaInputs& in) {
  return exact_attention(
      s.tokens, s.heads, s.latent_dim, s.position,
      [&](std::int64_t t, std::int64_t h, std::int64_t r, double& magnitude) {
        double dot = 0, absolute = 0;
        const float* ql = in.q_latent.data() + (t * s.heads + h) * s.latent_dim;
        const float* kl = in.latent_cache.data() + r * s.latent_dim;
        for (std::int64_t i = 0; i < s.latent_dim; ++i) {
          dot += static_cast<double>(ql[i]) * kl[i];
          absolute += std::fabs(static_cast<double>(ql[i]) * kl[i]);
        }
        const float* qr = in.q_rope.data() + (t * s.heads + h) * s.rope_dim;
        const float* kr = in.rope_cache.data() + r * s.rope_dim;
        for (std::int64_t i = 0; i < s.rope_dim; ++i) {
          dot += static_cast<double>(qr[i]) * kr[i];
          absolute += std::fabs(static_cast<double>(qr[i]) * kr[i]);
        }
        magnitude = std::fabs(s.scale) * absolute;
        return s.scale * dot;
      },
      [&](std::int64_t, std::int64_t r) { return in.latent_cache.data() + r * s.latent_dim; });
}

inline std::vector<float> mla_on_cpu(const MlaShape& s, const MlaInputs& in) {
  std::vector<float> out(static_cast<std::size_t>(s.tokens * s.heads * s.latent_dim));
  cpu::mla_attention(in.q_latent.data(), in.q_rope.data(), s.tokens, s.heads, s.latent_dim, s.rope_dim,
                     in.latent_cache.data(), in.rope_cache.data(), DType::f32, s.position, s.scale, out.data());
  return out;
}

}  // namespace switchyard::testing
