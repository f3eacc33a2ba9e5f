#include "operators/kernels/cpu/kernel_variants.h"

#include <cstdlib>
#include <string>

#include "operators/kernels/cpu/isa.h"

namespace switchyard::cpu {
namespace {

KernelVariants read_variants() {
  KernelVariants v;
  if (const char* p = std::getenv("SWITCHYARD_CPU_QUANT_PREFETCH")) {
    const int n = std::atoi(p);
    v.quant_prefetch_bytes = n == 1 ? KernelVariants{}.quant_prefetch_bytes : n <= 0 ? 0 : n < 64 ? 64 : n > (1 << 16) ? 1 << 16 : n;
  }
  if (const char* s = std::getenv("SWITCHYARD_CPU_QK_SIMD_SCALES")) v.qk_simd_scales = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_TILES_F32_PANEL")) v.tiles_f32_panel = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_FRESH_SCRATCH")) v.fresh_scratch = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_TILES_BLOCK_ROWS")) {
    const int n = std::atoi(s);
    v.tiles_block_rows = s[0] == '\0' ? KernelVariants{}.tiles_block_rows : n <= 0 ? 0 : n > (1 << 20) ? 1 << 20 : n;
  }
  if (const char* s = std::getenv("SWITCHYARD_CPU_AMX_KEEP_TILES")) v.amx_keep_tiles = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_AMX_SCALAR_STORE")) v.amx_scalar_store = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_BF16_FULL_TILES")) v.bf16_full_tiles = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_TILES_ROW_MAJOR")) v.tiles_row_major = std::string(s) == "1";
  // A row at a time where AMX is: the Xeon's whole prefill ran 4-9% faster so (docs/performance.md),
  // where the VM's Zen 4 wrote its panels twice as fast 8 chunks at a time.
  v.panels_by_row = isa_supported(Isa::amx);
  if (const char* s = std::getenv("SWITCHYARD_CPU_PANELS_BY_ROW")) v.panels_by_row = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_PANELS_PREFETCH")) v.panels_prefetch = std::string(s) != "0";
  if (const char* s = std::getenv("SWITCHYARD_CPU_EXPERTS_BARRIER")) v.experts_phase_barrier = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_EXPERTS_COMPARE_X")) v.experts_compare_x = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_EXPERTS_GATHER_ROWS")) v.experts_gather_rows = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_EXPERTS_SILU_APART")) v.experts_silu_apart = std::string(s) == "1";
  if (const char* s = std::getenv("SWITCHYARD_CPU_EXPERTS_GATE_UP_APART")) v.experts_gate_up_apart = std::string(s) == "1";
  return v;
}

KernelVariants& variants() {
  static KernelVariants v = read_variants();
  return v;
}

}  // namespace

const KernelVariants& kernel_variants() { return variants(); }
void refresh_kernel_variants() { variants() = read_variants(); }

}  // namespace switchyard::cpu
