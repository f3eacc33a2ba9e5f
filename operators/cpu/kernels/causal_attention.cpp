#include "operators/cpu/kernels/causal_attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace switchyard::cpu {
namespace {

// A cache element widened to f32 (exact for both types; written out so that `omp simd` vectorises it).
inline float widened(float value) { return value; }
inline float widened(std::uint16_t bf16) { return std::bit_cast<float>(std::uint32_t{bf16} << 16); }

template <typename Cache>
float dot(const float* a, const Cache* b, std::int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t i = 0; i < n; ++i) sum += a[i] * widened(b[i]);
  return sum;
}

// probabilities[0..n) = softmax(scores[0..n)), in place.
void softmax_in_place(float* scores, std::int64_t n) {
  const float peak = *std::max_element(scores, scores + n);
  float total = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) total += scores[i] = std::exp(scores[i] - peak);
  const float inverse = 1.0f / total;
  for (std::int64_t i = 0; i < n; ++i) scores[i] *= inverse;
}

// out[0..dim) = sum over rows r < n of p[r] * values[r * stride .. + dim)
template <typename Cache>
void weighted_sum(const float* p, std::int64_t n, const Cache* values, std::int64_t stride, std::int64_t dim,
                  float* out) {
  std::fill(out, out + dim, 0.0f);
  for (std::int64_t r = 0; r < n; ++r) {
    const float w = p[r];
    const Cache* row = values + r * stride;
#pragma omp simd
    for (std::int64_t i = 0; i < dim; ++i) out[i] += w * widened(row[i]);
  }
}

template <typename Cache>
struct ValueRows {
  const Cache* rows;
  std::int64_t stride, dim;
};

// The loop both attention forms share: for every (token, head), score the visible cache rows,
// softmax them, and sum the value rows. score(t, h, row) -> f32; value(t, h) -> ValueRows;
// out(t, h) -> destination.
template <typename Score, typename Value, typename Out>
void attend(std::int64_t tokens, std::int64_t heads, std::int64_t first_position, bool parallel, Score score,
            Value value, Out out) {
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<std::size_t>(first_position + tokens));
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t visible = first_position + t + 1;
        for (std::int64_t r = 0; r < visible; ++r) scores[static_cast<std::size_t>(r)] = score(t, h, r);
        softmax_in_place(scores.data(), visible);
        const auto [rows, stride, dim] = value(t, h);
        weighted_sum(scores.data(), visible, rows, stride, dim, out(t, h));
      }
  }
}

template <typename Cache>
void gqa(const float* q, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim, const Cache* k_cache,
         const Cache* v_cache, std::int64_t kv_heads, std::int64_t first_position, float scale, float* out) {
  const std::int64_t group = heads / kv_heads;
  const std::int64_t kv_stride = kv_heads * head_dim;
  // Work: every (token, head) reads its visible cache rows once.
  const bool parallel = tokens * heads * (first_position + tokens) * head_dim > (1 << 18);
  attend(
      tokens, heads, first_position, parallel,
      [&](std::int64_t t, std::int64_t h, std::int64_t r) {
        return scale * dot(q + (t * heads + h) * head_dim, k_cache + r * kv_stride + (h / group) * head_dim, head_dim);
      },
      [&](std::int64_t, std::int64_t h) {
        return ValueRows<Cache>{v_cache + (h / group) * head_dim, kv_stride, head_dim};
      },
      [&](std::int64_t t, std::int64_t h) { return out + (t * heads + h) * head_dim; });
}

template <typename Cache>
void mla(const float* q_latent, const float* q_rope, std::int64_t tokens, std::int64_t heads, std::int64_t latent_dim,
         std::int64_t rope_dim, const Cache* latent_cache, const Cache* rope_cache, std::int64_t first_position,
         float scale, float* out_latent) {
  const bool parallel = tokens * heads * (first_position + tokens) * (latent_dim + rope_dim) > (1 << 18);
  attend(
      tokens, heads, first_position, parallel,
      [&](std::int64_t t, std::int64_t h, std::int64_t r) {
        return scale * (dot(q_latent + (t * heads + h) * latent_dim, latent_cache + r * latent_dim, latent_dim) +
                        dot(q_rope + (t * heads + h) * rope_dim, rope_cache + r * rope_dim, rope_dim));
      },
      [&](std::int64_t, std::int64_t) { return ValueRows<Cache>{latent_cache, latent_dim, latent_dim}; },
      [&](std::int64_t t, std::int64_t h) { return out_latent + (t * heads + h) * latent_dim; });
}

void require_cache_dtype(DType dtype, const char* name) {
  if (dtype != DType::f32 && dtype != DType::bf16)
    throw std::invalid_argument(std::string(name) + ": caches must be f32 or bf16, not " + dtype_name(dtype));
}

}  // namespace

void gqa_attention(const float* q, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                   const void* k_cache, const void* v_cache, DType cache_dtype, std::int64_t kv_heads,
                   std::int64_t first_position, float scale, float* out) {
  require_cache_dtype(cache_dtype, "cpu::gqa_attention");
  if (cache_dtype == DType::f32)
    gqa(q, tokens, heads, head_dim, static_cast<const float*>(k_cache), static_cast<const float*>(v_cache), kv_heads,
        first_position, scale, out);
  else
    gqa(q, tokens, heads, head_dim, static_cast<const std::uint16_t*>(k_cache),
        static_cast<const std::uint16_t*>(v_cache), kv_heads, first_position, scale, out);
}

void mla_attention(const float* q_latent, const float* q_rope, std::int64_t tokens, std::int64_t heads,
                   std::int64_t latent_dim, std::int64_t rope_dim, const void* latent_cache, const void* rope_cache,
                   DType cache_dtype, std::int64_t first_position, float scale, float* out_latent) {
  require_cache_dtype(cache_dtype, "cpu::mla_attention");
  if (cache_dtype == DType::f32)
    mla(q_latent, q_rope, tokens, heads, latent_dim, rope_dim, static_cast<const float*>(latent_cache),
        static_cast<const float*>(rope_cache), first_position, scale, out_latent);
  else
    mla(q_latent, q_rope, tokens, heads, latent_dim, rope_dim, static_cast<const std::uint16_t*>(latent_cache),
        static_cast<const std::uint16_t*>(rope_cache), first_position, scale, out_latent);
}

}  // namespace switchyard::cpu
