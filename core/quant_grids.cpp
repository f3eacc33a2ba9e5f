#include "core/quant_grids.h"

#include "core/quant_grid_values.inc"

namespace switchyard::quant {

const std::uint64_t kIq2xxsGrid[256] = {SWITCHYARD_IQ2XXS_GRID};
const std::uint64_t kIq2xsGrid[512] = {SWITCHYARD_IQ2XS_GRID};
const std::uint64_t kIq2sGrid[1024] = {SWITCHYARD_IQ2S_GRID};
const std::uint32_t kIq3xxsGrid[256] = {SWITCHYARD_IQ3XXS_GRID};
const std::uint32_t kIq3sGrid[512] = {SWITCHYARD_IQ3S_GRID};
const std::uint64_t kIq1sGrid[2048] = {SWITCHYARD_IQ1S_GRID};

}  // namespace switchyard::quant
