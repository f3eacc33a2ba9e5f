#pragma once
// Rotary position embeddings as transformers computes them, in f32: the frequencies, the cos and
// sin tables and the layouts, which every backend's kernels share (operators/cpu/kernels/rope.h,
// operators/cuda/kernels/rope.h).
//
// Frequencies: inv_freq[i], i in [0, rope_dim/2), and an attention factor that multiplies cos and
// sin (transformers' `attention_scaling`). The f32 arithmetic mirrors transformers step by step
// (`base ** (arange(0, dim, 2) / dim)` in f32, then 1 / that, the YaRN blend as separate f32
// products and sums) so that angles at large positions round the same way theirs do.
//
// Tables: cos and sin of position * inv_freq[i], stored once per frequency, [positions, rope_dim/2].
// transformers' tables repeat them (`cat(freqs, freqs)`); the second half is the same numbers.
//
// Layouts of the rotated part of a head (x0 .. x{d-1}, h = d/2, pair j turned by angle j):
//   half_split                 pair j is (x[j], x[j+h]) in and out: "rotate_half", the NeoX layout
//                              of Llama, Qwen3-MoE, Mixtral, and DeepSeek-V3 with rope_interleave
//                              false.
//   interleaved_to_half_split  pair j is (x[2j], x[2j+1]) in, (x[j], x[j+h]) out: DeepSeek-V3's
//                              `apply_rotary_pos_emb_interleave`, which de-interleaves before
//                              rotate_half, so its output is in half-split order.
//   interleaved                pair j is (x[2j], x[2j+1]) in and out: DeepSeek-V2's complex
//                              multiply (`view_as_complex`), and DeepSeek's own inference code.
// Queries and keys must use the same layout; dot products do not depend on the output order.
#include <cstdint>
#include <optional>
#include <vector>

#include "core/config_fields.h"

namespace switchyard {

// std::invalid_argument unless rope_dim is even and in [2, kMaxRopeDim] (core/config_fields.h: the
// most a config may ask for, which every backend's RoPE kernels take).
void check_rope_dim(int rope_dim);

struct RopeFrequencies {
  std::vector<float> inv_freq;    // [rope_dim / 2]
  float attention_factor = 1.0f;  // multiplies cos and sin
  int rope_dim() const { return static_cast<int>(inv_freq.size() * 2); }
};

// rope_type "default": inv_freq[i] = 1 / theta^(2i / rope_dim); attention factor 1.
RopeFrequencies rope_frequencies_default(int rope_dim, double theta);

// rope_type "yarn" (DeepSeek-V2/V3 rope_scaling), after transformers' `_compute_yarn_parameters`:
// dimensions whose wavelength fits beta_fast turns into the original context keep their
// frequency (extrapolation), those with fewer than beta_slow turns are divided by `factor`
// (interpolation), and a linear ramp blends the dimensions in between.
struct YarnConfig {
  int rope_dim = 64;
  double theta = 10000;
  // rope_scaling.factor. transformers 4.5x recomputed it as max_position_embeddings /
  // original_max_position_embeddings when the latter is given; DeepSeek's configs agree (40).
  double factor = 1;
  double original_max_position_embeddings = 4096;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 0;                       // 0 when the config has none
  double mscale_all_dim = 0;               // 0 when the config has none
  std::optional<double> attention_factor;  // rope_scaling.attention_factor, when given
  bool truncate = true;                    // rope_scaling.truncate: round the ramp ends outward
};
RopeFrequencies rope_frequencies_yarn(const YarnConfig& config);

// YaRN's magnitude correction: 1 for scale <= 1, else 0.1 * mscale * ln(scale) + 1. DeepSeek's
// attention multiplies its softmax scale by yarn_get_mscale(factor, mscale_all_dim)^2; with
// mscale == mscale_all_dim (DeepSeek-V3) the cos/sin attention factor is then exactly 1.
double yarn_get_mscale(double scale, double mscale = 1.0);

// cos, sin: [positions, rope_dim / 2] f32, row p for position first_position + p.
void rope_cos_sin(const RopeFrequencies& frequencies, std::int64_t first_position, std::int64_t positions, float* cos,
                  float* sin);

enum class RopeLayout { half_split, interleaved_to_half_split, interleaved };

}  // namespace switchyard
