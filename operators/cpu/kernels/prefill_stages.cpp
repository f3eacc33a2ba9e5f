#include "operators/cpu/kernels/prefill_stages.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "operators/cpu/kernels/isa.h"
#include "operators/cpu/kernels/linear_kernels.h"
#include "operators/cpu/kernels/quant_dot.h"

namespace switchyard::cpu {
namespace {

using detail::DequantizeBf16Fn;
using detail::LinearBlock;
using detail::LinearProblem;
using detail::LinearWeight;

constexpr std::int64_t kPanelRows = 32;  // as the tiles path's panels

using Clock = std::chrono::steady_clock;

struct Panel {
  const PanelSource* matrix;
  std::int64_t first_row, rows;
};

struct Stages {
  DequantizeBf16Fn dequantize;
  void (*tiles)(const LinearProblem&, const LinearBlock&);
  const char* tiles_kernel;
};

// Each stage as this CPU's tiles path runs it: the panels by AVX512-BF16, the products by AMX, or
// by AVX512-BF16's dot products without AMX.
Stages stages_here() {
#if defined(SWITCHYARD_CPU_X86)
  if (isa_supported(Isa::amx)) return {detail::dequantize_rows_bf16_avx512, detail::linear_block_amx, "amx"};
  if (isa_supported(Isa::avx512bf16))
    return {detail::dequantize_rows_bf16_avx512, detail::linear_block_tiles_avx512_bf16, "avx512bf16"};
#endif
  throw std::invalid_argument("time_prefill_stages: this CPU has no tiles prefill (it needs AMX or AVX512-BF16)");
}

}  // namespace

bool prefill_stages_supported() { return isa_supported(Isa::amx) || isa_supported(Isa::avx512bf16); }

PrefillStageTimes time_prefill_stages(std::span<const PanelSource> matrices, std::int64_t tokens) {
  if (tokens < 1) throw std::invalid_argument("time_prefill_stages: tokens must be at least 1");
  std::vector<Panel> panels;
  std::int64_t widest = 0;
  PrefillStageTimes times;
  for (const PanelSource& m : matrices) {
    if (!is_block_quantized(m.dtype) || m.in % dtype_info(m.dtype).block_elements != 0)
      throw std::invalid_argument(std::string("time_prefill_stages: ") + dtype_name(m.dtype) + " rows of " +
                                  std::to_string(m.in) + " are not whole blocks of a block type");
    for (std::int64_t r = 0; r < m.rows; r += kPanelRows) panels.push_back({&m, r, std::min(kPanelRows, m.rows - r)});
    widest = std::max(widest, m.in);
    times.weights += m.rows * m.in;
  }
  times.panels = static_cast<std::int64_t>(panels.size());
  const Stages stages = stages_here();
  times.tiles_kernel = stages.tiles_kernel;
  // x's tiles for each width, from random values: [token tiles][chunks][16 pairs][16 tokens].
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(tokens * widest));
  for (float& v : x) v = normal(random);
  std::map<std::int64_t, detail::AlignedWords> x_tiles;
  const std::int64_t token_tiles = (tokens + 15) / 16;
  for (const PanelSource& m : matrices) {
    if (x_tiles.count(m.in)) continue;
    std::uint32_t* words = x_tiles.emplace(m.in, detail::aligned_words(detail::x_tiles_bytes(tokens, m.in))).first->second.get();
    // x [tokens, widest] read as [tokens, m.in]: the first tokens * m.in values.
    for (std::int64_t t = 0; t < token_tiles; ++t) write_x_tiles(x.data(), tokens, m.in, t, words);
  }
  // One timed pass over every panel; `write` and `multiply` say which stages run.
  auto pass = [&](bool write, bool multiply) {
    const auto start = Clock::now();
#pragma omp parallel
    {
      // The thread's panel (chunk-major) and its y [tokens, 32]; written once before a tiles-only
      // pass, so that pass multiplies finite values that stay in cache.
      std::vector<std::uint16_t> panel(static_cast<std::size_t>(kPanelRows * widest));
      std::vector<float> y(static_cast<std::size_t>(tokens * kPanelRows));
      if (!write && !panels.empty()) {
        const Panel& p = panels.front();
        stages.dequantize(p.matrix->dtype, p.matrix->weight, p.matrix->in, p.rows, panel.data(), kPanelRows);
      }
#pragma omp barrier
#pragma omp for schedule(dynamic, 4)
      for (std::size_t i = 0; i < panels.size(); ++i) {
        const Panel& p = panels[i];
        const PanelSource& m = *p.matrix;
        const auto row_bytes = static_cast<std::int64_t>(storage_bytes(m.dtype, static_cast<std::uint64_t>(m.in)));
        if (write)
          stages.dequantize(m.dtype, static_cast<const std::uint8_t*>(m.weight) + p.first_row * row_bytes, m.in, p.rows,
                            panel.data(), kPanelRows);
        if (multiply) {
          LinearProblem problem{x.data(), tokens, m.in, panel.data(), LinearWeight::bf16, p.rows, y.data()};
          problem.x_tiles = x_tiles.at(m.in).get();
          problem.weight_chunk_rows = kPanelRows;
          stages.tiles(problem, LinearBlock{0, p.rows, 0, tokens});
        }
      }
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  pass(true, true);  // warm-up: pages, thread-local buffers
  times.panels_seconds = pass(true, false);
  times.tiles_seconds = pass(false, true);
  times.both_seconds = pass(true, true);
  return times;
}

}  // namespace switchyard::cpu
