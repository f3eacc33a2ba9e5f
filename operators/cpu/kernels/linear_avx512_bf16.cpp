// The tiles path's product on a CPU with AVX512-BF16 but no AMX (Zen 4, Cooper Lake): the same
// inputs as linear_amx.cpp's tiles (x rounded to bf16 in LinearProblem::x_tiles' layout, the
// weights a bf16 panel, chunk-major or row-major), multiplied by vdpbf16ps, which adds two bf16
// products a lane into f32. Compiled with the AVX-512 and AVX512-BF16 flags; called only after
// isa_supported(Isa::avx512bf16).
//
// Register blocking: kRows weight rows x 16 tokens (one x tile row of 16 tokens' pairs in a
// register, each weight pair broadcast from the panel), two token tiles a pass when the call has
// them, so that each broadcast serves two products: 2 x kRows accumulators + 2 x values. vdpbf16ps
// is the bottleneck here, so the padded lanes of a call's last token tile cost as much as real
// tokens: one of at most 8 tokens runs in 8 lanes.
// GCC 12 warns inside its own AVX-512 headers: _mm512_undefined_* initialise a variable from itself.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "operators/cpu/kernels/linear_kernels.h"
#include "operators/cpu/kernels/quant_dot.h"

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

// A token tile's accumulators: 16 tokens in a zmm, or (a last tile of at most 8 tokens) 8 in a ymm,
// at half the cost where 512-bit instructions run as two 256-bit halves (Zen 4). The lanes past the
// call's tokens compute x's zero padding, so the fewer of them the better.
template <int kLanes>
struct TokenLanes;
template <>
struct TokenLanes<16> {
  using Acc = __m512;
  static Acc zero() { return _mm512_setzero_ps(); }
  // The tokens' words of one pair row of an x tile (64-byte aligned rows).
  static __m512bh load(const std::uint32_t* row) { return std::bit_cast<__m512bh>(_mm512_load_si512(row)); }
  static Acc dot(Acc acc, __m512bh x, __m512i weight_pair) {
    return _mm512_dpbf16_ps(acc, x, std::bit_cast<__m512bh>(weight_pair));
  }
  static void store(float* lanes, Acc acc) { _mm512_store_ps(lanes, acc); }
};
template <>
struct TokenLanes<8> {
  using Acc = __m256;
  static Acc zero() { return _mm256_setzero_ps(); }
  static __m256bh load(const std::uint32_t* row) {
    return std::bit_cast<__m256bh>(_mm256_load_si256(reinterpret_cast<const __m256i*>(row)));
  }
  static Acc dot(Acc acc, __m256bh x, __m512i weight_pair) {
    return _mm256_dpbf16_ps(acc, x, std::bit_cast<__m256bh>(_mm512_castsi512_si256(weight_pair)));
  }
  static void store(float* lanes, Acc acc) { _mm256_store_ps(lanes, acc); }
};

// kCount rows of the panel from `panel_row` (y's rows from `row`) x the token tiles tt (kLanes0
// lanes of it) and, when kLanes1 > 0, tt + 1, over every chunk; y [tokens, out] gets the rows and
// tokens that exist.
template <int kCount, int kLanes0, int kLanes1>
void rows_block(const LinearProblem& p, const PanelWords& w, std::int64_t panel_row, std::int64_t row, std::int64_t tt,
                std::int64_t chunks) {
  constexpr bool kTwo = kLanes1 > 0;
  using T0 = TokenLanes<kLanes0>;
  using T1 = TokenLanes<kTwo ? kLanes1 : 16>;
  typename T0::Acc acc0[kCount];
  typename T1::Acc acc1[kCount];
  for (int i = 0; i < kCount; ++i) {
    acc0[i] = T0::zero();
    if constexpr (kTwo) acc1[i] = T1::zero();
  }
  const std::uint32_t* x0 = p.x_tiles + tt * chunks * 256;
  const std::uint32_t* x1 = x0 + chunks * 256;
  const std::uint16_t* first = w.values + 2 * panel_row * w.row_words;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::uint16_t* chunk = first + 2 * c * w.chunk_words;
    for (std::int64_t pair = 0; pair < kPairs; ++pair) {
      // The tokens' inputs 2 pair, 2 pair + 1 (x_tiles: [token tile][chunk][16 pairs][16 tokens]).
      const auto a0 = T0::load(x0 + (c * kPairs + pair) * 16);
      decltype(T1::load(x1)) a1;
      if constexpr (kTwo) a1 = T1::load(x1 + (c * kPairs + pair) * 16);
      for (int i = 0; i < kCount; ++i) {
        const __m512i b = _mm512_set1_epi32(word_at(chunk + 2 * (i * w.row_words + pair)));
        acc0[i] = T0::dot(acc0[i], a0, b);
        if constexpr (kTwo) acc1[i] = T1::dot(acc1[i], a1, b);
      }
    }
  }
  alignas(64) float lanes[16];
  for (int half = 0; half < (kTwo ? 2 : 1); ++half) {
    const std::int64_t token = (tt + half) * 16;
    const std::int64_t tokens = p.tokens - token < 16 ? p.tokens - token : 16;
    for (int i = 0; i < kCount; ++i) {
      if (half == 0) T0::store(lanes, acc0[i]);
      else T1::store(lanes, acc1[i]);
      for (std::int64_t t = 0; t < tokens; ++t) p.y[(token + t) * p.out + row + i] = lanes[t];
    }
  }
}

template <int kLanes0, int kLanes1>
void rows_dispatch(int count, const LinearProblem& p, const PanelWords& w, std::int64_t panel_row, std::int64_t row,
                   std::int64_t tt, std::int64_t chunks) {
  switch (count) {
#define SWITCHYARD_BF16_ROWS(N) \
  case N: return rows_block<N, kLanes0, kLanes1>(p, w, panel_row, row, tt, chunks);
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
    default: return rows_block<kRows, kLanes0, kLanes1>(p, w, panel_row, row, tt, chunks);
  }
}

}  // namespace

void linear_block_tiles_avx512_bf16(const LinearProblem& p, const LinearBlock& block) {
  if (p.x_tiles == nullptr) return linear_block_avx512(p, block);  // no tiles: the f32 path
  const std::int64_t chunks = (p.in + 31) / 32, token_tiles = (p.tokens + 15) / 16;
  // The last token tile in 8 lanes when it has at most 8 tokens.
  const bool half_last = p.tokens - 16 * (token_tiles - 1) <= 8;
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
      const bool two = tt + 1 < token_tiles;
      const bool half = half_last && tt + (two ? 1 : 0) == token_tiles - 1;  // this pass's last tile
      if (two && half) rows_dispatch<16, 8>(count, p, w, first, row, tt, chunks);
      else if (two) rows_dispatch<16, 16>(count, p, w, first, row, tt, chunks);
      else if (half) rows_dispatch<8, 0>(count, p, w, first, row, tt, chunks);
      else rows_dispatch<16, 0>(count, p, w, first, row, tt, chunks);
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
