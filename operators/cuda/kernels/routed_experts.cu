#include "operators/cuda/kernels/routed_experts.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/widen.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/kernels/grouped_gemm.h"
#include "operators/cuda/kernels/quant_gemv.h"
#include "operators/cuda/kernels/routed_experts_blocks.h"
#include "operators/cuda/kernels/routed_experts_decode.cuh"
#include "operators/cuda/kernels/silu_and_mul.h"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

using decode_experts::kWarp;
using decode_experts::valid_expert;
// Decode kernels: 8 warps a block; each lane keeps kUnroll 16-byte loads in flight per weight row
// (kernel 1 reads two rows at once), 2-4 KiB a warp, so that a few warps per SM cover HBM latency.
constexpr int kDecodeThreads = decode_experts::kThreads;
constexpr int kDecodeWarps = decode_experts::kWarps;
constexpr int kUnroll = 4;
constexpr int kElementwiseThreads = 256;
constexpr int kScanThreads = 1024;
constexpr int kPlaceThreads = 256;
constexpr std::size_t kWorkspaceAlignment = 256;

// ---- device helpers ------------------------------------------------------------------------------

__device__ inline float to_float(float value) { return value; }
__device__ inline float to_float(unsigned short bits) { return bf16_to_float(bits); }

// Weights per 16-byte load: 8 bf16 (stored as unsigned short) or 4 f32.
template <typename W>
constexpr int kVectorElements = 16 / static_cast<int>(sizeof(W));

// The floats of x that meet one 16-byte vector of weights: 8 for bf16 (a, b), 4 for f32 (a).
struct XVector {
  float4 a, b;
};

template <typename W>
__device__ inline XVector load_x(const float* x) {  // x: 16-byte aligned
  XVector v;
  v.a = __ldg(reinterpret_cast<const float4*>(x));
  if constexpr (sizeof(W) == 2) v.b = __ldg(reinterpret_cast<const float4*>(x + 4));
  return v;
}

// acc plus the dot product of 16 bytes of weights with their x. A 32-bit word holds bf16
// elements 2j (low half) and 2j + 1 (high half).
template <typename W>
__device__ inline float fma_vector(uint4 w, const XVector& x, float acc) {
  if constexpr (sizeof(W) == 4) {
    acc = fmaf(__uint_as_float(w.x), x.a.x, acc);
    acc = fmaf(__uint_as_float(w.y), x.a.y, acc);
    acc = fmaf(__uint_as_float(w.z), x.a.z, acc);
    acc = fmaf(__uint_as_float(w.w), x.a.w, acc);
  } else {
    acc = fmaf(__uint_as_float(w.x << 16), x.a.x, acc);
    acc = fmaf(__uint_as_float(w.x & 0xffff0000u), x.a.y, acc);
    acc = fmaf(__uint_as_float(w.y << 16), x.a.z, acc);
    acc = fmaf(__uint_as_float(w.y & 0xffff0000u), x.a.w, acc);
    acc = fmaf(__uint_as_float(w.z << 16), x.b.x, acc);
    acc = fmaf(__uint_as_float(w.z & 0xffff0000u), x.b.y, acc);
    acc = fmaf(__uint_as_float(w.w << 16), x.b.z, acc);
    acc = fmaf(__uint_as_float(w.w & 0xffff0000u), x.b.w, acc);
  }
  return acc;
}

// Weights are read once per use: load them past L1 with evict-first, so x and h stay cached.
__device__ inline uint4 load_weights(const uint4* address) { return __ldcs(address); }

// The warp's dot products of one weight row ([n]) with x ([n]), returned to every lane.
// kVector: n is a multiple of kVectorElements<W>, row and x 16-byte aligned.
template <typename W, bool kVector>
__device__ float row_dot(const W* row, const float* x, std::int64_t n, int lane) {
  float acc = 0.0f;
  if constexpr (kVector) {
    constexpr int kElements = kVectorElements<W>;
    const auto* w = reinterpret_cast<const uint4*>(row);
    const std::int64_t vectors = n / kElements;
    std::int64_t i = lane;
    for (; i + kWarp * (kUnroll - 1) < vectors; i += kWarp * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) v[j] = load_weights(w + i + kWarp * j);
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) acc = fma_vector<W>(v[j], load_x<W>(x + (i + kWarp * j) * kElements), acc);
    }
    for (; i < vectors; i += kWarp) acc = fma_vector<W>(load_weights(w + i), load_x<W>(x + i * kElements), acc);
  } else {
#pragma unroll 4
    for (std::int64_t i = lane; i < n; i += kWarp) acc = fmaf(to_float(row[i]), x[i], acc);
  }
  return warp_sum(acc);
}

struct GateUp {
  float gate, up;
};

// row_dot for two rows against the same x, their loads interleaved.
template <typename W, bool kVector>
__device__ GateUp two_row_dots(const W* gate_row, const W* up_row, const float* x, std::int64_t n, int lane) {
  float gate = 0.0f, up = 0.0f;
  if constexpr (kVector) {
    constexpr int kElements = kVectorElements<W>;
    const auto* g = reinterpret_cast<const uint4*>(gate_row);
    const auto* u = reinterpret_cast<const uint4*>(up_row);
    const std::int64_t vectors = n / kElements;
    std::int64_t i = lane;
    for (; i + kWarp * (kUnroll - 1) < vectors; i += kWarp * kUnroll) {
      uint4 gv[kUnroll], uv[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        gv[j] = load_weights(g + i + kWarp * j);
        uv[j] = load_weights(u + i + kWarp * j);
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const XVector xj = load_x<W>(x + (i + kWarp * j) * kElements);
        gate = fma_vector<W>(gv[j], xj, gate);
        up = fma_vector<W>(uv[j], xj, up);
      }
    }
    for (; i < vectors; i += kWarp) {
      const XVector xi = load_x<W>(x + i * kElements);
      gate = fma_vector<W>(load_weights(g + i), xi, gate);
      up = fma_vector<W>(load_weights(u + i), xi, up);
    }
  } else {
#pragma unroll 4
    for (std::int64_t i = lane; i < n; i += kWarp) {
      const float xi = x[i];
      gate = fmaf(to_float(gate_row[i]), xi, gate);
      up = fmaf(to_float(up_row[i]), xi, up);
    }
  }
  return {warp_sum(gate), warp_sum(up)};
}


// ---- decode kernels ------------------------------------------------------------------------------

// Kernel 1: decode_experts::gate_up_rows over rows of W.
// gate, up: [experts, inter, hidden]; x: [tokens, hidden]; ids: [slots]; h: [slots, inter].
template <typename W, bool kVector>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_gate_up(const W* gate, const W* up, std::int64_t experts, std::int64_t hidden, std::int64_t inter,
                   const float* x, const std::int32_t* ids, int top_k, float* h) {
  begin_after_previous_grid();
  decode_experts::gate_up_rows(
      [&](std::int32_t expert, std::int64_t row, std::int64_t token, int lane) {
        const std::int64_t offset = (std::int64_t{expert} * inter + row) * hidden;
        const GateUp dots = two_row_dots<W, kVector>(gate + offset, up + offset, x + token * hidden, hidden, lane);
        return decode_experts::GateUpDots{dots.gate, dots.up};
      },
      experts, inter, ids, top_k, h);
}

// Kernel 2. grid (ceil(hidden / rows_per_block), tokens): decode_experts::down_rows with
// down_e[row] . h[slot] as each task's dot product.
// down: [experts, hidden, inter]; h: [slots, inter]; ids, weights: [tokens * top_k]; out: [tokens, hidden].
template <typename W, bool kVector>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_down(const W* down, std::int64_t experts, std::int64_t hidden, std::int64_t inter, const float* h,
                const std::int32_t* ids, const float* weights, int top_k, int rows_per_block, float* out) {
  begin_after_previous_grid();
  decode_experts::down_rows(
      [&](std::int32_t expert, std::int64_t row, std::int64_t slot, int lane) {
        return row_dot<W, kVector>(down + (std::int64_t{expert} * hidden + row) * inter, h + slot * inter, inter, lane);
      },
      experts, hidden, ids, weights, top_k, rows_per_block, out);
}

// ---- prefill kernels -----------------------------------------------------------------------------

// counts[e] (zeroed before): the number of slots routed to expert e.
__global__ void count_slots(const std::int32_t* ids, std::int64_t slots, std::int64_t experts,
                            std::int32_t* counts) {
  begin_after_previous_grid();
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < slots;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int32_t expert = ids[i];
    if (valid_expert(expert, experts)) atomicAdd(counts + expert, 1);
  }
}

// The exclusive prefix sum over the block's threads of `own` (kScanThreads of them; a
// Hillis-Steele scan in `sums`); *total gets the sum of all.
__device__ std::int32_t exclusive_scan(std::int32_t own, std::int32_t* sums, std::int32_t* total) {
  const int i = threadIdx.x;
  __syncthreads();  // sums may be in use from an earlier scan
  sums[i] = own;
  __syncthreads();
  for (int stride = 1; stride < kScanThreads; stride *= 2) {
    const std::int32_t add = i >= stride ? sums[i - stride] : 0;
    __syncthreads();
    sums[i] += add;
    __syncthreads();
  }
  *total = sums[kScanThreads - 1];
  return sums[i] - own;
}

// One block of kScanThreads. offsets[e] = sum of counts[0, e); offsets[experts] = the total.
// tile_first[e] likewise sums ceil(counts / kGroupedTileRows): the grouped GEMMs' row tiles.
// Thread i takes a run of consecutive experts; a scan over the runs' sums.
__global__ void __launch_bounds__(kScanThreads)
    scan_counts(const std::int32_t* counts, std::int64_t experts, std::int32_t* offsets,
                std::int32_t* tile_first) {
  begin_after_previous_grid();
  __shared__ std::int32_t sums[kScanThreads];
  const std::int64_t per_thread = (experts + kScanThreads - 1) / kScanThreads;
  const std::int64_t begin = min(threadIdx.x * per_thread, experts);
  const std::int64_t end = min(begin + per_thread, experts);
  auto tiles = [](std::int32_t count) { return (count + kGroupedTileRows - 1) / kGroupedTileRows; };
  std::int32_t own_rows = 0, own_tiles = 0;
  for (std::int64_t e = begin; e < end; ++e) {
    own_rows += counts[e];
    own_tiles += tiles(counts[e]);
  }
  std::int32_t total_rows = 0, total_tiles = 0;
  std::int32_t rows = exclusive_scan(own_rows, sums, &total_rows);
  std::int32_t tile = exclusive_scan(own_tiles, sums, &total_tiles);
  for (std::int64_t e = begin; e < end; ++e) {
    offsets[e] = rows;
    tile_first[e] = tile;
    rows += counts[e];
    tile += tiles(counts[e]);
  }
  if (threadIdx.x == 0) {
    offsets[experts] = total_rows;
    tile_first[experts] = total_tiles;
  }
}

// One block per expert: walks the slots in order, kPlaceThreads at a time, and gives the expert's
// slots the rows offsets[e], offsets[e] + 1, ... in slot order (stable, so deterministic):
// row_of_slot[slot] = row, slot_of_row[row] = slot. row_of_slot is -1 (set before) for slots of
// invalid ids. Stops once all of the expert's slots are placed.
__global__ void __launch_bounds__(kPlaceThreads)
    place_slots(const std::int32_t* ids, std::int64_t slots, const std::int32_t* offsets,
                std::int32_t* row_of_slot, std::int32_t* slot_of_row) {
  begin_after_previous_grid();
  __shared__ int warp_counts[kPlaceThreads / kWarp];
  const auto expert = static_cast<std::int32_t>(blockIdx.x);
  const std::int32_t end = offsets[expert + 1];
  std::int32_t next = offsets[expert];  // the same in every thread throughout
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (std::int64_t base = 0; base < slots && next < end; base += kPlaceThreads) {
    const std::int64_t slot = base + threadIdx.x;
    const bool mine = slot < slots && ids[slot] == expert;
    const unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    std::int32_t row = next + __popc(ballot & ((1u << lane) - 1u)), found = 0;
    for (int w = 0; w < kPlaceThreads / kWarp; ++w) {
      if (w < warp) row += warp_counts[w];
      found += warp_counts[w];
    }
    if (mine && row < end) {  // row < end always, unless ids changed since count_slots
      row_of_slot[slot] = row;
      slot_of_row[row] = static_cast<std::int32_t>(slot);
    }
    next += found;
    __syncthreads();  // warp_counts is rewritten next round
  }
}

__device__ inline void store_as(float* out, float value) { *out = value; }
__device__ inline void store_as(__nv_bfloat16* out, float value) { *out = __float2bfloat16_rn(value); }

// rows[r] = x[slot_of_row[r] / top_k], converted to T (bf16: round to nearest even, as cuda::linear),
// for r < *row_count (read on the device; at most max_rows). x: [tokens, hidden]; rows: [*row_count,
// hidden]. A block copies one row at a time, its threads along the row.
template <typename T>
__global__ void gather_rows(const float* x, std::int64_t hidden, int top_k, const std::int32_t* slot_of_row,
                            const std::int32_t* row_count, std::int64_t max_rows, T* rows) {
  begin_after_previous_grid();
  const std::int64_t count = min(std::int64_t{*row_count}, max_rows);
  for (std::int64_t row = blockIdx.x; row < count; row += gridDim.x) {
    const float* source = x + (slot_of_row[row] / top_k) * hidden;
    T* target = rows + row * hidden;
    for (std::int64_t c = threadIdx.x; c < hidden; c += blockDim.x) store_as(target + c, source[c]);
  }
}

// out[t, c] = sum over k, in slot order, of weights[t, k] * expert_rows[row_of_slot[t, k], c],
// skipping slots of invalid ids (row -1). expert_rows: [rows, hidden]; out: [tokens, hidden]. A
// thread an element (a block a token, threads along its row, ran 40% slower on an H200).
__global__ void combine_slots(const float* expert_rows, std::int64_t hidden, std::int64_t tokens, int top_k,
                              const std::int32_t* row_of_slot, const float* weights, float* out) {
  begin_after_previous_grid();
  const std::int64_t total = tokens * hidden;
  for (std::int64_t n = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; n < total;
       n += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t token = n / hidden, column = n - token * hidden;
    float sum = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      const std::int64_t slot = token * top_k + k;
      const std::int32_t row = row_of_slot[slot];
      if (row >= 0) sum = fmaf(weights[slot], expert_rows[row * hidden + column], sum);
    }
    out[n] = sum;
  }
}

// ---- host side -----------------------------------------------------------------------------------

[[noreturn]] void refuse(const std::string& message) {
  throw std::invalid_argument("cuda::routed_experts: " + message);
}

// Bytes of an element of the gathered x and h: f32 for f32 weights, bf16 otherwise (bf16 weights,
// and blocks, which the prefill dequantizes to bf16).
std::size_t element_bytes(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

// a * b * c, refusing results beyond 2^62 (so that sums of a few stay in std::int64_t and size_t).
std::int64_t checked_product(std::int64_t a, std::int64_t b, std::int64_t c, const std::string& what) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 62;
  if ((a > 0 && b > kLimit / a) || (a * b > 0 && c > kLimit / (a * b))) refuse(what + " is beyond 2^62 bytes");
  return a * b * c;
}

void check_stack(const ExpertStack& stack) {
  const bool floats = stack.dtype == DType::f32 || stack.dtype == DType::bf16;
  if (!floats && !quant_gemv_dtype(stack.dtype))
    refuse(std::string("experts of dtype ") + dtype_name(stack.dtype) +
           " are not supported (f32, bf16 and ggml's block types are)");
  if (floats && stack.down_type() != stack.dtype)
    refuse(std::string("experts of floats must be of one dtype, got ") + dtype_name(stack.dtype) + " and down in " +
           dtype_name(stack.down_type()));
  if (stack.experts < 1 || stack.hidden < 1 || stack.inter < 1)
    refuse("experts, hidden and inter must be at least 1, got " + std::to_string(stack.experts) + ", " +
           std::to_string(stack.hidden) + " and " + std::to_string(stack.inter));
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  if (stack.experts > kIntMax || stack.hidden > kIntMax || stack.inter > kIntMax)
    refuse("experts, hidden and inter must fit cuBLAS's 32-bit sizes, got " + std::to_string(stack.experts) + ", " +
           std::to_string(stack.hidden) + " and " + std::to_string(stack.inter));
  if (!floats)
    if (const std::string why = routed_experts_check_blocks(stack); !why.empty()) refuse(why);
  // Blocks take at most 34 bytes per 32 weights (Q8_0): within 2 bytes a weight, as bf16.
  checked_product(stack.experts * 3, stack.inter * (stack.dtype == DType::f32 ? 4 : 2), stack.hidden,
                  "the expert stack (" + std::to_string(stack.experts) + " experts of 3 * " +
                      std::to_string(stack.inter) + " * " + std::to_string(stack.hidden) + " weights)");
}

// The number of (token, slot) pairs.
std::int64_t check_batch(std::int64_t tokens, int top_k) {
  if (top_k < 1) refuse("top_k must be at least 1, got " + std::to_string(top_k));
  if (tokens < 0) refuse("tokens must not be negative, got " + std::to_string(tokens));
  if (tokens > std::numeric_limits<std::int32_t>::max() / top_k)
    refuse(std::to_string(tokens) + " tokens * top_k " + std::to_string(top_k) +
           " is 2^31 or more; split the batch");
  return tokens * top_k;
}

std::size_t aligned(std::int64_t bytes) {
  const auto size = static_cast<std::size_t>(bytes);
  return (size + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

// Byte offsets into the workspace.
struct DecodeLayout {
  std::size_t h = 0;  // [slots, inter] f32
  std::size_t bytes = 0;
};

struct PrefillLayout {
  std::size_t counts = 0;       // [experts] int32
  std::size_t offsets = 0;      // [experts + 1] int32
  std::size_t tile_first = 0;   // [experts + 1] int32: the grouped GEMMs' row tiles
  std::size_t row_of_slot = 0;  // [slots] int32, -1 for invalid ids
  std::size_t slot_of_row = 0;  // [slots] int32
  // [slots, hidden]: the gathered x (f32, or bf16 in the first half), then down's outputs (f32)
  std::size_t rows = 0;
  std::size_t gate = 0;         // [slots, inter] f32: gate's outputs, then h (f32)
  std::size_t up = 0;           // [slots, inter] f32: up's outputs, then h in bf16 for bf16 weights
  std::size_t dequantized = 0;  // blocks: [2, inter * hidden] bf16, one expert's gate and up, or down
  std::size_t bytes = 0;
};

DecodeLayout decode_layout(const ExpertStack& stack, std::int64_t slots) {
  return {0, aligned(checked_product(slots, stack.inter, 4, "the decode workspace"))};
}

PrefillLayout prefill_layout(const ExpertStack& stack, std::int64_t slots) {
  PrefillLayout layout;
  std::size_t at = 0;
  auto take = [&at](std::int64_t bytes) {
    const std::size_t start = at;
    at += aligned(bytes);
    return start;
  };
  layout.counts = take(stack.experts * 4);
  layout.offsets = take((stack.experts + 1) * 4);
  layout.tile_first = take((stack.experts + 1) * 4);
  layout.row_of_slot = take(slots * 4);
  layout.slot_of_row = take(slots * 4);
  layout.rows = take(checked_product(slots, stack.hidden, 4, "the prefill workspace"));
  layout.gate = take(checked_product(slots, stack.inter, 4, "the prefill workspace"));
  layout.up = take(checked_product(slots, stack.inter, 4, "the prefill workspace"));
  if (is_block_quantized(stack.dtype))
    layout.dequantized = take(checked_product(4, stack.inter, stack.hidden, "the prefill workspace"));
  layout.bytes = at;
  return layout;
}

std::size_t required_bytes(const ExpertStack& stack, std::int64_t slots) {
  return slots <= kDecodeMaxSlots ? decode_layout(stack, slots).bytes : prefill_layout(stack, slots).bytes;
}

// Blocks for the kernels that take a row at a time.
unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65536)); }

unsigned elementwise_blocks(std::int64_t total) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((total + kElementwiseThreads - 1) / kElementwiseThreads, 1, 65536));
}

template <typename W>
void decode(cudaStream_t stream, const ExpertStack& stack, const float* x, std::int64_t tokens,
            const std::int32_t* ids, const float* weights, int top_k, float* out, float* h) {
  const auto* gate = static_cast<const W*>(stack.gate);
  const auto* up = static_cast<const W*>(stack.up);
  const auto* down = static_cast<const W*>(stack.down);
  constexpr int kElements = kVectorElements<W>;
  const std::int64_t slots = tokens * top_k;

  const dim3 gate_up_grid(static_cast<unsigned>((stack.inter + kDecodeWarps - 1) / kDecodeWarps),
                          static_cast<unsigned>(slots));
  if (stack.hidden % kElements == 0 && aligned_16(gate) && aligned_16(up) && aligned_16(x))
    launch_kernel(decode_gate_up<W, true>, gate_up_grid, kDecodeThreads, 0, stream, gate, up, stack.experts,
                  stack.hidden, stack.inter, x, ids, top_k, h);
  else
    launch_kernel(decode_gate_up<W, false>, gate_up_grid, kDecodeThreads, 0, stream, gate, up, stack.experts,
                  stack.hidden, stack.inter, x, ids, top_k, h);

  // lcm(8, top_k) tasks a block: whole rounds of the 8 warps.
  const int rows_per_block = kDecodeWarps / std::gcd(kDecodeWarps, top_k);
  const dim3 down_grid(static_cast<unsigned>((stack.hidden + rows_per_block - 1) / rows_per_block),
                       static_cast<unsigned>(tokens));
  // h rows start at multiples of inter floats in the 256-byte aligned workspace.
  if (stack.inter % kElements == 0 && aligned_16(down))
    launch_kernel(decode_down<W, true>, down_grid, kDecodeThreads, 0, stream, down, stack.experts, stack.hidden,
                  stack.inter, h, ids, weights, top_k, rows_per_block, out);
  else
    launch_kernel(decode_down<W, false>, down_grid, kDecodeThreads, 0, stream, down, stack.experts, stack.hidden,
                  stack.inter, h, ids, weights, top_k, rows_per_block, out);
}

// y[rows, out_features] = input[rows, in_features] W^T for W [out_features, in_features], as
// cuda::linear (column-major Y = W^T X with W and X read as they lie), f32 accumulation and output.
void expert_gemm(DeviceContext& context, cudaDataType type, const void* weight, std::int64_t out_features,
                 std::int64_t in_features, const void* input, std::int64_t rows, float* y) {
  const float alpha = 1.0f, beta = 0.0f;
  const int m = static_cast<int>(out_features), n = static_cast<int>(rows), k = static_cast<int>(in_features);
  SWITCHYARD_CUBLAS_CHECK(cublasGemmEx(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, weight, type, k,
                                       input, type, k, &beta, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
}

// Where the prefill path keeps its temporaries (PrefillLayout's parts of the workspace).
struct PrefillBuffers {
  std::int32_t *counts, *offsets, *tile_first, *row_of_slot, *slot_of_row;
  float *gate_out, *up_out;
  void* rows_in;    // the gathered x
  float* rows_out;  // down's outputs, in the same bytes once x is used
  std::uint16_t* dequantized;  // blocks: one expert's weights in bf16, [2, inter * hidden]
};

// Steps 3-4 with one cuBLAS GEMM per expert and projection, for what the grouped kernels do not
// take (f32 weights, blocks, rows that are not whole 16-byte pieces). Synchronises once, to read
// the groups' sizes to the host. Blocks: each used expert's gate and up, then its down, are
// dequantized to bf16 into b.dequantized just before their GEMMs (queued in order on the one
// stream, so each reuse of the buffer follows the GEMMs that read it).
void per_expert_projections(DeviceContext& context, const ExpertStack& stack, std::int64_t slots,
                            const PrefillBuffers& b) {
  const cudaStream_t stream = context.stream();
  const std::int64_t experts = stack.experts, hidden = stack.hidden, inter = stack.inter;
  std::vector<std::int32_t> first_row(static_cast<std::size_t>(experts + 1));
  context.copy_to_host(first_row.data(), b.offsets, first_row.size() * sizeof(std::int32_t));
  context.synchronize();
  const std::int64_t row_count = first_row.back();
  for (std::int64_t e = 0; e < experts; ++e)
    if (first_row[e] < 0 || first_row[e] > first_row[e + 1])
      throw std::runtime_error("cuda::routed_experts: inconsistent expert offsets on the device");
  if (row_count > slots) throw std::runtime_error("cuda::routed_experts: inconsistent expert offsets on the device");
  if (row_count == 0) return;

  const bool bf16 = stack.dtype != DType::f32;  // bf16 weights or blocks: x and h in bf16
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const std::size_t element = element_bytes(stack.dtype);

  // Expert e's matrix of `rows` x `in` weights of `dtype` at `base`, as the GEMM reads it: in
  // place for floats, dequantized into `scratch` for blocks.
  auto matrix = [&](const void* base, DType dtype, std::int64_t rows, std::int64_t in, std::int64_t e,
                    std::uint16_t* scratch) -> const void* {
    const auto bytes = static_cast<std::size_t>(expert_matrix_bytes(dtype, rows, in));
    const char* at = static_cast<const char*>(base) + static_cast<std::size_t>(e) * bytes;
    if (!is_block_quantized(dtype)) return at;
    dequantize_to_bf16(dtype, at, rows, in, scratch, stream);
    return scratch;
  };
  std::uint16_t* const first_half = b.dequantized;
  std::uint16_t* const second_half = b.dequantized == nullptr ? nullptr : b.dequantized + inter * hidden;

  // 3. gate and up per expert, then h = silu(gate) * up over all rows.
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t first = first_row[e], count = first_row[e + 1] - first;
    if (count == 0) continue;
    const void* input = static_cast<const char*>(b.rows_in) + static_cast<std::size_t>(first * hidden) * element;
    expert_gemm(context, type, matrix(stack.gate, stack.dtype, inter, hidden, e, first_half), inter, hidden, input,
                count, b.gate_out + first * inter);
    expert_gemm(context, type, matrix(stack.up, stack.dtype, inter, hidden, e, second_half), inter, hidden, input,
                count, b.up_out + first * inter);
  }
  silu_and_mul(b.gate_out, b.up_out, row_count * inter, b.gate_out, stream);
  const void* h = b.gate_out;
  if (bf16) {  // h rounded to bf16 into the up half, which is used up
    auto* h_bf16 = reinterpret_cast<__nv_bfloat16*>(b.up_out);
    round_to_bf16(b.gate_out, row_count * inter, reinterpret_cast<std::uint16_t*>(h_bf16), stream);
    h = h_bf16;
  }

  // 4. down per expert, into the rows that held x (every GEMM reading x is queued before).
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t first = first_row[e], count = first_row[e + 1] - first;
    if (count == 0) continue;
    const void* input = static_cast<const char*>(h) + static_cast<std::size_t>(first * inter) * element;
    expert_gemm(context, type, matrix(stack.down, stack.down_type(), hidden, inter, e, first_half), hidden, inter,
                input, count, b.rows_out + first * hidden);
  }
}

void prefill(DeviceContext& context, const ExpertStack& stack, const float* x, std::int64_t tokens,
             const std::int32_t* ids, const float* weights, int top_k, float* out, char* workspace) {
  const cudaStream_t stream = context.stream();
  const std::int64_t slots = tokens * top_k, experts = stack.experts, hidden = stack.hidden, inter = stack.inter;
  const PrefillLayout layout = prefill_layout(stack, slots);
  const PrefillBuffers b{reinterpret_cast<std::int32_t*>(workspace + layout.counts),
                         reinterpret_cast<std::int32_t*>(workspace + layout.offsets),
                         reinterpret_cast<std::int32_t*>(workspace + layout.tile_first),
                         reinterpret_cast<std::int32_t*>(workspace + layout.row_of_slot),
                         reinterpret_cast<std::int32_t*>(workspace + layout.slot_of_row),
                         reinterpret_cast<float*>(workspace + layout.gate),
                         reinterpret_cast<float*>(workspace + layout.up),
                         workspace + layout.rows,
                         reinterpret_cast<float*>(workspace + layout.rows),
                         is_block_quantized(stack.dtype) ? reinterpret_cast<std::uint16_t*>(workspace + layout.dequantized)
                                                         : nullptr};

  // 1. Group the slots by expert: counts, offsets, rows in slot order within each expert.
  SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(b.counts, 0, static_cast<std::size_t>(experts) * 4, stream));
  SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(b.row_of_slot, 0xff, static_cast<std::size_t>(slots) * 4, stream));  // -1
  launch_kernel(count_slots, elementwise_blocks(slots), kElementwiseThreads, 0, stream, ids, slots, experts, b.counts);
  launch_kernel(scan_counts, 1, kScanThreads, 0, stream, b.counts, experts, b.offsets, b.tile_first);
  launch_kernel(place_slots, static_cast<unsigned>(experts), kPlaceThreads, 0, stream, ids, slots, b.offsets,
                b.row_of_slot, b.slot_of_row);

  // 2. Gather x's rows (rounded to bf16 for bf16 weights, as cuda::linear does); the row count is
  // read on the device.
  if (stack.dtype != DType::f32)
    launch_kernel(gather_rows<__nv_bfloat16>, row_blocks(slots), kElementwiseThreads, 0, stream, x, hidden, top_k,
                  b.slot_of_row, b.offsets + experts, slots, static_cast<__nv_bfloat16*>(b.rows_in));
  else
    launch_kernel(gather_rows<float>, row_blocks(slots), kElementwiseThreads, 0, stream, x, hidden, top_k,
                  b.slot_of_row, b.offsets + experts, slots, static_cast<float*>(b.rows_in));

  // 3-4. The bf16 experts of real models (hidden and inter multiples of 8): one grouped launch for
  // gate, up and SwiGLU, one for down; no synchronisation. Their rows start 16-byte aligned: the
  // workspace's parts are 256-byte aligned and rows are multiples of 8 bf16 here.
  if (routed_experts_prefill_is_grouped(stack)) {
    const auto* rows_bf16 = static_cast<const __nv_bfloat16*>(b.rows_in);
    auto* h_bf16 = reinterpret_cast<__nv_bfloat16*>(b.up_out);
    const RowGroups groups{b.offsets, b.tile_first, experts, slots};
    grouped_swiglu(stream, groups, rows_bf16, hidden, static_cast<const __nv_bfloat16*>(stack.gate),
                   static_cast<const __nv_bfloat16*>(stack.up), inter, h_bf16);
    grouped_linear(stream, groups, h_bf16, inter, static_cast<const __nv_bfloat16*>(stack.down), hidden,
                   b.rows_out);
  } else {
    per_expert_projections(context, stack, slots, b);
  }

  // 5. Each token's slots, weighted, in slot order.
  launch_kernel(combine_slots, elementwise_blocks(tokens * hidden), kElementwiseThreads, 0, stream, b.rows_out, hidden,
                tokens, top_k, b.row_of_slot, weights, out);
}

}  // namespace

std::size_t routed_experts_workspace_bytes(const ExpertStack& stack, std::int64_t max_tokens, int top_k) {
  check_stack(stack);
  const std::int64_t slots = check_batch(max_tokens, top_k);
  // Fewer tokens than max_tokens may take the decode path; it never needs more than prefill.
  std::size_t bytes = decode_layout(stack, std::min(slots, kDecodeMaxSlots)).bytes;
  if (slots > kDecodeMaxSlots) bytes = std::max(bytes, prefill_layout(stack, slots).bytes);
  return bytes;
}

bool routed_experts_prefill_is_grouped(const ExpertStack& stack) {
  return stack.dtype == DType::bf16 && grouped_gemm_supported(stack.hidden, stack.gate, stack.up) &&
         grouped_gemm_supported(stack.inter, stack.down);
}

void routed_experts(DeviceContext& context, const ExpertStack& stack, const float* x, std::int64_t tokens,
                    const std::int32_t* ids, const float* weights, int top_k, float* out, void* workspace,
                    std::size_t workspace_bytes) {
  check_stack(stack);
  const std::int64_t slots = check_batch(tokens, top_k);
  if (tokens == 0) return;
  if (stack.gate == nullptr || stack.up == nullptr || stack.down == nullptr)
    refuse("the expert stack has a null weight pointer");
  if (x == nullptr || ids == nullptr || weights == nullptr || out == nullptr)
    refuse("x, ids, weights and out must not be null");
  const std::size_t required = required_bytes(stack, slots);
  if (workspace_bytes < required)
    refuse("the workspace of " + std::to_string(workspace_bytes) + " bytes is smaller than the " +
           std::to_string(required) + " this call needs (" + std::to_string(tokens) + " tokens, top_k " +
           std::to_string(top_k) + "); size it with routed_experts_workspace_bytes");
  if (workspace == nullptr || reinterpret_cast<std::uintptr_t>(workspace) % kWorkspaceAlignment != 0)
    refuse("the workspace must be a non-null, 256-byte aligned device pointer");

  if (slots <= kDecodeMaxSlots) {
    auto* h = static_cast<float*>(workspace);
    if (stack.dtype == DType::bf16)
      decode<unsigned short>(context.stream(), stack, x, tokens, ids, weights, top_k, out, h);
    else if (stack.dtype == DType::f32)
      decode<float>(context.stream(), stack, x, tokens, ids, weights, top_k, out, h);
    else
      routed_experts_decode_blocks(context.stream(), stack, x, tokens, ids, weights, top_k, out, h);
    return;
  }
  prefill(context, stack, x, tokens, ids, weights, top_k, out, static_cast<char*>(workspace));
}

}  // namespace switchyard::cuda
