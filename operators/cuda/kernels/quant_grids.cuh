#pragma once
// The lattice grids of ggml's IQ1, IQ2 and IQ3 types in device global memory, for quant_rows.cuh's
// decoders: core/quant_grids.h's points from the same numbers (core/quant_grid_values.inc), packed
// the same way (byte j of a point is weight j's value). A decoder reads one 64-bit point, or two
// 32-bit IQ3 points, per 8 weights through the read-only cache, where the tables (33 KiB in all)
// stay.
//
// Each .cu file is compiled on its own (operators/CMakeLists.txt builds no relocatable device
// code), so every file that includes this header holds its own copy; `static` keeps their
// host-side shadows apart at link time.
#include <cstdint>

#include "core/quant_grid_values.inc"

namespace switchyard::cuda {

static __device__ const std::uint64_t kIq2xxsGrid[256] = {SWITCHYARD_IQ2XXS_GRID};
static __device__ const std::uint64_t kIq2xsGrid[512] = {SWITCHYARD_IQ2XS_GRID};
static __device__ const std::uint64_t kIq2sGrid[1024] = {SWITCHYARD_IQ2S_GRID};
static __device__ const std::uint32_t kIq3xxsGrid[256] = {SWITCHYARD_IQ3XXS_GRID};
static __device__ const std::uint32_t kIq3sGrid[512] = {SWITCHYARD_IQ3S_GRID};
static __device__ const std::uint64_t kIq1sGrid[2048] = {SWITCHYARD_IQ1S_GRID};

// Point `index` of a grid of 64-bit points as two little-endian words (weights 0-3, then 4-7).
__device__ inline uint2 grid_point(const std::uint64_t* grid, unsigned index) {
  return __ldg(reinterpret_cast<const uint2*>(grid) + index);
}

// Two 32-bit IQ3 points side by side: weights 0-3 from `first`, 4-7 from `second`.
__device__ inline uint2 grid_points(const std::uint32_t* grid, unsigned first, unsigned second) {
  return make_uint2(__ldg(grid + first), __ldg(grid + second));
}

}  // namespace switchyard::cuda
