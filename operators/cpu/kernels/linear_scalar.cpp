// linear(): the portable variant, for CPUs without AVX2 and as the baseline the tests compare; and
// the portable writer of x's bf16 tiles.
#include <algorithm>

#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/linear_tiling.h"

namespace switchyard::cpu::detail {
namespace {

inline float to_f32(float w) { return w; }
inline float to_f32(Bf16Bits w) { return bf16_to_f32(w.bits); }
inline float to_f32(F16Bits w) { return f16_to_f32(w.bits); }

struct ScalarKernel {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;

  // panel[r * panel_stride + k] = w[r * w_stride + k] as f32.
  template <class W>
  static void widen(const W* w, std::int64_t w_stride, int rows, std::int64_t count, float* panel,
                    std::int64_t panel_stride) {
    for (int r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < count; ++k) panel[r * panel_stride + k] = to_f32(w[r * w_stride + k]);
  }

  template <int Rows, int Tokens, class W>
  static void tile(const TileArgs<W>& a) {
    float acc[Rows][Tokens] = {};
    for (std::int64_t k = 0; k < a.input_count; ++k) {
      for (int r = 0; r < Rows; ++r) {
        const float w = to_f32(a.w[r * a.w_stride + k]);
        for (int t = 0; t < Tokens; ++t) acc[r][t] += w * a.x[t * a.x_stride + k];
      }
    }
    for (int t = 0; t < Tokens; ++t)
      for (int r = 0; r < Rows; ++r) {
        float& out = a.y[t * a.y_stride + r];
        out = a.accumulate ? out + acc[r][t] : acc[r][t];
      }
  }
};

}  // namespace

void linear_block_scalar(const LinearProblem& problem, const LinearBlock& block) {
  linear_block_any<ScalarKernel>(problem, block);
}

namespace {

// The word of LinearProblem::x_tiles that holds input k of token t (k % 2: its half), with `chunks`
// = ceil(in / 32): the layout of linear_kernels.h, which the AMX variant loads a 16 x 16 tile of
// words at a time. (Here, not in that header: an inline function there could be emitted by an
// AVX-512 unit and picked by the linker for this one.)
constexpr std::int64_t x_tile_word(std::int64_t t, std::int64_t k, std::int64_t chunks) {
  return (((t / 16) * chunks + k / 32) * 16 + (k % 32) / 2) * 16 + t % 16;
}

}  // namespace

void write_x_tile_chunks_scalar(const float* x, std::int64_t x_stride, std::int64_t tokens, std::int64_t in,
                                std::int64_t tile, std::int64_t chunk_begin, std::int64_t chunk_end,
                                std::uint32_t* tiles) {
  const std::int64_t chunks = (in + 31) / 32, k_begin = 32 * chunk_begin, k_end = std::min(in, 32 * chunk_end);
  for (std::int64_t c = chunk_begin; c < chunk_end; ++c) {
    std::uint32_t* words = tiles + (tile * chunks + c) * 16 * 16;  // [pair][token]
    std::fill(words, words + 16 * 16, 0u);
  }
  for (std::int64_t t = tile * 16; t < std::min(tokens, tile * 16 + 16); ++t) {
    const float* row = x + t * x_stride - k_begin;  // (row[k] for k in [k_begin, k_end) only)
    for (std::int64_t k = k_begin; k < k_end; k += 2) {
      const std::uint32_t low = f32_to_bf16(row[k]), high = k + 1 < k_end ? f32_to_bf16(row[k + 1]) : 0u;
      tiles[x_tile_word(t, k, chunks)] = low | high << 16;
    }
  }
}

void write_x_tile_scalar(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t tile,
                         std::uint32_t* tiles) {
  write_x_tile_chunks_scalar(x, in, tokens, in, tile, 0, (in + 31) / 32, tiles);
}

}  // namespace switchyard::cpu::detail
