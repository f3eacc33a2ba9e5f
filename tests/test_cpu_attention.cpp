// Causal attention over a KV cache (operators/cpu/causal_attention.h) against a plain
// double-precision reference, on random inputs with tokens already in the cache.
#include <cmath>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "operators/cpu/causal_attention.h"

using namespace switchyard;

namespace {

std::vector<float> random_vector(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// out[t, h, :] = sum_r softmax_r(score(t, h, r)) * value(h, r, :), r <= first + t
template <typename Score, typename Value>
std::vector<double> reference(std::int64_t tokens, std::int64_t heads, std::int64_t dim, std::int64_t first, Score score,
                              Value value) {
  std::vector<double> out(static_cast<std::size_t>(tokens * heads * dim), 0.0);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t visible = first + t + 1;
      std::vector<double> p(static_cast<std::size_t>(visible));
      double peak = -1e300, total = 0;
      for (std::int64_t r = 0; r < visible; ++r) peak = std::max(peak, p[r] = score(t, h, r));
      for (double& x : p) total += x = std::exp(x - peak);
      for (std::int64_t r = 0; r < visible; ++r)
        for (std::int64_t i = 0; i < dim; ++i) out[static_cast<std::size_t>((t * heads + h) * dim + i)] += p[r] / total * value(h, r, i);
    }
  return out;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(1e-4).scale(1.0));
}

}  // namespace

TEST_CASE("cpu kernels: grouped-query attention matches the reference") {
  std::mt19937 rng(std::random_device{}());
  const std::int64_t tokens = 3, heads = 6, kv_heads = 2, dim = 16, first = 5, context = first + tokens;
  const auto q = random_vector(static_cast<std::size_t>(tokens * heads * dim), rng);
  const auto k = random_vector(static_cast<std::size_t>(context * kv_heads * dim), rng);
  const auto v = random_vector(k.size(), rng);
  const float scale = 0.25f;
  std::vector<float> out(q.size());
  cpu::gqa_attention(q.data(), tokens, heads, dim, k.data(), v.data(), kv_heads, first, scale, out.data());
  const std::int64_t group = heads / kv_heads;
  check_close(out, reference(
                       tokens, heads, dim, first,
                       [&](std::int64_t t, std::int64_t h, std::int64_t r) {
                         double s = 0;
                         for (std::int64_t i = 0; i < dim; ++i)
                           s += static_cast<double>(q[(t * heads + h) * dim + i]) * k[(r * kv_heads + h / group) * dim + i];
                         return scale * s;
                       },
                       [&](std::int64_t h, std::int64_t r, std::int64_t i) { return v[(r * kv_heads + h / group) * dim + i]; }));
}

TEST_CASE("cpu kernels: absorbed latent attention matches the reference") {
  std::mt19937 rng(std::random_device{}());
  const std::int64_t tokens = 4, heads = 3, latent = 12, rope = 4, first = 3, context = first + tokens;
  const auto ql = random_vector(static_cast<std::size_t>(tokens * heads * latent), rng);
  const auto qr = random_vector(static_cast<std::size_t>(tokens * heads * rope), rng);
  const auto cache = random_vector(static_cast<std::size_t>(context * latent), rng);
  const auto rope_cache = random_vector(static_cast<std::size_t>(context * rope), rng);
  const float scale = 0.3f;
  std::vector<float> out(ql.size());
  cpu::mla_attention(ql.data(), qr.data(), tokens, heads, latent, rope, cache.data(), rope_cache.data(), first, scale,
                     out.data());
  check_close(out, reference(
                       tokens, heads, latent, first,
                       [&](std::int64_t t, std::int64_t h, std::int64_t r) {
                         double s = 0;
                         for (std::int64_t i = 0; i < latent; ++i) s += static_cast<double>(ql[(t * heads + h) * latent + i]) * cache[r * latent + i];
                         for (std::int64_t i = 0; i < rope; ++i) s += static_cast<double>(qr[(t * heads + h) * rope + i]) * rope_cache[r * rope + i];
                         return scale * s;
                       },
                       [&](std::int64_t, std::int64_t r, std::int64_t i) { return cache[r * latent + i]; }));
}
