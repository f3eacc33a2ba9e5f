// The tiles path's product on a CPU with AVX512-BF16 but no AMX (Zen 4, Cooper Lake): the same
// inputs as linear_amx.cpp's tiles (x rounded to bf16 in LinearProblem::x_tiles' layout, the
// weights a bf16 panel, chunk-major or row-major), multiplied by vdpbf16ps, which adds two bf16
// products a lane into f32. Compiled with the AVX-512 and AVX512-BF16 flags; called only after
// isa_supported(Isa::avx512bf16).
//
// Register blocking: kRows weight rows x 16 tokens (one x tile row of 16 tokens' pairs in a
// register, each weight pair broadcast from the panel), two token tiles a pass when the call has
// them, so that each broadcast serves two products: 2 x kRows accumulators + 2 x values.
// GCC 12 warns inside its own AVX-512 headers: _mm512_undefined_* initialise a variable from itself.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "operators/kernels/cpu/linear_kernels.h"
#include "operators/kernels/cpu/quant_dot.h"

namespace switchyard::cpu::detail {
namespace {

constexpr int kRows = 12;
constexpr std::int64_t kPairs = 16;  // a chunk's 32 inputs

// Where a weight row's input pairs are: word (row, chunk c, pair p) of the panel at
// row * row_words + c * chunk_words + p. The words are pairs of bf16 values, read with memcpy
// (a checkpoint's bf16 rows may be only 2-byte aligned, and the copies are uint16_t objects).
struct PanelWords {
  const std::uint16_t* values;
  std::int64_t row_words, chunk_words;
};

inline int word_at(const std::uint16_t* pair) {
  int word;
  std::memcpy(&word, pair, sizeof word);
  return word;
}

// kCount rows of the panel from `panel_row` (y's rows from `row`) x the token tiles tt (and tt + 1
// when kTwo), over every chunk; y [tokens, out] gets the rows and tokens that exist.
template <int kCount, bool kTwo>
void rows_block(const LinearProblem& p, const PanelWords& w, std::int64_t panel_row, std::int64_t row, std::int64_t tt,
                std::int64_t chunks) {
  __m512 acc0[kCount], acc1[kCount];
  for (int i = 0; i < kCount; ++i) {
    acc0[i] = _mm512_setzero_ps();
    if constexpr (kTwo) acc1[i] = _mm512_setzero_ps();
  }
  const std::uint32_t* x0 = p.x_tiles + tt * chunks * 256;
  const std::uint32_t* x1 = x0 + chunks * 256;
  const std::uint16_t* first = w.values + 2 * panel_row * w.row_words;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::uint16_t* chunk = first + 2 * c * w.chunk_words;
    for (std::int64_t pair = 0; pair < kPairs; ++pair) {
      // 16 tokens' inputs 2 pair, 2 pair + 1 (x_tiles: [token tile][chunk][16 pairs][16 tokens]).
      const __m512bh a0 = std::bit_cast<__m512bh>(_mm512_load_si512(x0 + (c * kPairs + pair) * 16));
      __m512bh a1;
      if constexpr (kTwo) a1 = std::bit_cast<__m512bh>(_mm512_load_si512(x1 + (c * kPairs + pair) * 16));
      for (int i = 0; i < kCount; ++i) {
        const __m512bh b = std::bit_cast<__m512bh>(_mm512_set1_epi32(word_at(chunk + 2 * (i * w.row_words + pair))));
        acc0[i] = _mm512_dpbf16_ps(acc0[i], a0, b);
        if constexpr (kTwo) acc1[i] = _mm512_dpbf16_ps(acc1[i], a1, b);
      }
    }
  }
  alignas(64) float lanes[16];
  for (int half = 0; half < (kTwo ? 2 : 1); ++half) {
    const std::int64_t token = (tt + half) * 16;
    const std::int64_t tokens = p.tokens - token < 16 ? p.tokens - token : 16;
    for (int i = 0; i < kCount; ++i) {
      _mm512_store_ps(lanes, half == 0 ? acc0[i] : acc1[i]);
      for (std::int64_t t = 0; t < tokens; ++t) p.y[(token + t) * p.out + row + i] = lanes[t];
    }
  }
}

template <bool kTwo>
void rows_dispatch(int count, const LinearProblem& p, const PanelWords& w, std::int64_t panel_row, std::int64_t row,
                   std::int64_t tt, std::int64_t chunks) {
  switch (count) {
#define SWITCHYARD_BF16_ROWS(N) \
  case N: return rows_block<N, kTwo>(p, w, panel_row, row, tt, chunks);
    SWITCHYARD_BF16_ROWS(1)
    SWITCHYARD_BF16_ROWS(2)
    SWITCHYARD_BF16_ROWS(3)
    SWITCHYARD_BF16_ROWS(4)
    SWITCHYARD_BF16_ROWS(5)
    SWITCHYARD_BF16_ROWS(6)
    SWITCHYARD_BF16_ROWS(7)
    SWITCHYARD_BF16_ROWS(8)
    SWITCHYARD_BF16_ROWS(9)
    SWITCHYARD_BF16_ROWS(10)
    SWITCHYARD_BF16_ROWS(11)
#undef SWITCHYARD_BF16_ROWS
    default: return rows_block<kRows, kTwo>(p, w, panel_row, row, tt, chunks);
  }
}

}  // namespace

void linear_block_tiles_avx512_bf16(const LinearProblem& p, const LinearBlock& block) {
  if (p.x_tiles == nullptr) return linear_block_avx512(p, block);  // no tiles: the f32 path
  const std::int64_t chunks = (p.in + 31) / 32, token_tiles = (p.tokens + 15) / 16;
  const auto* bits = static_cast<const std::uint16_t*>(p.weight);
  // A row-major matrix whose rows are not whole chunks (bf16 weights of an odd width: tests and
  // toy shapes) is read from zero-padded copies of kRows rows at a time: x's tiles are zero past
  // `in`, but the words past a row are the next row's (or past the matrix), and an odd row length
  // leaves the pairs unaligned.
  const bool copies = p.weight_chunk_rows == 0 && p.in % 32 != 0;
  thread_local std::vector<std::uint16_t> padded;
  if (copies) padded.assign(static_cast<std::size_t>(kRows * chunks * 32), 0);
  const std::uint16_t* values = copies ? padded.data() : bits;
  const PanelWords w = p.weight_chunk_rows != 0 ? PanelWords{values, kPairs, p.weight_chunk_rows * kPairs}
                       : copies                 ? PanelWords{values, chunks * kPairs, kPairs}
                                                : PanelWords{values, p.in / 2, kPairs};
  for (std::int64_t row = block.row_begin; row < block.row_end; row += kRows) {
    const int count = static_cast<int>(block.row_end - row < kRows ? block.row_end - row : kRows);
    const std::int64_t first = copies ? 0 : row;  // the copies hold the block's rows from 0
    if (copies)
      for (int i = 0; i < count; ++i) std::copy_n(bits + (row + i) * p.in, p.in, padded.data() + i * chunks * 32);
    for (std::int64_t tt = 0; tt < token_tiles; tt += 2) {
      if (tt + 1 < token_tiles) rows_dispatch<true>(count, p, w, first, row, tt, chunks);
      else rows_dispatch<false>(count, p, w, first, row, tt, chunks);
    }
  }
}

// Block-type weights: in prefill (x's tiles given) bf16 panels written in one pass, multiplied as
// above; in decode the AVX-512 VNNI integer products (every AVX512-BF16 CPU has VNNI).
void quant_linear_block_avx512_bf16(const LinearProblem& problem, const LinearBlock& block) {
  if (problem.x_tiles == nullptr) return quant_linear_block_avx512(problem, block);
  quant_tiles_block_bf16(problem, block, dequantize_rows_bf16_avx512, linear_block_tiles_avx512_bf16);
}

}  // namespace switchyard::cpu::detail
