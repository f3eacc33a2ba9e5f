#include "operators/cuda/kernels/attention.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/cache_element.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_facts.h"
#include "operators/cuda/kernels/launch.cuh"

namespace switchyard::cuda {
namespace {

// ---- Tiling ------------------------------------------------------------------------------------
// A block: 8 warps; up to kMaxTileRows query rows; keys through shared memory kTileKeys at a time.
// Scoring: lane = key of the tile; the 8 warps are kDepthSlices slices of the dot product (float4
// columns c = slice, slice + 4, ...) times kRowHalves halves of the query rows (even and odd rows),
// so a thread holds 8 rows' partial dot products of one key and reads each key value once.
// Values: thread = one float4 column chunk of the value width and every value_groups-th row.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTileKeys = 32;  // = the warp width: one key per lane while scoring
constexpr int kMaxTileRows = 16;
constexpr int kDepthSlices = 4;
constexpr int kRowHalves = kWarps / kDepthSlices;
constexpr int kRowsPerScoreThread = kMaxTileRows / kRowHalves;
constexpr int kScoreStride = kTileKeys + 1;  // padded: value threads of one warp read different rows
static_assert(kDepthSlices * kRowHalves == kWarps && kRowsPerScoreThread * kRowHalves == kMaxTileRows);

// ---- Splits --------------------------------------------------------------------------------------
// Splits per call: enough that (query rows x splits) reaches kTargetRowSplits (about 256 blocks of
// 16 rows: two per SM of an H200), at most kMaxSplits (the combine kernel's block), and no more than
// max_context / kMinSplitKeys. At run time each split covers ceil(visible / splits) keys, at least
// kMinSplitKeys (one tile: a decode block then loads its keys in one round of loads), in whole
// tiles; splits past the visible keys exit at once.
constexpr int kMaxSplits = 128;
constexpr std::int64_t kTargetRowSplits = 4096;
constexpr std::int64_t kMinSplitKeys = kTileKeys;

// Limits of the public functions (the shared-memory tile must fit one block).
constexpr std::int64_t kMaxGqaDim = 512;
constexpr std::int64_t kMaxLatentDim = 1024;  // value chunks <= kThreads: one column chunk per thread
constexpr std::int64_t kMaxRopeDim = 128;
static_assert(kMaxLatentDim / 4 <= kThreads && kMaxGqaDim / 4 <= kThreads);

__host__ __device__ constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int round_up_4(int n) { return (n + 3) / 4 * 4; }

// Row stride of the key tile: a multiple of 4 floats with an odd number of 16-byte words, so the 8
// lanes of a quarter-warp reading a float4 at the same column of 8 consecutive rows hit 8 different
// bank groups.
__host__ __device__ constexpr int key_tile_stride(int padded_width) {
  return (padded_width / 4) % 2 == 1 ? padded_width : padded_width + 4;
}

__device__ inline float negative_infinity() { return __int_as_float(0xff800000); }

// Cache rows query token t sees: [0, first + t + 1), clamped to the cache.
__device__ inline std::int64_t visible_keys(std::int64_t first, std::int64_t token, std::int64_t max_context) {
  const std::int64_t keys = first + token + 1;
  return keys < 0 ? 0 : keys > max_context ? max_context : keys;
}

// Keys per split when the last token sees `all_visible` keys. The partial and the combine kernels
// both derive the split boundaries from this, from the same *position.
__device__ inline std::int64_t split_keys(std::int64_t all_visible, int splits) {
  std::int64_t keys = ceil_div(all_visible, splits);
  if (keys < kMinSplitKeys) keys = kMinSplitKeys;
  return ceil_div(keys, kTileKeys) * kTileKeys;
}

// One attention problem in the shape both forms share. Query row r of kv head g is token
// r / group, head g * group + r % group; its query is [q_a row | q_b row] and so is each key:
// [k_a row | k_b row]. GQA: b is empty, values are v. MLA: one kv head (group = heads), a = the
// latent, b = the rope part, and the value of a key is its latent, already in the key tile.
struct AttentionArgs {
  const float* q_a;  // [tokens, heads, dim_a]
  const float* q_b;  // [tokens, heads, dim_b]
  // The caches, of the kernel's cache element type (f32 or bf16, widened into the f32 tiles):
  const void* k_a;   // position p, kv head g at k_a + p * k_a_row + g * k_a_head: dim_a elements
  const void* k_b;   // likewise: dim_b elements
  const void* v;     // likewise: v_dim elements (unused when values_are_k_a)
  std::int64_t k_a_row, k_a_head, k_b_row, k_b_head, v_row, v_head;  // strides in elements
  std::int64_t tokens, heads, group;
  int dim_a, dim_b, v_dim;
  bool values_are_k_a;
  const std::int32_t* position;  // device: the position of the first token
  std::int64_t max_context;
  float scale;
  int splits;
  // Shared-memory tile (floats): query rows [tile_rows, q_stride], keys [kTileKeys, k_stride],
  // values [kTileKeys, v_stride] (none when values_are_k_a), partial scores
  // [kDepthSlices, tile_rows, kScoreStride], then each row's max, sum and rescale factor.
  int tile_rows;
  int padded_a, padded_b, padded_v;  // widths rounded up to 4, zero-filled
  int q_stride, k_stride, v_stride;
  int value_groups;  // threads per value column chunk: kThreads / (padded_v / 4)
  float* out;          // [tokens, heads, v_dim] (splits == 1)
  float* partial_acc;  // [splits, tokens * heads, v_dim], unnormalised (splits > 1)
  float* partial_max;  // [splits, tokens * heads]
  float* partial_sum;  // [splits, tokens * heads]
};

struct SharedLayout {
  int q, k, v, scores, stats, floats;  // offsets in floats (q, k, v: multiples of 4), and the total
};

__host__ __device__ inline SharedLayout shared_layout(const AttentionArgs& a, int tile_rows) {
  SharedLayout l{};
  l.q = 0;
  l.k = l.q + tile_rows * a.q_stride;
  l.v = l.k + kTileKeys * a.k_stride;
  l.scores = l.v + (a.values_are_k_a ? 0 : kTileKeys * a.v_stride);
  l.stats = l.scores + kDepthSlices * tile_rows * kScoreStride;
  l.floats = l.stats + 3 * tile_rows;
  return l;
}

__device__ inline std::int64_t output_row(const AttentionArgs& a, std::int64_t kv_head, std::int64_t row) {
  const std::int64_t token = row / a.group, head = kv_head * a.group + row % a.group;
  return token * a.heads + head;
}

// Loads a thread keeps in flight at once: the kernels are latency-bound at decode sizes, so each
// thread issues a batch of global loads before its first shared-memory store waits on them.
constexpr int kLoadBatch = 6;

// rows x width cache elements from source (row stride source_stride) to shared memory as f32 (row
// stride destination_stride), columns [width, padded_width) zeroed. kVector: width == padded_width
// and source rows aligned to 4 elements (16 bytes of f32, 8 of bf16).
template <bool kVector, typename C>
__device__ void load_rows(float* destination, int destination_stride, const C* __restrict__ source,
                          std::int64_t source_stride, int rows, int width, int padded_width) {
  if constexpr (kVector) {
    const int chunks = width / 4, total = rows * chunks;
    for (int base = threadIdx.x; base < total; base += kLoadBatch * kThreads) {
      float4 staged[kLoadBatch];
#pragma unroll
      for (int u = 0; u < kLoadBatch; ++u) {
        const int i = base + u * kThreads, row = i / chunks, chunk = i - row * chunks;
        if (i < total) staged[u] = load_cache4_read_only(source + row * source_stride + 4 * chunk);
      }
#pragma unroll
      for (int u = 0; u < kLoadBatch; ++u) {
        const int i = base + u * kThreads, row = i / chunks, chunk = i - row * chunks;
        if (i < total) *reinterpret_cast<float4*>(destination + row * destination_stride + 4 * chunk) = staged[u];
      }
    }
  } else {
    const int total = rows * padded_width;
    for (int base = threadIdx.x; base < total; base += kLoadBatch * kThreads) {
      float staged[kLoadBatch];
#pragma unroll
      for (int u = 0; u < kLoadBatch; ++u) {
        const int i = base + u * kThreads, row = i / padded_width, column = i - row * padded_width;
        staged[u] = i < total && column < width ? load_cache_read_only(source + row * source_stride + column) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kLoadBatch; ++u) {
        const int i = base + u * kThreads, row = i / padded_width, column = i - row * padded_width;
        if (i < total) destination[row * destination_stride + column] = staged[u];
      }
    }
  }
}

// The block's query rows [tile_rows, q_stride] into shared memory: [q_a row | q_b row], each part
// zero-padded to a multiple of 4; rows past rows_here are zero and never used. kVector: the widths
// are multiples of 4 and q_a, q_b 16-byte aligned.
template <bool kVector>
__device__ void load_query_rows(const AttentionArgs& a, float* q_tile, std::int64_t kv_head, std::int64_t first_row,
                                int rows_here) {
  const int width = kVector ? 4 : 1;  // floats per element moved
  const int row_elements = a.q_stride / width, a_elements = a.padded_a / width;
  const int total = a.tile_rows * row_elements;
  for (int base = threadIdx.x; base < total; base += kLoadBatch * kThreads) {
    float4 staged[kLoadBatch];
#pragma unroll
    for (int u = 0; u < kLoadBatch; ++u) {
      const int i = base + u * kThreads, r = i / row_elements, e = i - r * row_elements;
      staged[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (i < total && r < rows_here) {
        const std::int64_t row = output_row(a, kv_head, first_row + r);
        if constexpr (kVector) {
          staged[u] = e < a_elements ? __ldg(reinterpret_cast<const float4*>(a.q_a + row * a.dim_a) + e)
                                     : __ldg(reinterpret_cast<const float4*>(a.q_b + row * a.dim_b) + (e - a_elements));
        } else {
          const int column = e;
          if (column < a.dim_a)
            staged[u].x = __ldg(a.q_a + row * a.dim_a + column);
          else if (column >= a.padded_a && column - a.padded_a < a.dim_b)
            staged[u].x = __ldg(a.q_b + row * a.dim_b + (column - a.padded_a));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kLoadBatch; ++u) {
      const int i = base + u * kThreads;
      if (i < total) {
        if constexpr (kVector)
          *reinterpret_cast<float4*>(q_tile + 4 * i) = staged[u];
        else
          q_tile[i] = staged[u].x;
      }
    }
  }
}

// grid: (query tiles, kv heads, splits); block: kThreads; dynamic shared memory: shared_layout.
// Attends the block's query rows to the keys of its split that they see, then writes the output
// (one split) or the partial (several). Every branch on which a __syncthreads depends is uniform
// over the block. C: the caches' element type (float, or std::uint16_t for bf16).
template <bool kVector, typename C>
__global__ void __launch_bounds__(kThreads, 2) attend_split(const AttentionArgs a) {
  begin_after_previous_grid();
  extern __shared__ float4 shared_words[];
  float* shared = reinterpret_cast<float*>(shared_words);
  const SharedLayout layout = shared_layout(a, a.tile_rows);
  float* q_tile = shared + layout.q;
  float* k_tile = shared + layout.k;
  float* v_tile = a.values_are_k_a ? k_tile : shared + layout.v;
  const int v_tile_stride = a.values_are_k_a ? a.k_stride : a.v_stride;
  float* scores = shared + layout.scores;  // slice 0 becomes the tile's probabilities
  float* row_max = shared + layout.stats;
  float* row_sum = row_max + a.tile_rows;
  float* row_rescale = row_sum + a.tile_rows;

  const std::int64_t kv_head = blockIdx.y;
  const int split = static_cast<int>(blockIdx.z);
  const std::int64_t total_rows = a.tokens * a.heads;  // output rows
  const std::int64_t first_row = std::int64_t{blockIdx.x} * a.tile_rows;
  const int rows_here = static_cast<int>(min(std::int64_t{a.tile_rows}, a.tokens * a.group - first_row));

  const std::int64_t first = *a.position;
  const std::int64_t all_visible = visible_keys(first, a.tokens - 1, a.max_context);
  const std::int64_t chunk = split_keys(all_visible, a.splits);
  // One split covers every visible key: split 0 writes the output itself, the combine kernel
  // returns at once (both decide from the same *position).
  const bool single = a.splits == 1 || all_visible <= chunk;
  const std::int64_t last_token = (first_row + rows_here - 1) / a.group;
  const std::int64_t keys_begin = split * chunk;
  const std::int64_t keys_end = min(keys_begin + chunk, visible_keys(first, last_token, a.max_context));

  // Past the visible keys: nothing to do (combine_splits reads no partial of a split that starts
  // past what a row sees). Split 0 of a single-split call still writes (NaN for rows seeing nothing).
  if (keys_begin >= keys_end && !(single && split == 0)) return;

  load_query_rows<kVector>(a, q_tile, kv_head, first_row, rows_here);
  if (threadIdx.x < a.tile_rows) {
    row_max[threadIdx.x] = negative_infinity();
    row_sum[threadIdx.x] = 0.0f;
    row_rescale[threadIdx.x] = 0.0f;
  }
  __syncthreads();

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int slice = warp / kRowHalves, half = warp % kRowHalves;
  const int qk_chunks = (a.padded_a + a.padded_b) / 4;
  const int value_chunks = a.padded_v / 4;
  const int value_group = threadIdx.x / value_chunks, value_chunk = threadIdx.x % value_chunks;
  const bool values_active = value_group < a.value_groups;
  float4 acc[kMaxTileRows];
#pragma unroll
  for (int j = 0; j < kMaxTileRows; ++j) acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  const C* k_a = static_cast<const C*>(a.k_a) + kv_head * a.k_a_head;
  const C* k_b = a.padded_b > 0 ? static_cast<const C*>(a.k_b) + kv_head * a.k_b_head : nullptr;
  const C* v = a.values_are_k_a ? nullptr : static_cast<const C*>(a.v) + kv_head * a.v_head;

  for (std::int64_t tile_begin = keys_begin; tile_begin < keys_end; tile_begin += kTileKeys) {
    const int tile_keys = static_cast<int>(min(std::int64_t{kTileKeys}, keys_end - tile_begin));
    load_rows<kVector>(k_tile, a.k_stride, k_a + tile_begin * a.k_a_row, a.k_a_row, tile_keys, a.dim_a, a.padded_a);
    if (k_b != nullptr)
      load_rows<kVector>(k_tile + a.padded_a, a.k_stride, k_b + tile_begin * a.k_b_row, a.k_b_row, tile_keys, a.dim_b,
                         a.padded_b);
    if (v != nullptr)
      load_rows<kVector>(v_tile, a.v_stride, v + tile_begin * a.v_row, a.v_row, tile_keys, a.v_dim, a.padded_v);
    __syncthreads();

    // 1. Partial dot products: this warp's slice of the columns, key `lane`, rows half + 2j.
    if (lane < tile_keys) {
      float dot[kRowsPerScoreThread];
#pragma unroll
      for (int j = 0; j < kRowsPerScoreThread; ++j) dot[j] = 0.0f;
      const float* key = k_tile + lane * a.k_stride;
      for (int c = slice; c < qk_chunks; c += kDepthSlices) {
        const float4 k4 = *reinterpret_cast<const float4*>(key + 4 * c);
#pragma unroll
        for (int j = 0; j < kRowsPerScoreThread; ++j) {
          const int r = half + j * kRowHalves;
          if (r < rows_here) {
            const float4 q4 = *reinterpret_cast<const float4*>(q_tile + r * a.q_stride + 4 * c);
            dot[j] = fmaf(q4.x, k4.x, dot[j]);
            dot[j] = fmaf(q4.y, k4.y, dot[j]);
            dot[j] = fmaf(q4.z, k4.z, dot[j]);
            dot[j] = fmaf(q4.w, k4.w, dot[j]);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kRowsPerScoreThread; ++j) {
        const int r = half + j * kRowHalves;
        if (r < rows_here) scores[(slice * a.tile_rows + r) * kScoreStride + lane] = dot[j];
      }
    }
    __syncthreads();

    // 2. Online softmax, a warp per row: scores of the keys the row sees, the new running max, the
    // tile's probabilities (into slice 0, each lane its own key), the rescale of what came before.
    for (int r = warp; r < rows_here; r += kWarps) {
      const std::int64_t token = (first_row + r) / a.group;
      const bool seen = lane < tile_keys && tile_begin + lane < visible_keys(first, token, a.max_context);
      float score = negative_infinity();
      if (seen) {
        float dot = 0.0f;
#pragma unroll
        for (int s = 0; s < kDepthSlices; ++s) dot += scores[(s * a.tile_rows + r) * kScoreStride + lane];
        score = a.scale * dot;
      }
      const float old_max = row_max[r];
      const float new_max = fmaxf(old_max, warp_max(score));
      const float p = seen ? expf(score - new_max) : 0.0f;
      const float tile_sum = warp_sum(p);
      scores[r * kScoreStride + lane] = p;
      __syncwarp();
      if (lane == 0) {
        const float rescale = old_max == negative_infinity() ? 0.0f : expf(old_max - new_max);
        row_rescale[r] = rescale;
        row_sum[r] = row_sum[r] * rescale + tile_sum;
        row_max[r] = new_max;
      }
    }
    __syncthreads();

    // 3. Values: acc = acc * rescale + sum over the tile's keys of p * value.
    if (values_active) {
#pragma unroll
      for (int j = 0; j < kMaxTileRows; ++j) {
        const int r = value_group + j * a.value_groups;
        if (r < rows_here) {
          const float rescale = row_rescale[r];
          acc[j].x *= rescale, acc[j].y *= rescale, acc[j].z *= rescale, acc[j].w *= rescale;
        }
      }
      for (int key = 0; key < tile_keys; ++key) {
        const float4 v4 = *reinterpret_cast<const float4*>(v_tile + key * v_tile_stride + 4 * value_chunk);
#pragma unroll
        for (int j = 0; j < kMaxTileRows; ++j) {
          const int r = value_group + j * a.value_groups;
          if (r < rows_here) {
            const float p = scores[r * kScoreStride + key];
            acc[j].x = fmaf(p, v4.x, acc[j].x);
            acc[j].y = fmaf(p, v4.y, acc[j].y);
            acc[j].z = fmaf(p, v4.z, acc[j].z);
            acc[j].w = fmaf(p, v4.w, acc[j].w);
          }
        }
      }
    }
    __syncthreads();  // the next tile overwrites keys, values and scores
  }

  // 4. The output (acc / sum) or the partial (acc, max, sum).
  if (values_active) {
#pragma unroll
    for (int j = 0; j < kMaxTileRows; ++j) {
      const int r = value_group + j * a.value_groups;
      if (r < rows_here) {
        const std::int64_t row = output_row(a, kv_head, first_row + r);
        float* destination = single ? a.out + row * a.v_dim : a.partial_acc + (split * total_rows + row) * a.v_dim;
        const float factor = single ? 1.0f / row_sum[r] : 1.0f;
        const float values[4] = {acc[j].x * factor, acc[j].y * factor, acc[j].z * factor, acc[j].w * factor};
        const int column = 4 * value_chunk;
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (column + e < a.v_dim) destination[column + e] = values[e];
      }
    }
  }
  if (!single && threadIdx.x < rows_here) {
    const std::int64_t o = split * total_rows + output_row(a, kv_head, first_row + threadIdx.x);
    a.partial_max[o] = row_max[threadIdx.x];
    a.partial_sum[o] = row_sum[threadIdx.x];
  }
}

// grid: tokens * heads output rows; block: kMaxSplits threads, thread s for split s. Splits that
// start past what the row's token sees hold no partial for it and are not read.
__global__ void __launch_bounds__(kMaxSplits)
    combine_splits(const float* partial_acc, const float* partial_max, const float* partial_sum, std::int64_t tokens,
                   std::int64_t heads, int v_dim, const std::int32_t* position, std::int64_t max_context, int splits,
                   float* out) {
  begin_after_previous_grid();
  __shared__ float weights[kMaxSplits];
  const std::int64_t rows = tokens * heads, row = blockIdx.x, token = row / heads;
  const std::int64_t first = *position;
  const std::int64_t all_visible = visible_keys(first, tokens - 1, max_context);
  const std::int64_t chunk = split_keys(all_visible, splits);
  if (all_visible <= chunk) return;  // one split: attend_split wrote the output
  const int active =
      static_cast<int>(min(std::int64_t{splits}, ceil_div(visible_keys(first, token, max_context), chunk)));
  const int s = threadIdx.x;
  const bool mine = s < active;
  const float m = mine ? partial_max[s * rows + row] : negative_infinity();
  const float peak = block_max(m);
  const float weight = mine ? expf(m - peak) : 0.0f;
  const float total = block_sum(mine ? partial_sum[s * rows + row] * weight : 0.0f);
  weights[s] = weight;
  __syncthreads();
  const float inverse = 1.0f / total;
  for (int column = threadIdx.x; column < v_dim; column += kMaxSplits) {
    float sum = 0.0f;
    for (int i = 0; i < active; ++i) sum = fmaf(partial_acc[(i * rows + row) * v_dim + column], weights[i], sum);
    out[row * v_dim + column] = sum * inverse;
  }
}

// ---- Host side -----------------------------------------------------------------------------------

int split_count(std::int64_t tokens, std::int64_t heads, std::int64_t max_context) {
  const std::int64_t rows = std::max<std::int64_t>(1, tokens * heads);
  const std::int64_t splits =
      std::min({std::int64_t{kMaxSplits}, ceil_div(kTargetRowSplits, rows), ceil_div(max_context, kMinSplitKeys)});
  return static_cast<int>(std::max<std::int64_t>(1, splits));
}

std::size_t workspace_bytes(const char* name, std::int64_t tokens, std::int64_t heads, std::int64_t v_dim,
                            std::int64_t max_context) {
  if (tokens < 0 || heads < 0 || v_dim < 0 || max_context < 0)
    throw std::invalid_argument(std::string(name) + ": negative sizes (tokens " + std::to_string(tokens) +
                                ", heads " + std::to_string(heads) + ", value width " + std::to_string(v_dim) +
                                ", max_context " + std::to_string(max_context) + ")");
  if (tokens == 0 || heads == 0 || max_context == 0) return 0;
  const int splits = split_count(tokens, heads, max_context);
  if (splits == 1) return 0;
  // splits > 1 only when tokens * heads < kTargetRowSplits: no overflow.
  return static_cast<std::size_t>(splits) * static_cast<std::size_t>(tokens * heads) *
         static_cast<std::size_t>(v_dim + 2) * sizeof(float);
}


[[noreturn]] void refuse(const char* name, const std::string& what) {
  throw std::invalid_argument(std::string(name) + ": " + what);
}

// Checks shared by both forms; rows: tokens * heads.
void check_common(const char* name, std::int64_t tokens, std::int64_t heads, const std::int32_t* position,
                  std::int64_t max_context) {
  if (tokens < 0) refuse(name, "negative tokens " + std::to_string(tokens));
  if (heads < 1) refuse(name, "heads " + std::to_string(heads) + " must be at least 1");
  if (max_context < 1) refuse(name, "max_context " + std::to_string(max_context) + " must be at least 1");
  if (tokens > 0x7fffffff / heads)
    refuse(name, std::to_string(tokens) + " tokens x " + std::to_string(heads) + " heads is more than 2^31 - 1 rows");
  if (position == nullptr) refuse(name, "no position (a device pointer to one int32)");
}

// Fills the tile layout, picks the query rows per block by shared memory, and launches.
void launch(AttentionArgs a, DType cache_dtype, std::int64_t kv_heads, void* workspace, const char* name,
            cudaStream_t stream) {
  const bool bf16 = cache_element_bytes(cache_dtype, name) == 2;
  a.padded_a = round_up_4(a.dim_a);
  a.padded_b = round_up_4(a.dim_b);
  a.padded_v = round_up_4(a.v_dim);
  a.q_stride = a.padded_a + a.padded_b;
  a.k_stride = key_tile_stride(a.q_stride);
  a.v_stride = a.padded_v;
  a.value_groups = kThreads / (a.padded_v / 4);
  a.splits = split_count(a.tokens, a.heads, a.max_context);
  const std::size_t workspace_needed = workspace_bytes(name, a.tokens, a.heads, a.v_dim, a.max_context);
  if (workspace_needed > 0 && workspace == nullptr)
    refuse(name, "no workspace (" + std::to_string(workspace_needed) + " bytes are needed)");
  if (a.tokens == 0) return;

  // Query rows per block: the most (up to 16) whose tile lets two blocks share an SM, else the most
  // that fit a block at all.
  const DeviceFacts& facts = current_device_facts();
  const int block_limit = facts.block_shared_optin_bytes, sm_limit = facts.sm_shared_bytes;
  const auto bytes_for = [&](int rows) { return std::size_t(shared_layout(a, rows).floats) * sizeof(float); };
  const std::size_t two_per_sm = static_cast<std::size_t>(std::max(0, sm_limit / 2 - 1024));
  int most_rows = 0;
  for (int rows = kMaxTileRows; rows >= 1 && most_rows == 0; rows /= 2)
    if (bytes_for(rows) <= two_per_sm) most_rows = rows;
  for (int rows = kMaxTileRows; rows >= 1 && most_rows == 0; rows /= 2)
    if (bytes_for(rows) <= static_cast<std::size_t>(block_limit)) most_rows = rows;
  if (most_rows == 0)
    refuse(name, "a tile of these widths needs " + std::to_string(bytes_for(1)) + " bytes of shared memory; cuda:" +
                     std::to_string(facts.device) + " has " + std::to_string(block_limit) + " per block");
  const std::int64_t rows_per_kv_head = a.tokens * a.group;
  const std::int64_t tiles = ceil_div(rows_per_kv_head, std::min<std::int64_t>(most_rows, rows_per_kv_head));
  a.tile_rows = static_cast<int>(ceil_div(rows_per_kv_head, tiles));  // balanced tiles, <= most_rows
  const std::size_t shared_bytes = bytes_for(a.tile_rows);

  if (a.splits > 1) {
    const std::size_t accumulators = static_cast<std::size_t>(a.splits) * a.tokens * a.heads * a.v_dim;
    a.partial_acc = static_cast<float*>(workspace);
    a.partial_max = a.partial_acc + accumulators;
    a.partial_sum = a.partial_max + static_cast<std::size_t>(a.splits) * a.tokens * a.heads;
  }
  const bool vector = a.dim_a % 4 == 0 && a.dim_b % 4 == 0 && a.v_dim % 4 == 0 && aligned_16(a.q_a) &&
                      (a.dim_b == 0 || aligned_16(a.q_b)) && aligned_16(a.k_a) &&
                      a.k_a_row % 4 == 0 && a.k_a_head % 4 == 0 &&
                      (a.dim_b == 0 || (aligned_16(a.k_b) && a.k_b_row % 4 == 0 && a.k_b_head % 4 == 0)) &&
                      (a.values_are_k_a || (aligned_16(a.v) && a.v_row % 4 == 0 && a.v_head % 4 == 0));
  const auto kernel = bf16 ? (vector ? attend_split<true, std::uint16_t> : attend_split<false, std::uint16_t>)
                          : (vector ? attend_split<true, float> : attend_split<false, float>);
  // Past the default 48 KiB a kernel must opt in.
  if (shared_bytes > 48 * 1024 &&
      shared_bytes > static_cast<std::size_t>(allow_most_dynamic_shared_memory(reinterpret_cast<const void*>(kernel))))
    refuse(name, "a tile of " + std::to_string(shared_bytes) + " bytes of shared memory is past cuda:" +
                     std::to_string(facts.device) + "'s limit for this kernel");
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(kv_heads), static_cast<unsigned>(a.splits));
  launch_kernel(kernel, grid, kThreads, shared_bytes, stream, a);
  if (a.splits > 1) {
    launch_kernel(combine_splits, static_cast<unsigned>(a.tokens * a.heads), kMaxSplits, 0, stream, a.partial_acc,
                  a.partial_max, a.partial_sum, a.tokens, a.heads, a.v_dim, a.position, a.max_context, a.splits, a.out);
  }
}

}  // namespace

std::size_t gqa_attention_workspace_bytes(std::int64_t tokens, std::int64_t heads, std::int64_t v_dim,
                                          std::int64_t max_context) {
  return workspace_bytes("cuda::gqa_attention_workspace_bytes", tokens, heads, v_dim, max_context);
}

std::size_t mla_attention_workspace_bytes(std::int64_t tokens, std::int64_t heads, std::int64_t latent_dim,
                                          std::int64_t max_context) {
  return workspace_bytes("cuda::mla_attention_workspace_bytes", tokens, heads, latent_dim, max_context);
}

void gqa_attention(const float* q, std::int64_t tokens, std::int64_t heads, std::int64_t qk_dim,
                   std::int64_t v_dim, const void* k_cache, const void* v_cache, DType cache_dtype,
                   std::int64_t kv_heads, const std::int32_t* position, std::int64_t max_context, float scale,
                   float* out, void* workspace, cudaStream_t stream) {
  const char* name = "cuda::gqa_attention";
  if (qk_dim < 1 || qk_dim > kMaxGqaDim || v_dim < 1 || v_dim > kMaxGqaDim)
    refuse(name, "qk_dim " + std::to_string(qk_dim) + " and v_dim " + std::to_string(v_dim) + " must be in [1, " +
                     std::to_string(kMaxGqaDim) + "]");
  if (kv_heads < 1 || kv_heads > 65535 || heads % kv_heads != 0)
    refuse(name, "kv_heads " + std::to_string(kv_heads) + " must be in [1, 65535] and divide heads " +
                     std::to_string(heads));
  check_common(name, tokens, heads, position, max_context);
  AttentionArgs a{};
  a.q_a = q;
  a.k_a = k_cache;
  a.v = v_cache;
  a.k_a_row = kv_heads * qk_dim;
  a.k_a_head = qk_dim;
  a.v_row = kv_heads * v_dim;
  a.v_head = v_dim;
  a.tokens = tokens;
  a.heads = heads;
  a.group = heads / kv_heads;
  a.dim_a = static_cast<int>(qk_dim);
  a.dim_b = 0;
  a.v_dim = static_cast<int>(v_dim);
  a.values_are_k_a = false;
  a.position = position;
  a.max_context = max_context;
  a.scale = scale;
  a.out = out;
  launch(a, cache_dtype, kv_heads, workspace, name, stream);
}

void mla_attention(const float* q_latent, const float* q_rope, std::int64_t tokens, std::int64_t heads,
                   std::int64_t latent_dim, std::int64_t rope_dim, const void* latent_cache,
                   const void* rope_cache, DType cache_dtype, const std::int32_t* position,
                   std::int64_t max_context, float scale, float* out_latent, void* workspace, cudaStream_t stream) {
  const char* name = "cuda::mla_attention";
  if (latent_dim < 1 || latent_dim > kMaxLatentDim)
    refuse(name, "latent_dim " + std::to_string(latent_dim) + " must be in [1, " + std::to_string(kMaxLatentDim) + "]");
  if (rope_dim < 0 || rope_dim > kMaxRopeDim)
    refuse(name, "rope_dim " + std::to_string(rope_dim) + " must be in [0, " + std::to_string(kMaxRopeDim) + "]");
  check_common(name, tokens, heads, position, max_context);
  AttentionArgs a{};
  a.q_a = q_latent;
  a.q_b = q_rope;
  a.k_a = latent_cache;
  a.k_b = rope_cache;
  a.k_a_row = latent_dim;
  a.k_b_row = rope_dim;
  a.tokens = tokens;
  a.heads = heads;
  a.group = heads;
  a.dim_a = static_cast<int>(latent_dim);
  a.dim_b = static_cast<int>(rope_dim);
  a.v_dim = static_cast<int>(latent_dim);
  a.values_are_k_a = true;
  a.position = position;
  a.max_context = max_context;
  a.scale = scale;
  a.out = out_latent;
  launch(a, cache_dtype, 1, workspace, name, stream);
}

}  // namespace switchyard::cuda
