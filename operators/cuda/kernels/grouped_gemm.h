#pragma once
// Grouped GEMMs over rows sorted by expert: one launch per projection covers every expert of a
// layer (the routed experts' prefill, routed_experts.h). bf16 tensor cores (mma.sync m16n8k16),
// f32 accumulation. The groups are read on the device, so nothing waits for the host.
//
// Rows [offsets[e], offsets[e + 1]) of the input belong to expert e; weights are stacked
// [experts, out, in] (transformers' [out, in] per expert). Each block takes one tile of
// kGroupedTileRows rows of one expert; tile_first[e] is the first tile of expert e, the exclusive
// prefix sum of ceil(count_e / kGroupedTileRows), and tile_first[experts] their total. The grid is
// sized by max_rows, a bound on offsets[experts]; blocks past the total return at once.
//
// Numerics: bf16 products accumulated in f32 (as cuBLAS's bf16 GEMMs with f32 compute). The
// order of the sums differs from cuBLAS's; each output is the same bits on every call.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace switchyard::cuda {

constexpr int kGroupedTileRows = 64;

struct RowGroups {
  const std::int32_t* offsets = nullptr;     // [experts + 1], device
  const std::int32_t* tile_first = nullptr;  // [experts + 1], device
  std::int64_t experts = 0;
  std::int64_t max_rows = 0;  // offsets[experts] <= max_rows
};

struct DeviceFacts;

// Whether a device can run the grouped kernels: compute capability 8.0 or later (bf16 tensor
// cores) and room for their 110.6 KiB of shared memory a block (an H100 or H200 opts in to 227 KiB,
// an A100 to 163; an RTX 4090, L40 or A6000 to 99, too little).
bool grouped_gemm_fits(const DeviceFacts& facts);

// Whether the grouped kernels take these weights on the current device: grouped_gemm_fits, the
// inner dimension a multiple of 8 and the weights 16-byte aligned (rows are read in 16-byte pieces;
// the caller's input must start 16-byte aligned too). Callers use their own path otherwise.
bool grouped_gemm_supported(std::int64_t inner, const void* weights, const void* more_weights = nullptr);

// h[r, j] = silu(gate_e[j] . input[r]) * (up_e[j] . input[r]), rounded to bf16, for every row r
// of expert e. input: [rows, hidden]; gate, up: [experts, inter, hidden]; h: [rows, inter].
void grouped_swiglu(cudaStream_t stream, const RowGroups& groups, const __nv_bfloat16* input, std::int64_t hidden,
                    const __nv_bfloat16* gate, const __nv_bfloat16* up, std::int64_t inter, __nv_bfloat16* h);

// out[r, c] = weight_e[c] . input[r] in f32 for every row r of expert e. input: [rows, inner];
// weight: [experts, outer, inner]; out: [rows, outer].
void grouped_linear(cudaStream_t stream, const RowGroups& groups, const __nv_bfloat16* input, std::int64_t inner,
                    const __nv_bfloat16* weight, std::int64_t outer, float* out);

}  // namespace switchyard::cuda
