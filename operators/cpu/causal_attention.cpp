#include "operators/cpu/causal_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace switchyard::cpu {
namespace {

float dot(const float* a, const float* b, std::int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
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
void weighted_sum(const float* p, std::int64_t n, const float* values, std::int64_t stride, std::int64_t dim,
                  float* out) {
  std::fill(out, out + dim, 0.0f);
  for (std::int64_t r = 0; r < n; ++r) {
    const float w = p[r];
    const float* row = values + r * stride;
#pragma omp simd
    for (std::int64_t i = 0; i < dim; ++i) out[i] += w * row[i];
  }
}

}  // namespace

void gqa_attention(const float* q, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                   const float* k_cache, const float* v_cache, std::int64_t kv_heads, std::int64_t first_position,
                   float scale, float* out) {
  const std::int64_t group = heads / kv_heads;
  const std::int64_t kv_stride = kv_heads * head_dim;
  // Work: every (token, head) reads its visible cache rows once.
  const bool parallel = tokens * heads * (first_position + tokens) * head_dim > (1 << 18);
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<std::size_t>(first_position + tokens));
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t visible = first_position + t + 1;
        const float* query = q + (t * heads + h) * head_dim;
        const std::int64_t kv = h / group;
        for (std::int64_t r = 0; r < visible; ++r)
          scores[static_cast<std::size_t>(r)] = scale * dot(query, k_cache + r * kv_stride + kv * head_dim, head_dim);
        softmax_in_place(scores.data(), visible);
        weighted_sum(scores.data(), visible, v_cache + kv * head_dim, kv_stride, head_dim,
                     out + (t * heads + h) * head_dim);
      }
  }
}

void mla_attention(const float* q_latent, const float* q_rope, std::int64_t tokens, std::int64_t heads,
                   std::int64_t latent_dim, std::int64_t rope_dim, const float* latent_cache, const float* rope_cache,
                   std::int64_t first_position, float scale, float* out_latent) {
  const bool parallel = tokens * heads * (first_position + tokens) * (latent_dim + rope_dim) > (1 << 18);
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<std::size_t>(first_position + tokens));
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t visible = first_position + t + 1;
        const float* ql = q_latent + (t * heads + h) * latent_dim;
        const float* qr = q_rope + (t * heads + h) * rope_dim;
        for (std::int64_t r = 0; r < visible; ++r)
          scores[static_cast<std::size_t>(r)] =
              scale * (dot(ql, latent_cache + r * latent_dim, latent_dim) + dot(qr, rope_cache + r * rope_dim, rope_dim));
        softmax_in_place(scores.data(), visible);
        weighted_sum(scores.data(), visible, latent_cache, latent_dim, latent_dim,
                     out_latent + (t * heads + h) * latent_dim);
      }
  }
}

}  // namespace switchyard::cpu
