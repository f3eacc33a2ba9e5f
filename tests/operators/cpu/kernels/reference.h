#pragma once
// Plain references for every CPU kernel: straight from the formulas, in double, no blocking, no
// vectors, no threads. Tests compare the kernels with these on fresh random inputs; compiled into
// the test binary only.
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "operators/cpu/kernels/moe_gate.h"
#include "operators/cpu/kernels/rope.h"
#include "operators/cpu/kernels/sampling.h"

namespace switchyard::cpu::reference {

// An element of an f32, bf16 or f16 array, widened exactly.
double element(const void* data, DType dtype, std::int64_t index);

// y = x W^T. x: [tokens, in] f32; weight: [out, in] f32/bf16/f16; y: [tokens, out].
// magnitude (optional, [tokens, out]): sum over k of |x[t,k] * W[o,k]|, the scale that rounding
// errors of the sum are measured against.
void linear(const float* x, std::int64_t tokens, std::int64_t in, const void* weight, DType weight_dtype,
            std::int64_t out, double* y, double* magnitude = nullptr);

// x: [rows, dim]; weight: [dim] f32/bf16; out: [rows, dim].
void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight, DType weight_dtype, double eps,
              double* out);

// out[i] = gate[i] / (1 + e^-gate[i]) * up[i].
void silu_and_mul(const float* gate, const float* up, std::int64_t count, double* out);

// x, out: [rows, n].
void softmax(const float* x, std::int64_t rows, std::int64_t n, double* out);

// RoPE frequencies from the formulas, in double: theta^(-2i/d), and YaRN's blend of that with
// theta^(-2i/d) / factor by a ramp over the correction range, with its attention factor.
std::vector<double> rope_inv_freq_default(int rope_dim, double theta);
std::vector<double> rope_inv_freq_yarn(const YarnConfig& config);
// YaRN's ramp over pair indices: 0 (keep the frequency) at or below `low`, 1 (divide by factor) at
// or above `high`, linear in between.
struct YarnRamp {
  double low, high;
  double at(int i) const;
};
YarnRamp yarn_ramp(const YarnConfig& config);
double yarn_attention_factor(const YarnConfig& config);

// Rotates pair j of each head by position * inv_freq[j] and scales by attention_factor.
// x: [tokens, heads, rope_dim] contiguous; out: same shape; positions: [tokens].
void apply_rope(const float* x, std::int64_t tokens, std::int64_t heads, int rope_dim,
                const std::vector<double>& inv_freq, double attention_factor, const std::int64_t* positions,
                RopeLayout layout, double* out);

// MoE routing by sorting, per the description in moe_gate.h. ids: [tokens, top_k];
// weights: [tokens, top_k]; kept_groups (optional): [tokens, n_group], true for a kept group.
void moe_gate(const MoeGateConfig& config, const float* logits, std::int64_t tokens, std::vector<std::int32_t>& ids,
              std::vector<double>& weights, std::vector<bool>* kept_groups = nullptr);

// The probability of each token [vocab] under temperature, top-k and top-p, following
// transformers' warpers literally: top-k removes logits below the k-th largest; top-p sorts
// ascending and removes tokens whose cumulative probability is <= 1 - top_p, keeping the last.
std::vector<double> sampling_probabilities(const float* logits, std::int64_t vocab, const SamplingParams& params);

}  // namespace switchyard::cpu::reference
