#pragma once
// Deterministic random weights for test and benchmark checkpoints. Element i of tensor `name`
// depends only on (seed, name, i): a counter-based generator (splitmix64 over a per-tensor key and
// the element's pair index, Box-Muller on each pair), so the bytes are the same whatever the thread
// count or the chunking. Values follow transformers' initialisation of these models.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/dtype.h"
#include "core/module_tree.h"

namespace switchyard {

// transformers' `initializer_range` default for all four families: std of Linear/Embedding weights.
constexpr float kInitializerRange = 0.02f;

struct WeightInit {
  // fp8_tile_scales: a block-scaled FP8 matrix's weight_scale_inv (element t = fp8_tile_scale of
  // tile t, drawn from the weight's own stream key).
  enum class Kind { normal, ones, zeros, fp8_tile_scales };
  Kind kind = Kind::normal;
  float std = kInitializerRange;  // for Kind::normal (mean 0), and the weight's for fp8_tile_scales
  // Kind::normal in rows of row_elements: only rows r with r % peak_every == 0 keep `std`, the
  // others get std * kOffPeakScale (make-model --head_tokens). 0: every row alike.
  std::uint64_t row_elements = 0, peak_every = 0;
  // Block-scaled FP8: the matrix's columns (written as f8_e4m3, element (r, c) divided by the
  // scale of its 128 x 128 tile), or for fp8_tile_scales the tiles per row. 0: not FP8.
  std::uint64_t fp8_columns = 0;
};

// Block-scaled FP8's tile (DeepSeek-V3's weight_block_size [128, 128]).
constexpr std::uint64_t kFp8Tile = 128;
// The inverse scale of tile `tile` (row-major over the tiles) of the FP8 matrix whose stream is
// `key` and whose values have standard deviation `std`: about 4.5 std / 448 (E4M3's largest
// value), varied per tile between 0.75 and 1.25 times that, so that a reader that picks the wrong
// tile reads the wrong values.
float fp8_tile_scale(std::uint64_t key, std::uint64_t tile, float std);
// f32 -> E4M3 ("fn": finite, 448 at most) bits, rounding to nearest even and saturating at +-448.
std::uint8_t e4m3_bits_from_f32(float value);

// The scale of the head rows --head_tokens leaves out: a power of two, so the scaled values are
// the unscaled ones exactly, 64 times smaller.
constexpr float kOffPeakScale = 1.0f / 64;

// How `param` is initialised: normal(0, 0.02) for Linear and Embedding weights, exactly 1 for RMSNorm
// weights. Linear biases and the router's `e_score_correction_bias` are normal(0, 0.02) too, where
// transformers starts them at zero: with zeros, a model run without its biases, or picking experts
// with the bias and weighting them without it, would agree with the right one, and a test could
// not tell them apart.
WeightInit weight_init_for(const Parameter& param);
// The same for `module`'s parameter with make-model's --head_tokens N (0: none): lm_head's weight
// [vocab, hidden] keeps full-scale rows for N evenly spaced tokens only (every vocab / N-th row,
// from 0), so that whatever the hidden state, a few rows far outscore the rest and a greedy
// choice leads the next by a wide margin: runs of one model by two engines then pick the same
// tokens despite their different rounding. Other tensors as weight_init_for(param).
WeightInit weight_init_for(const Module& module, const Parameter& param, std::int64_t head_tokens);

// Key of one tensor's random stream: a hash of the seed and the tensor's full name.
std::uint64_t tensor_stream_key(std::uint64_t seed, std::string_view tensor_name);
// The standard-normal value of element `index` of the stream `key` (before scaling by std).
float standard_normal_at(std::uint64_t key, std::uint64_t index);

// f32 -> bf16 bits, rounding to nearest, ties to even; NaN stays a (quiet) NaN.
std::uint16_t bf16_bits_from_f32(float value);
float f32_from_bf16_bits(std::uint16_t bits);

// Writes elements [first_element, first_element + out.size() / element size) of the tensor as
// `dtype` (f32 or bf16, or f8_e4m3 with init.fp8_columns set; others throw InputError) into `out`,
// in parallel (OpenMP) for large ranges. `out.size()` must be a whole number of elements.
void generate_weight_bytes(const WeightInit& init, std::uint64_t key, DType dtype, std::uint64_t first_element,
                           std::span<std::byte> out);

}  // namespace switchyard
