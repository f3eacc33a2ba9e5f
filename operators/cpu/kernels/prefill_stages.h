#pragma once
// The tiles prefill on block-type weights (quant_dot.h's tiles path) taken apart for measurement
// (`bench experts --stages`): the bf16 panels written from the blocks alone, the tiles' products
// alone on a panel that stays in cache, and both in turn as the path runs them, each over the same
// 32-row panels of the given matrices, on every thread, as this CPU's tiles path runs them: the
// panels by AVX512-BF16, the products by AMX or (without AMX) AVX512-BF16's dot products.
#include <cstdint>
#include <span>

#include "core/dtype.h"

namespace switchyard::cpu {

// One weight matrix [rows, in] of a block type, in place.
struct PanelSource {
  const void* weight;
  DType dtype;
  std::int64_t rows, in;
};

struct PrefillStageTimes {
  std::int64_t panels = 0;   // 32-row panels in each stage
  std::int64_t weights = 0;  // weights in them
  double panels_seconds = 0;  // bf16 panels from the blocks, nothing multiplied
  double tiles_seconds = 0;   // the products of `tokens` tokens with one cached panel per thread
  double both_seconds = 0;    // each panel written, then multiplied, as the tiles path does
  const char* tiles_kernel = "";  // "amx" or "avx512bf16"
};

// Whether this CPU runs the tiles prefill (AMX or AVX512-BF16), which time_prefill_stages times.
bool prefill_stages_supported();
// `tokens`: tokens a call multiplies (a prefill's tokens an expert), from 1. Every matrix's `in`
// a multiple of its block. Throws std::invalid_argument for a dtype that is not a block type, or
// where prefill_stages_supported() is false.
PrefillStageTimes time_prefill_stages(std::span<const PanelSource> matrices, std::int64_t tokens);

}  // namespace switchyard::cpu
