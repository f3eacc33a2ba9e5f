#include "operators/cpu/kernels/kernel_options.h"

#include <stdexcept>

#include "operators/cpu/kernels/isa.h"

namespace switchyard::cpu {
namespace {

KernelOptions resolved(KernelOptions options) {
  // A row at a time where AMX is, 8 chunks at a time elsewhere: the faster order on each.
  if (!options.panels_by_row) options.panels_by_row = isa_supported(Isa::amx);
  return options;
}

KernelOptions& current() {
  static KernelOptions options = resolved(KernelOptions{});
  return options;
}

}  // namespace

std::string kernel_options_problem(const KernelOptions& o) {
  if (o.prefetch_bytes != 0 && (o.prefetch_bytes < kMinPrefetchBytes || o.prefetch_bytes > kMaxPrefetchBytes))
    return "the prefetch distance is " + std::to_string(o.prefetch_bytes) + " bytes; it must be 0 (none) or " +
           std::to_string(kMinPrefetchBytes) + " to " + std::to_string(kMaxPrefetchBytes);
  if (o.tile_block_rows < 0 || o.tile_block_rows > kMaxTileBlockRows)
    return "the tiles' block rows are " + std::to_string(o.tile_block_rows) + "; they must be 0 (off) to " +
           std::to_string(kMaxTileBlockRows);
  return "";
}

const KernelOptions& kernel_options() { return current(); }

void set_kernel_options(const KernelOptions& options) {
  const std::string problem = kernel_options_problem(options);
  if (!problem.empty()) throw std::invalid_argument("CPU kernel options: " + problem);
  current() = resolved(options);
}

}  // namespace switchyard::cpu
