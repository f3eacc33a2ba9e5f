#include "operators/cuda/kernels/grouped_gemm.h"

#include <algorithm>
#include <cstdint>

#include "operators/cuda/kernels/async_copy.cuh"
#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_facts.h"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

// A block: 8 warps over a tile of 64 rows x 128 weight rows, kDepth deep a step, kStages - 1
// steps in flight (cp.async; the sizes are chosen at the end of this namespace). Warps are 2 x 4,
// each 32 x 32: two m16 by four n8 accumulators.
constexpr int kThreads = 256;
constexpr int kTileRows = kGroupedTileRows;
constexpr int kTileCols = 128;
constexpr int kChunk = 8;  // bf16 per 16-byte copy

// A shared row: kDepth bf16 + 8 of padding (80 or 144 bytes), so that ldmatrix's eight 16-byte
// rows fall on distinct banks.
template <int kDepth>
struct Stage {
  static constexpr int kPitch = kDepth + 8;
  __nv_bfloat16 a[kTileRows][kPitch];  // input rows
  __nv_bfloat16 b[kTileCols][kPitch];  // weight rows
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ inline void load_matrices(unsigned (&r)[4], const void* shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(shared)));
}

__device__ inline void mma_16x8x16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

__device__ inline float silu(float x) { return x / (1.0f + expf(-x)); }

// The block's expert, from tile_first (non-decreasing, tile_first[0] = 0): the last e with
// tile_first[e] <= tile, counted by all lanes of each warp at once. Returns -1 past the last tile.
__device__ inline int expert_of_tile(const std::int32_t* tile_first, int experts, int tile) {
  if (tile >= tile_first[experts]) return -1;
  int below = 0;
  const int lane = threadIdx.x % 32;
#pragma unroll 4
  for (int e = lane; e < experts; e += 32) below += tile_first[e] <= tile;
  return warp_sum(below) - 1;
}

// kSwiGlu: weight rows 0-63 of a tile are gate's rows col0.., 64-127 up's same rows, and each warp
// takes 16 of each, so that gate's and up's sums for one h meet in one thread. Otherwise a tile is
// 128 rows of one weight matrix.
template <bool kSwiGlu, int kDepth, int kStages>
__global__ void __launch_bounds__(kThreads)
    grouped_gemm(const std::int32_t* offsets, const std::int32_t* tile_first, int experts,
                 const __nv_bfloat16* input, int inner, const __nv_bfloat16* weight,
                 const __nv_bfloat16* more_weight, int outer, void* out) {
  begin_after_previous_grid();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  auto* stages = reinterpret_cast<Stage<kDepth>*>(shared_bytes);
  constexpr int kPieces = kDepth / kChunk;  // 16-byte pieces of a shared row
  const int tile = static_cast<int>(blockIdx.x);
  const int expert = expert_of_tile(tile_first, experts, tile);
  if (expert < 0) return;
  const int row_begin = offsets[expert] + (tile - tile_first[expert]) * kTileRows;
  const int rows = min(offsets[expert + 1] - row_begin, kTileRows);
  constexpr int kColsPerTile = kSwiGlu ? kTileCols / 2 : kTileCols;
  const int col0 = static_cast<int>(blockIdx.y) * kColsPerTile;
  const std::size_t matrix = static_cast<std::size_t>(outer) * inner;
  const __nv_bfloat16* first = weight + expert * matrix;
  const __nv_bfloat16* second = kSwiGlu ? more_weight + expert * matrix : first;

  // Each thread's pieces of a stage, kThreads apart: kA of the input tile, kB of the weight tile,
  // all at the same column `piece`.
  constexpr int kA = kTileRows * kPieces / kThreads, kB = kTileCols * kPieces / kThreads;
  const int t = static_cast<int>(threadIdx.x);
  const int piece = (t % kPieces) * kChunk;
  const __nv_bfloat16* a_source[kA];
  bool a_valid[kA];
  int a_row[kA];
  for (int i = 0; i < kA; ++i) {
    a_row[i] = (t + i * kThreads) / kPieces;
    a_valid[i] = a_row[i] < rows;
    a_source[i] = input + static_cast<std::size_t>(a_valid[i] ? row_begin + a_row[i] : 0) * inner;
  }
  const __nv_bfloat16* b_source[kB];
  bool b_valid[kB];
  int b_row[kB];
  for (int i = 0; i < kB; ++i) {
    b_row[i] = (t + i * kThreads) / kPieces;
    int col = col0 + b_row[i];
    const __nv_bfloat16* matrix_rows = first;
    if (kSwiGlu && b_row[i] >= kColsPerTile) {
      col -= kColsPerTile;
      matrix_rows = second;
    }
    b_valid[i] = col < outer;
    b_source[i] = matrix_rows + static_cast<std::size_t>(b_valid[i] ? col : 0) * inner;
  }
  const int steps = (inner + kDepth - 1) / kDepth;
  auto load_stage = [&](int stage, int step) {
    const int k = step * kDepth + piece;
    const bool in = k < inner;
    Stage<kDepth>& s = stages[stage];
#pragma unroll
    for (int i = 0; i < kA; ++i)
      copy_16_async(&s.a[a_row[i]][piece], a_source[i] + (in ? k : 0), a_valid[i] && in);
#pragma unroll
    for (int i = 0; i < kB; ++i)
      copy_16_async(&s.b[b_row[i]][piece], b_source[i] + (in ? k : 0), b_valid[i] && in);
  };

  const int lane = t % 32, warp = t / 32;
  const int warp_m = warp / 4, warp_n = warp % 4;
  // The shared rows of this warp's two pairs of n8 tiles.
  const int pair_row[2] = {kSwiGlu ? warp_n * 16 : warp_n * 32,
                           kSwiGlu ? kColsPerTile + warp_n * 16 : warp_n * 32 + 16};
  float acc[2][4][4] = {};

  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load_stage(s, s);
    commit_copies();
  }
  for (int step = 0; step < steps; ++step) {
    wait_copies<kStages - 2>();
    __syncthreads();
    if (step + kStages - 1 < steps) load_stage((step + kStages - 1) % kStages, step + kStages - 1);
    commit_copies();
    const Stage<kDepth>& s = stages[step % kStages];
#pragma unroll
    for (int k16 = 0; k16 < kDepth; k16 += 16) {
      unsigned a[2][4], b[2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m)
        load_matrices(a[m], &s.a[warp_m * 32 + m * 16 + lane % 16][k16 + (lane / 16) * 8]);
#pragma unroll
      for (int p = 0; p < 2; ++p)
        load_matrices(b[p], &s.b[pair_row[p] + lane % 8 + (lane / 16) * 8][k16 + ((lane / 8) % 2) * 8]);
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < 4; ++n) mma_16x8x16(acc[m][n], a[m], b[n / 2][(n % 2) * 2], b[n / 2][(n % 2) * 2 + 1]);
    }
  }

  // Accumulator q of an m16n8 tile: row lane / 4 (+ 8 for q >= 2), column (lane % 4) * 2 + q % 2.
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int row = warp_m * 32 + m * 16 + lane / 4 + (q / 2) * 8;
      if (row >= rows) continue;
      const std::size_t out_row = static_cast<std::size_t>(row_begin + row) * outer;
      if constexpr (kSwiGlu) {
        // n8 tiles 0, 1 are gate's columns warp_n * 16 + [0, 16), tiles 2, 3 up's same columns.
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          const int col = col0 + warp_n * 16 + n * 8 + (lane % 4) * 2 + q % 2;
          if (col < outer)
            static_cast<__nv_bfloat16*>(out)[out_row + col] =
                __float2bfloat16_rn(silu(acc[m][n][q]) * acc[m][n + 2][q]);
        }
      } else {
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          const int col = col0 + warp_n * 32 + n * 8 + (lane % 4) * 2 + q % 2;
          if (col < outer) static_cast<float*>(out)[out_row + col] = acc[m][n][q];
        }
      }
    }
#endif
}

unsigned row_tiles(const RowGroups& groups) {
  // Each expert's last tile may be partial: at most one tile more per expert than the rows need.
  return static_cast<unsigned>((groups.max_rows + kTileRows - 1) / kTileRows + groups.experts);
}

template <bool kSwiGlu, int kDepth, int kStages>
void launch_grouped(dim3 grid, cudaStream_t stream, const RowGroups& groups, const __nv_bfloat16* input, int inner,
                    const __nv_bfloat16* weight, const __nv_bfloat16* more_weight, int outer, void* out) {
  constexpr std::size_t bytes = kStages * sizeof(Stage<kDepth>);
  const auto kernel = grouped_gemm<kSwiGlu, kDepth, kStages>;
  // Past the default 48 KiB a kernel must opt in (grouped_gemm_supported has checked the device's limit).
  if constexpr (bytes > 48 * 1024) allow_most_dynamic_shared_memory(reinterpret_cast<const void*>(kernel));
  launch_kernel(kernel, grid, kThreads, bytes, stream, groups.offsets, groups.tile_first,
                static_cast<int>(groups.experts), input, inner, weight, more_weight, outer, out);
}

// 64 deep, 4 stages (110.6 KiB of shared memory, 2 blocks an SM): 0.446 ms for V2-Lite's experts
// at 512 tokens against 0.593 ms at 32 deep, 3 stages, on an H200 (docs/performance.md).
constexpr int kDepth = 64;
constexpr int kStages = 4;

}  // namespace

bool grouped_gemm_fits(const DeviceFacts& facts) {
  return facts.compute_capability_major >= 8 &&
         kStages * sizeof(Stage<kDepth>) <= static_cast<std::size_t>(facts.block_shared_optin_bytes);
}

bool grouped_gemm_supported(std::int64_t inner, const void* weights, const void* more_weights) {
  return inner % kChunk == 0 && aligned_16(weights) && aligned_16(more_weights) &&
         grouped_gemm_fits(current_device_facts());
}

void grouped_swiglu(cudaStream_t stream, const RowGroups& groups, const __nv_bfloat16* input, std::int64_t hidden,
                    const __nv_bfloat16* gate, const __nv_bfloat16* up, std::int64_t inter, __nv_bfloat16* h) {
  if (groups.max_rows == 0) return;
  const dim3 grid(row_tiles(groups), static_cast<unsigned>((inter + kTileCols / 2 - 1) / (kTileCols / 2)));
  launch_grouped<true, kDepth, kStages>(grid, stream, groups, input, static_cast<int>(hidden), gate, up,
                                        static_cast<int>(inter), h);
}

void grouped_linear(cudaStream_t stream, const RowGroups& groups, const __nv_bfloat16* input, std::int64_t inner,
                    const __nv_bfloat16* weight, std::int64_t outer, float* out) {
  if (groups.max_rows == 0) return;
  const dim3 grid(row_tiles(groups), static_cast<unsigned>((outer + kTileCols - 1) / kTileCols));
  launch_grouped<false, kDepth, kStages>(grid, stream, groups, input, static_cast<int>(inner), weight, nullptr,
                                         static_cast<int>(outer), out);
}

}  // namespace switchyard::cuda
