// Causal attention over a KV cache (operators/cpu/kernels/causal_attention.h) against a plain
// double-precision reference, on random inputs with tokens already in the cache; f32 caches, and
// bf16 caches both against the reference on their rounded values and against the f32 result.
//
// Tolerances:
//   f32 caches        1e-4 relative (Approx, scale 1): f32 dot products and sums of a few dozen terms.
//   bf16, rounded     the same 1e-4 against the reference on the widened bf16 values: the kernel
//                     reads them exactly and computes in f32 (core/kv_cache_layout.h).
//   bf16 against f32  |out - exact| <= 2u (1 + S) sum_r p_r |v_r| for each element, u = 2^-9 (bf16's
//                     unit roundoff), S = max_r |scale| sum_d |q_d k_rd| and p the exact weights: each
//                     cached value moves by at most u relative, so a score by at most u S and each
//                     weight by a factor within exp(+-2 u S), the values by u; to first order the
//                     output moves by u (1 + 2S) sum_r p_r |v_r|. A bound, not an estimate.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include <doctest/doctest.h>

#include "operators/cpu/kernels/causal_attention.h"
#include "operators/cpu/kernels/half.h"
#include "tests/test_seed.h"

using namespace switchyard;

namespace {

constexpr double kBf16Roundoff = 1.0 / 512;  // 2^-9

std::vector<float> random_vector(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<std::uint16_t> bits(values.size());
  std::transform(values.begin(), values.end(), bits.begin(), cpu::f32_to_bf16);
  return bits;
}

std::vector<float> widened(const std::vector<std::uint16_t>& bits) {
  std::vector<float> values(bits.size());
  std::transform(bits.begin(), bits.end(), values.begin(), cpu::bf16_to_f32);
  return values;
}

// out[t, h, :] = sum_r softmax_r(score(t, h, r)) * value(h, r, :), r <= first + t, and the scale
// of the bf16 bound: (1 + S) sum_r p_r |value(h, r, :)| with S the largest |score magnitude|.
struct Reference {
  std::vector<double> out, magnitude;
};

// score(t, h, r, magnitude) returns scale * q.k in double and sets magnitude = |scale| sum |q k|.
template <typename Score, typename Value>
Reference reference(std::int64_t tokens, std::int64_t heads, std::int64_t dim, std::int64_t first, Score score,
                    Value value) {
  Reference ref;
  ref.out.assign(static_cast<std::size_t>(tokens * heads * dim), 0.0);
  ref.magnitude.assign(ref.out.size(), 0.0);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t visible = first + t + 1;
      std::vector<double> p(static_cast<std::size_t>(visible));
      double peak = -1e300, total = 0, largest = 0;
      for (std::int64_t r = 0; r < visible; ++r) {
        double magnitude = 0;
        peak = std::max(peak, p[r] = score(t, h, r, magnitude));
        largest = std::max(largest, magnitude);
      }
      for (double& x : p) total += x = std::exp(x - peak);
      for (std::int64_t r = 0; r < visible; ++r)
        for (std::int64_t i = 0; i < dim; ++i) {
          const auto at = static_cast<std::size_t>((t * heads + h) * dim + i);
          ref.out[at] += p[r] / total * value(h, r, i);
          ref.magnitude[at] += p[r] / total * std::fabs(value(h, r, i));
        }
      for (std::int64_t i = 0; i < dim; ++i) ref.magnitude[static_cast<std::size_t>((t * heads + h) * dim + i)] *= 1 + largest;
    }
  return ref;
}

void check_close(const std::vector<float>& got, const Reference& want) {
  REQUIRE(got.size() == want.out.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(want.out[i]).epsilon(1e-4).scale(1.0));
}

// bf16 caches against the exact result on the unrounded f32 caches, within the bound above.
void check_within_bf16_bound(const std::vector<float>& got, const Reference& f32_exact) {
  REQUIRE(got.size() == f32_exact.out.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(got[i] - f32_exact.out[i]);
    INFO("element " << i << ": " << got[i] << " vs exact " << f32_exact.out[i] << ", magnitude "
                    << f32_exact.magnitude[i]);
    REQUIRE(error <= 2 * kBf16Roundoff * f32_exact.magnitude[i]);
    worst = std::max(worst, error / f32_exact.magnitude[i]);
  }
  MESSAGE("bf16 cache: largest error / magnitude " << worst << " (bound " << 2 * kBf16Roundoff << ")");
}

struct GqaCase {
  std::int64_t tokens, heads, kv_heads, dim, first;
  float scale;
  std::vector<float> q, k, v;  // k, v: [first + tokens, kv_heads, dim]

  GqaCase(std::mt19937& rng, std::int64_t t, std::int64_t h, std::int64_t kv, std::int64_t d, std::int64_t f, float s)
      : tokens(t), heads(h), kv_heads(kv), dim(d), first(f), scale(s) {
    q = random_vector(static_cast<std::size_t>(tokens * heads * dim), rng);
    k = random_vector(static_cast<std::size_t>((first + tokens) * kv_heads * dim), rng);
    v = random_vector(k.size(), rng);
  }
  Reference exact(const std::vector<float>& keys, const std::vector<float>& values) const {
    const std::int64_t group = heads / kv_heads;
    return reference(
        tokens, heads, dim, first,
        [&](std::int64_t t, std::int64_t h, std::int64_t r, double& magnitude) {
          double s = 0, absolute = 0;
          for (std::int64_t i = 0; i < dim; ++i) {
            const double product = static_cast<double>(q[(t * heads + h) * dim + i]) * keys[(r * kv_heads + h / group) * dim + i];
            s += product, absolute += std::fabs(product);
          }
          magnitude = std::fabs(scale) * absolute;
          return scale * s;
        },
        [&](std::int64_t h, std::int64_t r, std::int64_t i) { return values[(r * kv_heads + h / group) * dim + i]; });
  }
  std::vector<float> run(const void* keys, const void* values, DType dtype) const {
    std::vector<float> out(q.size());
    cpu::gqa_attention(q.data(), tokens, heads, dim, keys, values, dtype, kv_heads, first, scale, out.data());
    return out;
  }
};

struct MlaCase {
  std::int64_t tokens, heads, latent, rope, first;
  float scale;
  std::vector<float> ql, qr, cache, rope_cache;

  MlaCase(std::mt19937& rng, std::int64_t t, std::int64_t h, std::int64_t l, std::int64_t r, std::int64_t f, float s)
      : tokens(t), heads(h), latent(l), rope(r), first(f), scale(s) {
    ql = random_vector(static_cast<std::size_t>(tokens * heads * latent), rng);
    qr = random_vector(static_cast<std::size_t>(tokens * heads * rope), rng);
    cache = random_vector(static_cast<std::size_t>((first + tokens) * latent), rng);
    rope_cache = random_vector(static_cast<std::size_t>((first + tokens) * rope), rng);
  }
  Reference exact(const std::vector<float>& latents, const std::vector<float>& ropes) const {
    return reference(
        tokens, heads, latent, first,
        [&](std::int64_t t, std::int64_t h, std::int64_t r, double& magnitude) {
          double s = 0, absolute = 0;
          for (std::int64_t i = 0; i < latent; ++i) {
            const double product = static_cast<double>(ql[(t * heads + h) * latent + i]) * latents[r * latent + i];
            s += product, absolute += std::fabs(product);
          }
          for (std::int64_t i = 0; i < rope; ++i) {
            const double product = static_cast<double>(qr[(t * heads + h) * rope + i]) * ropes[r * rope + i];
            s += product, absolute += std::fabs(product);
          }
          magnitude = std::fabs(scale) * absolute;
          return scale * s;
        },
        [&](std::int64_t, std::int64_t r, std::int64_t i) { return latents[r * latent + i]; });
  }
  std::vector<float> run(const void* latents, const void* ropes, DType dtype) const {
    std::vector<float> out(ql.size());
    cpu::mla_attention(ql.data(), qr.data(), tokens, heads, latent, rope, latents, ropes, dtype, first, scale,
                       out.data());
    return out;
  }
};

}  // namespace

TEST_CASE("cpu kernels: grouped-query attention matches the reference") {
  std::mt19937 rng(std::random_device{}());
  const GqaCase c(rng, 3, 6, 2, 16, 5, 0.25f);
  check_close(c.run(c.k.data(), c.v.data(), DType::f32), c.exact(c.k, c.v));
}

TEST_CASE("cpu kernels: absorbed latent attention matches the reference") {
  std::mt19937 rng(std::random_device{}());
  const MlaCase c(rng, 4, 3, 12, 4, 3, 0.3f);
  check_close(c.run(c.cache.data(), c.rope_cache.data(), DType::f32), c.exact(c.cache, c.rope_cache));
}

TEST_CASE("cpu kernels: attention over bf16 caches reads the rounded values exactly, within bf16's bound of f32") {
  const std::uint32_t seed = testing::test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 rng(seed);
  SUBCASE("grouped-query") {
    for (const GqaCase& c : {GqaCase(rng, 3, 6, 2, 16, 5, 0.25f), GqaCase(rng, 1, 8, 2, 64, 200, 0.125f),
                             GqaCase(rng, 17, 4, 4, 24, 0, 0.2f)}) {
      INFO("tokens " << c.tokens << ", heads " << c.heads << " / kv " << c.kv_heads << ", dim " << c.dim
                     << ", first " << c.first);
      const std::vector<std::uint16_t> k16 = to_bf16(c.k), v16 = to_bf16(c.v);
      const std::vector<float> got = c.run(k16.data(), v16.data(), DType::bf16);
      check_close(got, c.exact(widened(k16), widened(v16)));
      check_within_bf16_bound(got, c.exact(c.k, c.v));
    }
  }
  SUBCASE("absorbed latent") {
    for (const MlaCase& c : {MlaCase(rng, 4, 3, 12, 4, 3, 0.3f), MlaCase(rng, 1, 16, 64, 16, 300, 0.1f),
                             MlaCase(rng, 9, 2, 32, 8, 0, 0.15f)}) {
      INFO("tokens " << c.tokens << ", heads " << c.heads << ", latent " << c.latent << ", rope " << c.rope
                     << ", first " << c.first);
      const std::vector<std::uint16_t> latent16 = to_bf16(c.cache), rope16 = to_bf16(c.rope_cache);
      const std::vector<float> got = c.run(latent16.data(), rope16.data(), DType::bf16);
      check_close(got, c.exact(widened(latent16), widened(rope16)));
      check_within_bf16_bound(got, c.exact(c.cache, c.rope_cache));
    }
  }
  SUBCASE("other cache types are refused") {
    const GqaCase c(rng, 1, 2, 1, 4, 0, 0.5f);
    CHECK_THROWS_AS(c.run(c.k.data(), c.v.data(), DType::f16), std::invalid_argument);
  }
}
