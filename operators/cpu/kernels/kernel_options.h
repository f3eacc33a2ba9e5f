#pragma once
// The CPU kernels' tunable settings: how far ahead they prefetch and how they cut and order their
// work, never what they compute (every setting gives the same bits, as the tests hold). Set once by
// the command line (--cpu_prefetch_bytes, --cpu_tile_block_rows, --cpu_panels_by_row), and again
// by a benchmark between two timings, only while no kernel runs: the kernels read them without a
// lock.
#include <cstdint>
#include <optional>
#include <string>

namespace switchyard::cpu {

struct KernelOptions {
  // How far ahead (bytes) the quantised decode's rows prefetch their weights: 0 for none, else
  // kMinPrefetchBytes to kMaxPrefetchBytes.
  int prefetch_bytes = 2048;
  // The tiles prefill's batches (a prefill's experts) cut a call into blocks of at least this many
  // rows (whole 32-row groups) while the batch keeps its kBlocksPerThread blocks a thread, so that a
  // thread reads an expert's x tiles once per this many rows; 0: each call in up to kBlocksPerThread
  // blocks a thread, as when it runs alone. 0 to kMaxTileBlockRows.
  std::int64_t tile_block_rows = 128;
  // How a chunk-major bf16 panel of dequantised weights is written: a row at a time (its 64-byte
  // pieces a chunk apart), or 8 chunks of every row at a time (8 sequential streams of stores).
  // Unset: a row at a time where AMX is, 8 chunks elsewhere (the faster order on each kind of CPU).
  std::optional<bool> panels_by_row;
};

inline constexpr int kMinPrefetchBytes = 64;
inline constexpr int kMaxPrefetchBytes = 1 << 16;
inline constexpr std::int64_t kMaxTileBlockRows = 1 << 20;

// Why `options` cannot be used (a value out of its range, naming the setting), or "" when it can.
std::string kernel_options_problem(const KernelOptions& options);

// The options the kernels use now; panels_by_row is always set (this CPU's default filled in).
const KernelOptions& kernel_options();
// From now on, process-wide. Only while no kernel runs. Throws std::invalid_argument with
// kernel_options_problem's text for options out of range.
void set_kernel_options(const KernelOptions& options);

}  // namespace switchyard::cpu
