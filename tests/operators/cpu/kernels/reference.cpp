#include "tests/operators/cpu/kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <stdexcept>

#include "operators/cpu/kernels/half.h"

namespace switchyard::cpu::reference {

double element(const void* data, DType dtype, std::int64_t index) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(data)[index];
    case DType::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(data)[index]);
    case DType::f16: return f16_to_f32(static_cast<const std::uint16_t*>(data)[index]);
    default: throw std::invalid_argument("reference::element: unsupported dtype");
  }
}

void linear(const float* x, std::int64_t tokens, std::int64_t in, const void* weight, DType weight_dtype,
            std::int64_t out, double* y, double* magnitude) {
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = 0, sum_abs = 0;
      for (std::int64_t k = 0; k < in; ++k) {
        const double product = x[t * in + k] * element(weight, weight_dtype, o * in + k);
        sum += product;
        sum_abs += std::fabs(product);
      }
      y[t * out + o] = sum;
      if (magnitude) magnitude[t * out + o] = sum_abs;
    }
}

void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight, DType weight_dtype, double eps,
              double* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean_square = 0;
    for (std::int64_t i = 0; i < dim; ++i) mean_square += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    mean_square /= static_cast<double>(dim);
    const double scale = 1.0 / std::sqrt(mean_square + eps);
    for (std::int64_t i = 0; i < dim; ++i) out[r * dim + i] = x[r * dim + i] * scale * element(weight, weight_dtype, i);
  }
}

void silu_and_mul(const float* gate, const float* up, std::int64_t count, double* out) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = gate[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))) * up[i];
}

void softmax(const float* x, std::int64_t rows, std::int64_t n, double* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    const double max = *std::max_element(row, row + n);
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - max);
    for (std::int64_t i = 0; i < n; ++i) out[r * n + i] = std::exp(row[i] - max) / sum;
  }
}

std::vector<double> rope_inv_freq_default(int rope_dim, double theta) {
  std::vector<double> inv_freq(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) inv_freq[i] = std::pow(theta, -2.0 * i / rope_dim);
  return inv_freq;
}

YarnRamp yarn_ramp(const YarnConfig& c) {
  // The index at which a frequency makes `turns` full turns over the original context.
  auto dimension_for_turns = [&](double turns) {
    return c.rope_dim * std::log(c.original_max_position_embeddings / (2 * std::numbers::pi * turns)) /
           (2 * std::log(c.theta));
  };
  double low = dimension_for_turns(c.beta_fast), high = dimension_for_turns(c.beta_slow);
  if (c.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, c.rope_dim - 1.0);
  if (high == low) high += 0.001;
  return {low, high};
}

double YarnRamp::at(int i) const { return std::clamp((i - low) / (high - low), 0.0, 1.0); }

std::vector<double> rope_inv_freq_yarn(const YarnConfig& c) {
  const YarnRamp ramp = yarn_ramp(c);
  std::vector<double> inv_freq = rope_inv_freq_default(c.rope_dim, c.theta);
  for (int i = 0; i < c.rope_dim / 2; ++i) {
    const double interpolated_share = ramp.at(i);
    inv_freq[i] = inv_freq[i] * (1 - interpolated_share) + inv_freq[i] / c.factor * interpolated_share;
  }
  return inv_freq;
}

double yarn_attention_factor(const YarnConfig& c) {
  auto mscale_of = [&](double m) { return c.factor <= 1 ? 1.0 : 0.1 * m * std::log(c.factor) + 1.0; };
  if (c.attention_factor) return *c.attention_factor;
  if (c.mscale != 0 && c.mscale_all_dim != 0) return mscale_of(c.mscale) / mscale_of(c.mscale_all_dim);
  return mscale_of(1.0);
}

void apply_rope(const float* x, std::int64_t tokens, std::int64_t heads, int rope_dim,
                const std::vector<double>& inv_freq, double attention_factor, const std::int64_t* positions,
                RopeLayout layout, double* out) {
  const int half = rope_dim / 2;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* in = x + (t * heads + h) * rope_dim;
      double* o = out + (t * heads + h) * rope_dim;
      for (int j = 0; j < half; ++j) {
        const double angle = static_cast<double>(positions[t]) * inv_freq[j];
        const double c = std::cos(angle) * attention_factor, s = std::sin(angle) * attention_factor;
        const int in_a = layout == RopeLayout::half_split ? j : 2 * j;
        const int in_b = layout == RopeLayout::half_split ? j + half : 2 * j + 1;
        const int out_a = layout == RopeLayout::interleaved ? 2 * j : j;
        const int out_b = layout == RopeLayout::interleaved ? 2 * j + 1 : j + half;
        o[out_a] = in[in_a] * c - in[in_b] * s;
        o[out_b] = in[in_a] * s + in[in_b] * c;
      }
    }
}

namespace {

// Indices of `values` ordered best first, ties by lower index (a stable sort).
std::vector<int> ranking(const std::vector<double>& values) {
  std::vector<int> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return values[a] > values[b]; });
  return order;
}

}  // namespace

void moe_gate(const MoeGateConfig& c, const float* logits, std::int64_t tokens, std::vector<std::int32_t>& ids,
              std::vector<double>& weights, std::vector<bool>* kept_groups) {
  const int n = c.n_experts;
  ids.assign(tokens * c.top_k, 0);
  weights.assign(tokens * c.top_k, 0);
  if (kept_groups) kept_groups->assign(tokens * c.n_group, true);
  std::vector<double> scores(n), choice(n);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * n;
    if (c.scoring == GateScoring::softmax) {
      softmax(row, 1, n, scores.data());
    } else {
      for (int e = 0; e < n; ++e) scores[e] = 1 / (1 + std::exp(-static_cast<double>(row[e])));
    }
    for (int e = 0; e < n; ++e) choice[e] = scores[e] + (c.score_correction_bias ? c.score_correction_bias[e] : 0.0);

    if (c.group_score != GroupScore::none) {
      const int size = n / c.n_group;
      std::vector<double> group_scores(c.n_group);
      for (int g = 0; g < c.n_group; ++g) {
        std::vector<double> members(choice.begin() + g * size, choice.begin() + (g + 1) * size);
        std::sort(members.begin(), members.end(), std::greater<>());
        group_scores[g] = c.group_score == GroupScore::max ? members[0] : members[0] + members[1];
      }
      const std::vector<int> group_order = ranking(group_scores);
      for (int rank = c.topk_group; rank < c.n_group; ++rank) {
        const int g = group_order[rank];
        if (kept_groups) (*kept_groups)[t * c.n_group + g] = false;
        for (int e = g * size; e < (g + 1) * size; ++e) choice[e] = c.masked_choice;
      }
    }

    const std::vector<int> order = ranking(choice);
    double sum = 0;
    for (int i = 0; i < c.top_k; ++i) {
      const int e = order[i];
      ids[t * c.top_k + i] = e;
      weights[t * c.top_k + i] = c.weights_from_scores ? scores[e] : choice[e];
      sum += weights[t * c.top_k + i];
    }
    for (int i = 0; i < c.top_k; ++i) {
      double& w = weights[t * c.top_k + i];
      if (c.normalize) w /= sum + c.normalize_epsilon;
      if (!c.normalize || c.scale_when_normalized) w *= c.routed_scaling_factor;
    }
  }
}

std::vector<double> sampling_probabilities(const float* logits, std::int64_t vocab, const SamplingParams& params) {
  std::vector<double> p(vocab, 0.0);
  if (params.temperature <= 0 || params.top_k == 1) {
    p[std::max_element(logits, logits + vocab) - logits] = 1;
    return p;
  }
  std::vector<double> scaled(logits, logits + vocab);
  for (double& v : scaled) v /= params.temperature;
  if (params.top_k > 0 && params.top_k < vocab) {
    std::vector<double> sorted = scaled;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const double kth = sorted[params.top_k - 1];
    for (double& v : scaled)
      if (v < kth) v = -INFINITY;
  }
  const double max = *std::max_element(scaled.begin(), scaled.end());
  double sum = 0;
  for (std::int64_t i = 0; i < vocab; ++i) sum += p[i] = std::exp(scaled[i] - max);
  for (double& v : p) v /= sum;
  if (params.top_p < 1) {
    std::vector<std::int64_t> ascending(vocab);
    std::iota(ascending.begin(), ascending.end(), 0);
    std::stable_sort(ascending.begin(), ascending.end(), [&](auto a, auto b) { return p[a] < p[b]; });
    double cumulative = 0;
    for (std::int64_t r = 0; r < vocab; ++r) {
      cumulative += p[ascending[r]];
      if (cumulative <= 1 - static_cast<double>(params.top_p) && r != vocab - 1) p[ascending[r]] = 0;
    }
    sum = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& v : p) v /= sum;
  }
  if (params.min_p > 0) {  // MinPLogitsWarper: below min_p times the top probability, gone
    const double top = *std::max_element(p.begin(), p.end());
    for (double& v : p)
      if (v < params.min_p * top) v = 0;
    sum = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& v : p) v /= sum;
  }
  return p;
}

}  // namespace switchyard::cpu::reference
