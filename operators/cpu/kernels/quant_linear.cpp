// The ISA-independent parts of linear() on quantised weights (quant_dot.h): the prefill paths over
// dequantised weight panels (f32, and bf16 for the tiles).
#include <algorithm>
#include <vector>

#include "operators/cpu/kernels/kept_buffer.h"
#include "operators/cpu/kernels/quant_dot.h"

namespace switchyard::cpu::detail {

namespace {
// Rows dequantised at a time: the f32 kernel streams the block's x once per panel, so larger
// panels read x less often, while 64 rows (1.75 MiB at in = 7168) still sit in L2/L3.
constexpr std::int64_t kPanelRows = 64;
// The tiles paths' panel: the AMX block's two weight tiles a pass, so x's tiles are read once per
// panel.
constexpr std::int64_t kTilesPanelRows = 32;

// The panel paths: rows of the block `panel_rows` at a time dequantised into a thread-local f32
// panel by `dequantize`, or with `dequantize_bf16` into a bf16 one (chunk-major: a tile's 16 rows
// of 32 inputs one KiB in a row, where row-major would put them `in` values apart) that
// `block_fn` reads with x's tiles; multiplied by `block_fn` into a thread-local [tokens, rows] y,
// copied into y. Per thread, grown to the largest problem seen: no allocation per block once warm.
void panel_block(const LinearProblem& p, const LinearBlock& block, DequantizeRowsFn dequantize,
                 DequantizeBf16Fn dequantize_bf16, F32BlockFn block_fn, std::int64_t panel_rows) {
  thread_local std::vector<float> kept_panel, kept_y_panel;
  thread_local std::vector<std::uint16_t> kept_bf16_panel;
  const bool tiles = dequantize_bf16 != nullptr;
  float* const panel = tiles ? nullptr : kept_buffer(kept_panel, panel_rows * p.in);
  std::uint16_t* const bf16_panel = tiles ? kept_buffer(kept_bf16_panel, panel_rows * p.in) : nullptr;
  float* const y_panel = kept_buffer(kept_y_panel, panel_rows * p.tokens);
  const std::int64_t row_bytes = static_cast<std::int64_t>(storage_bytes(p.quant_dtype, static_cast<std::uint64_t>(p.in)));
  for (std::int64_t r0 = block.row_begin; r0 < block.row_end; r0 += panel_rows) {
    const std::int64_t rows = std::min(panel_rows, block.row_end - r0);
    const std::uint8_t* first = static_cast<const std::uint8_t*>(p.weight) + r0 * row_bytes;
    if (tiles) dequantize_bf16(p.quant_dtype, first, p.in, rows, bf16_panel, panel_rows);
    else dequantize(p.quant_dtype, first, p.in, rows, panel);
    // The panel as a problem of `rows` outputs, y [tokens, rows].
    LinearProblem panel_problem{p.x, p.tokens, p.in, panel, LinearWeight::f32, rows, y_panel};
    if (tiles) {
      panel_problem.weight = bf16_panel;
      panel_problem.weight_type = LinearWeight::bf16;
      panel_problem.x_tiles = p.x_tiles;
      panel_problem.weight_chunk_rows = panel_rows;
    }
    block_fn(panel_problem, LinearBlock{0, rows, tiles ? 0 : block.token_begin, tiles ? p.tokens : block.token_end});
    for (std::int64_t t = block.token_begin; t < block.token_end; ++t)
      std::copy_n(y_panel + t * rows, rows, p.y + t * p.out + r0);
  }
}
}  // namespace

void quant_prefill_block(const LinearProblem& p, const LinearBlock& block, DequantizeRowsFn dequantize,
                         F32BlockFn f32_block) {
  panel_block(p, block, dequantize, nullptr, f32_block, kPanelRows);
}

void quant_tiles_block_bf16(const LinearProblem& p, const LinearBlock& block, DequantizeBf16Fn dequantize_bf16,
                            F32BlockFn tiles_block) {
  panel_block(p, block, nullptr, dequantize_bf16, tiles_block, kTilesPanelRows);
}

}  // namespace switchyard::cpu::detail
