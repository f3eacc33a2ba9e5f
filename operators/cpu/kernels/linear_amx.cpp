// linear(): the AMX variant (compiled with -mamx-tile -mamx-bf16 besides the AVX-512 flags; called
// only after isa_supported(Isa::amx)). Where linear.cpp rounds x to bf16 (LinearProblem::x_tiles:
// bf16 weights and at least kAmxTokens tokens, cpu::linear_rounds_x), one tdpbf16ps multiplies a
// 16 x 32 tile of weight rows by a 32 x 16 tile of tokens into a 16 x 16 f32 tile: 8192 products an
// instruction, where an AVX-512 FMA does 16. Every other call runs the AVX-512 variant unchanged.
//
// The weights are tile A, read in place (16 rows of 32 bf16 values, the row length as the stride):
// no repacking of the checkpoint's bytes. The tokens are tile B, which AMX wants in pairs along k
// ("VNNI": row r holds k = 2r and 2r + 1 of 16 tokens); linear.cpp writes x in that layout once a
// call (x_tiles), shared by every thread. Products of two bf16 values are exact in f32 and the tile
// accumulates in f32, so only x's rounding and the f32 sums err. Rows past the last and inputs past
// a multiple of 32 come from a zero-padded copy of the tile, never from memory past the matrix.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "operators/cpu/kernels/linear_kernels.h"
#include "operators/cpu/kernels/quant_dot.h"

namespace switchyard::cpu::detail {
namespace {

constexpr int kTileRows = 16;       // weight rows of tile A, tokens of tile B, rows of C
constexpr int kTilePairs = 32;      // bf16 values along k in a row of tile A (64 bytes)

// The tile registers' shapes: palette 1, every tile 16 rows of 64 bytes. Tiles 0-3: C (2 weight
// tiles x 2 token tiles); 4, 5: A (weights); 6, 7: B (tokens).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig config;
  for (int i = 0; i < 8; ++i) {
    config.bytes_per_row[i] = 64;
    config.rows[i] = kTileRows;
  }
  _tile_loadconfig(&config);
}

// Each call loads the tiles' configuration and releases the tiles at its end, so that no thread
// leaves AMX state in use behind it.
class TileSession {
 public:
  TileSession() { configure_tiles(); }
  ~TileSession() { _tile_release(); }
  TileSession(const TileSession&) = delete;
  TileSession& operator=(const TileSession&) = delete;
};

// Tile A for weight rows [row, row + 16) and inputs [k, k + 32): in place when whole, else a
// zero-padded copy in `pad` (stride 64 bytes). Returns the address and stride to load from.
struct TileSource {
  const void* base;
  std::int64_t stride;
};
TileSource weight_tile(const LinearProblem& p, std::int64_t row, std::int64_t k, std::uint16_t* pad) {
  const auto* weight = static_cast<const std::uint16_t*>(p.weight);
  // Row r's values from k on: row-major, or chunk-major (k a multiple of 32 there).
  const bool chunked = p.weight_chunk_rows != 0;
  const std::int64_t row_bytes = chunked ? 64 : p.in * 2;
  auto at = [&](std::int64_t r) { return chunked ? weight + ((k / kTilePairs) * p.weight_chunk_rows + r) * kTilePairs : weight + r * p.in + k; };
  if (row + kTileRows <= p.out && k + kTilePairs <= p.in) return {at(row), row_bytes};
  std::memset(pad, 0, kTileRows * 64);
  const std::int64_t rows = p.out - row < kTileRows ? p.out - row : kTileRows;
  const std::int64_t count = p.in - k < kTilePairs ? p.in - k : kTilePairs;
  for (std::int64_t r = 0; r < rows; ++r) std::memcpy(pad + r * kTilePairs, at(row + r), count * 2);
  return {pad, 64};
}

// C tile (16 weight rows x 16 tokens, f32) into y[token][row], the rows and tokens that exist.
void store_tile(const LinearProblem& p, int tile, std::int64_t row, std::int64_t token, float* scratch) {
  switch (tile) {
    case 0: _tile_stored(0, scratch, 64); break;
    case 1: _tile_stored(1, scratch, 64); break;
    case 2: _tile_stored(2, scratch, 64); break;
    default: _tile_stored(3, scratch, 64); break;
  }
  const std::int64_t rows = p.out - row < kTileRows ? p.out - row : kTileRows;
  const std::int64_t tokens = p.tokens - token < kTileRows ? p.tokens - token : kTileRows;
  store_c_tile_avx512(scratch, rows, tokens, p.y + token * p.out + row, p.out);
}

// Rows [block.row_begin, block.row_end) (multiples of 16 apart from the matrix's end) for every
// token of the call, 32 rows x 32 tokens at a time, over the whole input dimension.
void amx_block(const LinearProblem& p, const LinearBlock& block) {
  const TileSession tiles;
  const std::int64_t chunks = (p.in + kTilePairs - 1) / kTilePairs;
  const std::int64_t token_tiles = (p.tokens + kTileRows - 1) / kTileRows;
  alignas(64) std::uint16_t pad[2][kTileRows * kTilePairs];
  alignas(64) float scratch[kTileRows * kTileRows];
  const std::uint32_t* x_tiles = p.x_tiles;  // [token tile][chunk][16 pair rows][16 tokens]
  const std::int64_t tile_values = kTileRows * kTileRows;  // words a tile
  for (std::int64_t row = block.row_begin; row < block.row_end; row += 2 * kTileRows) {
    const bool two_rows = row + kTileRows < block.row_end;
    for (std::int64_t tt = 0; tt < token_tiles; tt += 2) {
      const bool two_tokens = tt + 1 < token_tiles;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t k = c * kTilePairs;
        const TileSource a0 = weight_tile(p, row, k, pad[0]);
        _tile_loadd(4, a0.base, a0.stride);
        _tile_loadd(6, x_tiles + (tt * chunks + c) * tile_values, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (two_tokens) {
          _tile_loadd(7, x_tiles + ((tt + 1) * chunks + c) * tile_values, 64);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (two_rows) {
          const TileSource a1 = weight_tile(p, row + kTileRows, k, pad[1]);
          _tile_loadd(5, a1.base, a1.stride);
          _tile_dpbf16ps(2, 5, 6);
          if (two_tokens) _tile_dpbf16ps(3, 5, 7);
        }
      }
      store_tile(p, 0, row, tt * kTileRows, scratch);
      if (two_tokens) store_tile(p, 1, row, (tt + 1) * kTileRows, scratch);
      if (two_rows) store_tile(p, 2, row + kTileRows, tt * kTileRows, scratch);
      if (two_rows && two_tokens) store_tile(p, 3, row + kTileRows, (tt + 1) * kTileRows, scratch);
    }
  }
}

}  // namespace

void linear_block_amx(const LinearProblem& problem, const LinearBlock& block) {
  if (problem.x_tiles != nullptr) return amx_block(problem, block);
  linear_block_avx512(problem, block);
}

// Block-type weights: x's tiles against bf16 panels of the dequantised rows, written in one pass
// by AVX512-BF16 (Isa::amx requires it), or (no tiles: decode) the AVX-512 VNNI integer products.
void quant_linear_block_amx(const LinearProblem& problem, const LinearBlock& block) {
  if (problem.x_tiles == nullptr) return quant_linear_block_avx512(problem, block);
  quant_tiles_block_bf16(problem, block, dequantize_rows_bf16_avx512, linear_block_amx);
}

}  // namespace switchyard::cpu::detail
