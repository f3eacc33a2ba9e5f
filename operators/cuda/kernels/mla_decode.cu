#include "operators/cuda/kernels/mla_decode.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/cache_element.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_facts.h"
#include "operators/cuda/kernels/gemv_rows.cuh"
#include "operators/cuda/kernels/launch.cuh"

// Why a kernel of its own: one decode token leaves mla_attention's 16-row tiles nearly empty, so
// this one runs more, smaller blocks and streams the keys through the copy engine: 2-5x less time
// a call than mla_attention and its combine on an H200 (docs/performance.md).

namespace switchyard::cuda {
namespace {

// ---- Sizes ---------------------------------------------------------------------------------------
// A block: 8 warps, one block an SM (about 176 registers a thread, about 160 KiB of shared memory).
// Keys go through shared memory kMaxTileKeys at a time (kSmallTileKeys when two tiles of the widest
// rows would not fit), double-buffered.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxTileKeys = 32;  // <= the warp width: the softmax takes one key per lane
constexpr int kSmallTileKeys = 16;
constexpr int kKeysPerStep = 2;  // keys a warp scores at once

// Splits: S at launch = kWaveBlocks / head tiles (one wave of an H100's or H200's 132 multiprocessors,
// one block each), at most kMaxSplits and at most max_context / kMinSplitKeys. On the device a split
// covers max(kMinSplitKeys, ceil(visible / S)) keys rounded up to kSplitGrain: at P ~ 500 and 16
// heads that is 16 splits of 32 keys, so the combine reads 16 partials, not 32. GPUs with fewer
// multiprocessors run two waves (slower, still correct).
constexpr int kMaxSplits = 128;
constexpr std::int64_t kMinSplitKeys = 32;
constexpr std::int64_t kSplitGrain = 16;
constexpr std::int64_t kWaveBlocks = 132;

// The combine: the last block of each group of kGroupSplits splits combines the group; with more than
// one group the last group combiner combines the groups. A block reads at most kGroupSplits partials
// (<= 32: one a lane when weighing them), so the serial tail stays short for any S.
constexpr int kGroupSplits = 16;
constexpr int kMaxGroups = kMaxSplits / kGroupSplits;
constexpr int kCountersPerTile = kMaxGroups + 1;  // one a group, then the tile's level-2 counter
static_assert(kMaxGroups <= kGroupSplits && kGroupSplits <= 32 && kMaxSplits % kGroupSplits == 0);

constexpr std::int64_t kMaxLatentDim = 1024;  // latent_dim / 4 <= kThreads: one value column chunk a thread
constexpr std::int64_t kMaxRopeDim = 128;
static_assert(kMaxLatentDim / 4 <= kThreads);

__host__ __device__ constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Heads a block takes: more heads share each key read from L2, fewer halve a block's scoring and
// summing and keep the combine (heads x latent floats a partial) short. A thread keeps one float4
// accumulator a head. Up to 16 heads and kTwoHeadMaxContext keys, 2 heads a block: 8 tiles x 16
// splits, at most 256 keys a split: short contexts gain from two heads sharing a block's cache
// loads, but past kTwoHeadMaxContext keys the fixed split count leaves too little parallelism.
constexpr std::int64_t kTwoHeadMaxContext = 4096;
constexpr int heads_per_block(std::int64_t heads, std::int64_t max_context) {
  if (heads >= 64) return 8;
  if (heads < 3) return static_cast<int>(heads);
  return heads <= 16 && max_context <= kTwoHeadMaxContext ? 2 : 4;
}

__device__ inline float negative_infinity() { return __int_as_float(0xff800000); }

// Everything the kernel needs; pointers into the workspace set on the host.
struct DecodeArgs {
  const float* q_latent;      // [heads, latent_dim]
  const float* q_rope;        // [heads, rope_dim]
  const void* latent_cache;   // [max_context, latent_dim] of the kernel's cache type C
  const void* rope_cache;     // [max_context, rope_dim] of C
  const std::int32_t* position;
  float* out;                 // [heads, latent_dim]
  float* partial_acc;         // [splits, heads, latent_dim], unnormalised
  float* partial_stats;       // [splits, heads, 2]: max, sum
  float* group_acc;           // [groups, heads, latent_dim] (splits > kGroupSplits)
  float* group_stats;         // [groups, heads, 2]
  std::int32_t* counters;     // [head tiles, kCountersPerTile]
  std::int64_t max_context;
  int heads, latent_dim, rope_dim;
  int splits;                 // S
  int tile_keys;              // keys a shared-memory tile holds: kMaxTileKeys or kSmallTileKeys
  int cache_bytes;            // bytes of a cache element: sizeof(C), 4 (f32) or 2 (bf16)
  float scale;
  bool defer_combine;         // every active split writes its partial and stops (mla_decode_partials)
};

// Shared memory (floats; every offset a multiple of 4):
//   keys: two tile buffers, each [tile_keys, latent_dim] then [tile_keys, rope_dim] cache elements
//   as the cache holds them (KeyTile: f32, or bf16 in half the room), later the value groups' f32
//   accumulators; q: [heads_per_block, latent_dim] then [heads_per_block, rope_dim];
//   scores: [heads_per_block, tile_keys];
//   probabilities: [tile_keys, heads_per_block]; rescale: [heads_per_block];
//   stats: [2, heads_per_block] (max, sum); weights: [heads_per_block, 32] of the combine, then its
//   [heads_per_block, 2] (max, sum).
struct SharedLayout {
  int keys, q, scores, probabilities, rescale, stats, weights, totals, floats;
};

__host__ __device__ constexpr int round_up_4(int n) { return (n + 3) / 4 * 4; }

__host__ __device__ inline int value_groups(int latent_dim) { return kThreads / (latent_dim / 4); }

__host__ __device__ inline SharedLayout shared_layout(int heads_per_block, int latent_dim, int rope_dim,
                                                      int tile_keys, int cache_bytes) {
  const int row = latent_dim + rope_dim;
  const int key_tiles = 2 * tile_keys * row * cache_bytes / 4;  // in floats (bf16 rows: a multiple of 8)
  const int group_sums = (value_groups(latent_dim) - 1) * heads_per_block * latent_dim;
  SharedLayout l{};
  l.keys = 0;
  l.q = round_up_4(key_tiles > group_sums ? key_tiles : group_sums);
  l.scores = l.q + heads_per_block * row;
  l.probabilities = l.scores + round_up_4(heads_per_block * tile_keys);
  l.rescale = l.probabilities + round_up_4(tile_keys * heads_per_block);
  l.stats = l.rescale + round_up_4(heads_per_block);
  l.weights = l.stats + round_up_4(2 * heads_per_block);
  l.totals = l.weights + 32 * heads_per_block;
  l.floats = l.totals + round_up_4(2 * heads_per_block);
  return l;
}

// Where the splits fall at run time; every block derives it from the same *position.
struct SplitPlan {
  std::int64_t visible;  // keys the token sees
  std::int64_t chunk;    // keys per split
  int active;            // splits that hold keys: ceil(visible / chunk) <= S
};

__host__ __device__ inline SplitPlan plan_splits(std::int64_t position, std::int64_t max_context, int splits) {
  SplitPlan p{};
  p.visible = position + 1 < 0 ? 0 : position + 1 > max_context ? max_context : position + 1;
  std::int64_t chunk = ceil_div(p.visible, splits);
  if (chunk < kMinSplitKeys) chunk = kMinSplitKeys;
  p.chunk = ceil_div(chunk, kSplitGrain) * kSplitGrain;
  p.active = static_cast<int>(ceil_div(p.visible, p.chunk));
  return p;
}

// ---- Small device helpers ------------------------------------------------------------------------

// Bulk copies (the Hopper copy engine, TMA): one thread starts a copy of a contiguous range into
// shared memory, an mbarrier counts its bytes in, and the block waits on the barrier's phase. The
// engine keeps more bytes in flight than the threads' own loads (cp.async) can: a block's first key
// tile arrives in ~0.6 of the time.
__device__ inline unsigned shared_address(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ inline void barrier_init(std::uint64_t* barrier) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(barrier)) : "memory");
}
__device__ inline void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// Orders this thread's earlier accesses to shared memory (and those the block's barrier ordered before
// them) before the copy engine's writes that follow.
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ inline void barrier_expect_bytes(std::uint64_t* barrier, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}
// bytes: a multiple of 16, both addresses 16-byte aligned.
__device__ inline void bulk_copy(void* shared_destination, const void* global_source, unsigned bytes,
                                 std::uint64_t* barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(shared_destination)),
               "l"(global_source), "r"(bytes), "r"(shared_address(barrier))
               : "memory");
}
__device__ inline void barrier_wait(std::uint64_t* barrier, unsigned phase) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(barrier)), "r"(phase)
        : "memory");
  } while (done == 0);
}

__device__ inline float dot4(float4 a, float4 b, float sum) {
  sum = fmaf(a.x, b.x, sum);
  sum = fmaf(a.y, b.y, sum);
  sum = fmaf(a.z, b.z, sum);
  return fmaf(a.w, b.w, sum);
}

__device__ inline void fma4(float p, float4 v, float4& acc) {
  acc.x = fmaf(p, v.x, acc.x);
  acc.y = fmaf(p, v.y, acc.y);
  acc.z = fmaf(p, v.z, acc.z);
  acc.w = fmaf(p, v.w, acc.w);
}

// Sums kValues values over the warp with log2(kValues) halving exchanges before the full ones
// (kValues - 1 + 5 - log2(kValues) shuffles instead of 5 kValues). Lane l ends with the sum of value
// (l >> (5 - log2 kValues)) & (kValues - 1): exchange at offset 16 sends the upper half of the values
// to the lanes with bit 4 set, the next the upper quarter to bit 3, and so on.
template <int kValues>
__device__ inline float warp_sum_spread(float (&values)[kValues], int lane) {
  static_assert(kValues >= 1 && kValues <= 32 && (kValues & (kValues - 1)) == 0);
  int offset = 16;
#pragma unroll
  for (int n = kValues; n > 1; n /= 2, offset /= 2) {
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int i = 0; i < n / 2; ++i) {
      const float send = upper ? values[i] : values[i + n / 2];
      const float keep = upper ? values[i + n / 2] : values[i];
      values[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
  }
#pragma unroll
  for (; offset > 0; offset /= 2) values[0] += __shfl_xor_sync(0xffffffffu, values[0], offset);
  return values[0];
}
template <int kValues>
__device__ constexpr int log2_of() {
  return kValues <= 1 ? 0 : 1 + log2_of<kValues / 2>();
}

// Whether this block is the last of `expected` blocks to count itself in on `counter`: every write
// of every thread of the blocks before it is then visible to this block (the pattern of cooperative
// groups' grid sync: a barrier, then one thread's device-scope fences around the atomic). The last
// block resets the counter to 0 for the next launch. Called by every thread of the block.
__device__ bool arrive_last(std::int32_t* counter, int expected) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // releases the block's writes, ordered before it by the barrier
    const int ticket = atomicAdd(counter, 1);
    last = ticket == expected - 1;
    if (last) {
      atomicExch(counter, 0);  // every other block of this launch has counted already
      __threadfence();         // acquires the other blocks' writes
    }
  }
  __syncthreads();
  return last != 0;
}

// ---- The kernel's phases -------------------------------------------------------------------------

// Tile buffers: [tile_keys, latent_dim] latent rows, then [tile_keys, rope_dim] rope rows, cache
// elements C copied as they are (a bf16 tile moves and holds half the bytes of an f32 one).
template <typename C>
struct KeyTile {
  C* latent;
  C* rope;
};

// Thread 0 starts the copies of rows [first_key, first_key + keys) of both caches into `tile`,
// counted in on `barrier` (two contiguous ranges), which expects `expected` rows (keys when -1;
// load_key_row brings the rest).
template <typename C>
__device__ void load_key_tile(const DecodeArgs& a, KeyTile<C> tile, std::int64_t first_key, int keys,
                              std::uint64_t* barrier, int expected = -1) {
  constexpr unsigned kBytes = sizeof(C);
  const unsigned row_bytes = (a.latent_dim + a.rope_dim) * kBytes;
  const unsigned latent_bytes = keys * a.latent_dim * kBytes, rope_bytes = keys * a.rope_dim * kBytes;
  const C* latent_cache = static_cast<const C*>(a.latent_cache);
  const C* rope_cache = static_cast<const C*>(a.rope_cache);
  fence_async_shared();  // the block's reads of the buffer's previous tile come first
  barrier_expect_bytes(barrier, (expected < 0 ? keys : expected) * row_bytes);
  if (latent_bytes > 0) bulk_copy(tile.latent, latent_cache + first_key * a.latent_dim, latent_bytes, barrier);
  if (rope_bytes > 0) bulk_copy(tile.rope, rope_cache + first_key * a.rope_dim, rope_bytes, barrier);
}

// Thread 0 copies cache row `key` into row `slot` of the tile whose barrier already expects it.
template <typename C>
__device__ void load_key_row(const DecodeArgs& a, KeyTile<C> tile, std::int64_t slot, std::int64_t key,
                             std::uint64_t* barrier) {
  constexpr unsigned kBytes = sizeof(C);
  const C* latent_cache = static_cast<const C*>(a.latent_cache);
  const C* rope_cache = static_cast<const C*>(a.rope_cache);
  bulk_copy(tile.latent + slot * a.latent_dim, latent_cache + key * a.latent_dim, a.latent_dim * kBytes, barrier);
  if (a.rope_dim > 0)
    bulk_copy(tile.rope + slot * a.rope_dim, rope_cache + key * a.rope_dim, a.rope_dim * kBytes, barrier);
}

// Thread 0 starts the copies of the block's query rows: [heads_per_block, latent_dim] then
// [heads_per_block, rope_dim], the heads it has (rows past them: zero_missing_queries).
template <int kHeads>
__device__ void load_queries(const DecodeArgs& a, float* q, int first_head, int heads_here, std::uint64_t* barrier) {
  const unsigned latent_bytes = heads_here * a.latent_dim * 4u, rope_bytes = heads_here * a.rope_dim * 4u;
  barrier_expect_bytes(barrier, latent_bytes + rope_bytes);
  bulk_copy(q, a.q_latent + static_cast<std::int64_t>(first_head) * a.latent_dim, latent_bytes, barrier);
  if (rope_bytes > 0)
    bulk_copy(q + kHeads * a.latent_dim, a.q_rope + static_cast<std::int64_t>(first_head) * a.rope_dim, rope_bytes,
              barrier);
}

// Zeros the query rows of heads past the block's (a partial last head tile); their scores are unused.
template <int kHeads>
__device__ void zero_missing_queries(const DecodeArgs& a, float* q, int heads_here) {
  const int missing = kHeads - heads_here;
  for (int i = threadIdx.x; i < missing * a.latent_dim; i += kThreads) q[heads_here * a.latent_dim + i] = 0.0f;
  for (int i = threadIdx.x; i < missing * a.rope_dim; i += kThreads)
    q[kHeads * a.latent_dim + heads_here * a.rope_dim + i] = 0.0f;
}

// Scores of the tile's keys: scores[h, k] = scale * q[h] . key[k]. Warp w takes head group
// w % head groups (kGroupHeads heads, their queries in registers) and keys 2 at a time; lanes split
// the row's chunks of 4 elements (chunk lane + 32 j), widened to f32 as they load.
template <int kHeads, int kGroupHeads, int kLaneChunks, typename C>
__device__ void score_tile(const DecodeArgs& a, KeyTile<C> keys, const float* q_rows, float* scores, int tile_keys) {
  constexpr int kHeadGroups = kHeads / kGroupHeads;
  constexpr int kWarpsPerGroup = kWarps / kHeadGroups;
  constexpr int kValues = kKeysPerStep * kGroupHeads;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int head_group = warp % kHeadGroups, slot = warp / kHeadGroups;
  const int latent_chunks = a.latent_dim / 4, row_chunks = (a.latent_dim + a.rope_dim) / 4;
  // Chunk c of a row [latent | rope]: latent floats [4c, 4c + 4) below latent_chunks, else rope
  // floats [4(c - latent_chunks), ...).
  const float* q_latent = q_rows + head_group * kGroupHeads * a.latent_dim;
  const float* q_rope = q_rows + kHeads * a.latent_dim + head_group * kGroupHeads * a.rope_dim;

  float4 q[kGroupHeads][kLaneChunks];
#pragma unroll
  for (int g = 0; g < kGroupHeads; ++g)
#pragma unroll
    for (int j = 0; j < kLaneChunks; ++j) {
      const int c = lane + 32 * j;
      const float* source = c < latent_chunks ? q_latent + g * a.latent_dim + 4 * c
                                              : q_rope + g * a.rope_dim + 4 * (c - latent_chunks);
      q[g][j] = c < row_chunks ? *reinterpret_cast<const float4*>(source) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }

  // Value i of a step: key i / kGroupHeads of the pair, head i % kGroupHeads of the group.
  constexpr int kShift = 5 - log2_of<kValues>();
  const int mine = (lane >> kShift) & (kValues - 1);
  const bool writer = (lane & ((1 << kShift) - 1)) == 0;
  for (int first = slot * kKeysPerStep; first < tile_keys; first += kWarpsPerGroup * kKeysPerStep) {
    // Row first + 1 is inside the tile buffer (tile_keys capacity is even); past tile_keys it holds
    // stale values whose scores are dropped below.
    float dot[kValues];
#pragma unroll
    for (int i = 0; i < kValues; ++i) dot[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kLaneChunks; ++j) {
      const int c = lane + 32 * j;
      if (c < row_chunks) {
        const bool in_rope = c >= latent_chunks;
        const int width = in_rope ? a.rope_dim : a.latent_dim;
        const C* key = (in_rope ? keys.rope + 4 * (c - latent_chunks) : keys.latent + 4 * c) + first * width;
        const float4 k0 = load_cache4(key);
        const float4 k1 = load_cache4(key + width);
#pragma unroll
        for (int g = 0; g < kGroupHeads; ++g) {
          dot[g] = dot4(q[g][j], k0, dot[g]);
          dot[kGroupHeads + g] = dot4(q[g][j], k1, dot[kGroupHeads + g]);
        }
      }
    }
    const float total = warp_sum_spread<kValues>(dot, lane);
    const int key = first + mine / kGroupHeads;
    if (writer && key < tile_keys)
      scores[(head_group * kGroupHeads + mine % kGroupHeads) * a.tile_keys + key] = a.scale * total;
  }
}

// The tile's probabilities for head `warp`'s running softmax (lane = key), the rescale of what the
// accumulators hold, and the running max and sum (kept in the registers of warp h for head h).
template <int kHeads>
__device__ void softmax_tile(const DecodeArgs& a, const float* scores, float* probabilities, float* rescale,
                             int tile_keys, float& running_max, float& running_sum) {
  const int lane = threadIdx.x % 32, h = threadIdx.x / 32;
  if (h >= kHeads) return;
  const bool seen = lane < tile_keys;
  const float score = seen ? scores[h * a.tile_keys + lane] : negative_infinity();
  const float new_max = fmaxf(running_max, warp_max(score));
  const float p = seen ? expf(score - new_max) : 0.0f;
  const float tile_sum = warp_sum(p);
  const float factor = running_max == negative_infinity() ? 0.0f : expf(running_max - new_max);
  running_sum = running_sum * factor + tile_sum;
  running_max = new_max;
  if (lane < a.tile_keys) probabilities[lane * kHeads + h] = p;
  if (lane == 0) rescale[h] = factor;
}

template <int kHeads>
__device__ inline void load_probabilities(const float* row, float (&p)[kHeads]) {
  if constexpr (kHeads % 4 == 0) {
#pragma unroll
    for (int h = 0; h < kHeads; h += 4) {
      const float4 four = *reinterpret_cast<const float4*>(row + h);
      p[h] = four.x, p[h + 1] = four.y, p[h + 2] = four.z, p[h + 3] = four.w;
    }
  } else if constexpr (kHeads == 2) {
    const float2 two = *reinterpret_cast<const float2*>(row);
    p[0] = two.x, p[1] = two.y;
  } else {
#pragma unroll
    for (int h = 0; h < kHeads; ++h) p[h] = row[h];
  }
}

// acc[h] = acc[h] * rescale[h] + sum over this thread's keys k of p[k, h] * latent[k][chunk]; a thread
// takes one column chunk of 4 elements and every groups-th key from `group` on.
template <int kHeads, typename C>
__device__ void value_tile(const DecodeArgs& a, const C* latent_rows, const float* probabilities,
                           const float* rescale, int tile_keys, int chunk, int group, int groups,
                           float4 (&acc)[kHeads]) {
  if (group >= groups) return;
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    const float factor = rescale[h];
    acc[h].x *= factor, acc[h].y *= factor, acc[h].z *= factor, acc[h].w *= factor;
  }
#pragma unroll 2
  for (int k = group; k < tile_keys; k += groups) {
    const float4 v = load_cache4(latent_rows + k * a.latent_dim + 4 * chunk);
    float p[kHeads];
    load_probabilities<kHeads>(probabilities + k * kHeads, p);
#pragma unroll
    for (int h = 0; h < kHeads; ++h) fma4(p[h], v, acc[h]);
  }
}

// Combines `count` (<= kGroupSplits) partials of the block's heads: entry i of head `head` has its accumulator
// at acc_source + (i * heads + head) * latent_dim and its max, sum at stats_source + (i * heads + head)
// * 2. Final: out = sum_i w_i acc_i / sum_i w_i sum_i with w_i = exp(max_i - max). Otherwise the
// combination, unnormalised, to acc_destination/stats_destination (same layout, entry 0). Partials come
// from other blocks of this launch: loaded past L1 (ld.global.cg). Called by every thread.
__device__ void combine_partials(const DecodeArgs& a, float* weights, float* totals, const float* acc_source,
                                 const float* stats_source, int count, int first_head, int heads_here, bool final,
                                 float* acc_destination, float* stats_destination) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int chunks = a.latent_dim / 4, items = heads_here * chunks;  // float4 columns of the block's heads
  const std::int64_t entry_stride = static_cast<std::int64_t>(a.heads) * chunks;  // float4s between entries
  const float4* source = reinterpret_cast<const float4*>(acc_source);
  const auto offset_of = [&](int item) {
    const int h = item / chunks;
    return (first_head + h) * static_cast<std::int64_t>(chunks) + (item - h * chunks);
  };
  // Each item's accumulators are loaded before they are weighed: the first item's loads are in flight
  // while the weights are computed, each next item's while the current one is summed.
  float4 current[kGroupSplits], next[kGroupSplits];
  const auto load = [&](float4(&v)[kGroupSplits], int item) {
    const std::int64_t offset = offset_of(item);
#pragma unroll
    for (int i = 0; i < kGroupSplits; ++i)
      if (i < count) v[i] = __ldcg(source + i * entry_stride + offset);
  };
  if (static_cast<int>(threadIdx.x) < items) load(current, threadIdx.x);

  for (int h = warp; h < heads_here; h += kWarps) {
    const std::int64_t head = first_head + h;
    const bool mine = lane < count;
    const float* stats = stats_source + (lane * static_cast<std::int64_t>(a.heads) + head) * 2;
    const float m = mine ? __ldcg(stats) : negative_infinity();
    const float l = mine ? __ldcg(stats + 1) : 0.0f;
    const float peak = warp_max(m);
    const float w = m == negative_infinity() ? 0.0f : expf(m - peak);
    const float total = warp_sum(w * l);
    weights[h * 32 + lane] = final ? w / total : w;
    if (lane == 0) totals[2 * h] = peak, totals[2 * h + 1] = total;
  }
  __syncthreads();

  float4* destination = reinterpret_cast<float4*>(final ? a.out : acc_destination);
  for (int item = threadIdx.x; item < items; item += kThreads) {
    const bool more = item + kThreads < items;
    if (more) load(next, item + kThreads);
    const float* w = weights + (item / chunks) * 32;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int i = 0; i < kGroupSplits; ++i)
      if (i < count) fma4(w[i], current[i], sum);
    destination[offset_of(item)] = sum;
    if (more)
#pragma unroll
      for (int i = 0; i < kGroupSplits; ++i) current[i] = next[i];
  }
  if (!final && threadIdx.x < heads_here) {
    const std::int64_t head = first_head + threadIdx.x;
    stats_destination[head * 2] = totals[2 * threadIdx.x];
    stats_destination[head * 2 + 1] = totals[2 * threadIdx.x + 1];
  }
}

// grid: (head tiles, S splits); block: kThreads; dynamic shared memory: shared_layout. kLaneChunks:
// chunks of 4 elements of a key row a lane scores (ceil((latent + rope) / 128)). C: the caches'
// element type (float, or std::uint16_t for bf16). Every branch that a __syncthreads depends on is
// uniform over the block.
template <int kHeads, int kLaneChunks, typename C>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_kernel(const DecodeArgs a) {
  begin_after_previous_grid();  // launched with programmatic dependent launch (launch.cuh)
  constexpr int kGroupHeads = kHeads < (kLaneChunks <= 5 ? 4 : 2) ? kHeads : (kLaneChunks <= 5 ? 4 : 2);
  extern __shared__ float4 shared_words[];
  float* shared = reinterpret_cast<float*>(shared_words);
  const SharedLayout layout = shared_layout(kHeads, a.latent_dim, a.rope_dim, a.tile_keys, static_cast<int>(sizeof(C)));
  float* scores = shared + layout.scores;
  float* probabilities = shared + layout.probabilities;
  float* rescale = shared + layout.rescale;
  float* stats = shared + layout.stats;

  const int tile = blockIdx.x, split = blockIdx.y;
  const int first_head = tile * kHeads;
  const int heads_here = min(kHeads, a.heads - first_head);
  const int latent_chunks = a.latent_dim / 4;
  // Barriers 0 and 1 count in the key tiles of buffers 0 and 1, barrier 2 the queries. Before the
  // wait for the previous kernel (the cache write, which writes the queries and row P alone): the
  // position and the first tile's rows before P (mla_decode.h). A block that leaves early waits
  // for the copies it started first (they write its shared memory).
  __shared__ std::uint64_t barriers[3];
  if (threadIdx.x == 0) {
    for (int i = 0; i < 3; ++i) barrier_init(&barriers[i]);
    fence_barrier_init();
  }
  const std::int32_t position = *a.position;
  const SplitPlan plan = plan_splits(position, a.max_context, a.splits);
  const std::int64_t keys_begin = split * plan.chunk;
  const bool has_keys = plan.visible > 0 && keys_begin < plan.visible;
  const std::int64_t keys_end = has_keys ? min(keys_begin + plan.chunk, plan.visible) : keys_begin;
  const auto buffer = [&](int t) {
    C* base = reinterpret_cast<C*>(shared + layout.keys) + (t % 2) * a.tile_keys * (a.latent_dim + a.rope_dim);
    return KeyTile<C>{base, base + a.tile_keys * a.latent_dim};
  };
  const auto keys_in = [&](int t) {
    return static_cast<int>(min(static_cast<std::int64_t>(a.tile_keys), keys_end - keys_begin - t * a.tile_keys));
  };
  // Tile t goes to buffer t % 2 (barrier t % 2, phase t / 2 % 2); tile t + 1 loads while tile t is
  // scored and summed. The first tile's barrier expects all its rows; those before P copy now.
  if (has_keys && threadIdx.x == 0) {
    const std::int64_t before_position = min(static_cast<std::int64_t>(keys_in(0)), position - keys_begin);
    load_key_tile(a, buffer(0), keys_begin, static_cast<int>(before_position), &barriers[0], keys_in(0));
  }
  begin_after_previous_grid();  // launched with programmatic dependent launch (launch.cuh)
  if (threadIdx.x == 0) load_queries<kHeads>(a, shared + layout.q, first_head, heads_here, &barriers[2]);

  if (plan.visible == 0) {  // P < 0: no key to attend to (the caller's error), NaN as mla_attention
    if (split == 0 && !a.defer_combine)
      for (int i = threadIdx.x; i < heads_here * a.latent_dim; i += kThreads)
        a.out[first_head * static_cast<std::int64_t>(a.latent_dim) + i] = __int_as_float(0x7fc00000);
    if (threadIdx.x == 0) barrier_wait(&barriers[2], 0);
    return;
  }
  if (!has_keys) {  // past the visible keys: not counted in anywhere
    if (threadIdx.x == 0) barrier_wait(&barriers[2], 0);
    return;
  }
  const int tiles = static_cast<int>(ceil_div(keys_end - keys_begin, a.tile_keys));
  if (threadIdx.x == 0 && position < keys_begin + keys_in(0))  // row P, just written
    load_key_row(a, buffer(0), position - keys_begin, position, &barriers[0]);
  zero_missing_queries<kHeads>(a, shared + layout.q, heads_here);
  __syncthreads();  // the barriers are initialised before any thread waits on them
  const int chunk = threadIdx.x % latent_chunks, group = threadIdx.x / latent_chunks;
  const int groups = value_groups(a.latent_dim);
  float running_max = negative_infinity(), running_sum = 0.0f;
  float4 acc[kHeads];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) acc[h] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles && threadIdx.x == 0)
      load_key_tile(a, buffer(t + 1), keys_begin + (t + 1) * static_cast<std::int64_t>(a.tile_keys), keys_in(t + 1),
                    &barriers[(t + 1) % 2]);
    if (t == 0) barrier_wait(&barriers[2], 0);
    barrier_wait(&barriers[t % 2], (t / 2) % 2);
    __syncthreads();
    score_tile<kHeads, kGroupHeads, kLaneChunks, C>(a, buffer(t), shared + layout.q, scores, keys_in(t));
    __syncthreads();
    softmax_tile<kHeads>(a, scores, probabilities, rescale, keys_in(t), running_max, running_sum);
    __syncthreads();
    value_tile<kHeads, C>(a, buffer(t).latent, probabilities, rescale, keys_in(t), chunk, group, groups, acc);
    __syncthreads();  // the next iteration loads into this tile's buffer
  }

  // The value groups' sums into group 0 (the key tiles are free now), the softmax stats to shared.
  float* group_sums = shared + layout.keys;
  if (group >= 1 && group < groups)
#pragma unroll
    for (int h = 0; h < kHeads; ++h)
      *reinterpret_cast<float4*>(group_sums + ((group - 1) * kHeads + h) * a.latent_dim + 4 * chunk) = acc[h];
  if (threadIdx.x % 32 == 0 && threadIdx.x / 32 < kHeads) {
    stats[threadIdx.x / 32] = running_max;
    stats[kHeads + threadIdx.x / 32] = running_sum;
  }
  __syncthreads();
  if (group == 0)
    for (int g = 1; g < groups; ++g)
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        const float4 v =
            *reinterpret_cast<const float4*>(group_sums + ((g - 1) * kHeads + h) * a.latent_dim + 4 * chunk);
        acc[h].x += v.x, acc[h].y += v.y, acc[h].z += v.z, acc[h].w += v.w;
      }

  const std::int64_t latent = a.latent_dim;
  if (plan.active == 1 && !a.defer_combine) {  // one split saw every key: the output itself
    if (group == 0)
#pragma unroll
      for (int h = 0; h < kHeads; ++h)
        if (h < heads_here) {
          const float inverse = 1.0f / stats[kHeads + h];
          const float4 v = make_float4(acc[h].x * inverse, acc[h].y * inverse, acc[h].z * inverse, acc[h].w * inverse);
          *reinterpret_cast<float4*>(a.out + (first_head + h) * latent + 4 * chunk) = v;
        }
    return;
  }

  const std::int64_t row_base = static_cast<std::int64_t>(split) * a.heads + first_head;  // partial entry of head 0
  if (group == 0)
#pragma unroll
    for (int h = 0; h < kHeads; ++h)
      if (h < heads_here) *reinterpret_cast<float4*>(a.partial_acc + (row_base + h) * latent + 4 * chunk) = acc[h];
  if (threadIdx.x < heads_here) {
    a.partial_stats[(row_base + threadIdx.x) * 2] = stats[threadIdx.x];
    a.partial_stats[(row_base + threadIdx.x) * 2 + 1] = stats[kHeads + threadIdx.x];
  }

  if (a.defer_combine) return;  // mla_expand_partials combines

  // Level 1: the last split of the group combines the group (the output, when it is the only group).
  const int group_index = split / kGroupSplits, group_first = group_index * kGroupSplits;
  const int group_count = min(kGroupSplits, plan.active - group_first);
  const int group_total = static_cast<int>(ceil_div(plan.active, kGroupSplits));
  std::int32_t* counters = a.counters + tile * kCountersPerTile;
  if (!arrive_last(counters + group_index, group_count)) return;
  float* weights = shared + layout.weights;
  float* totals = shared + layout.totals;
  const std::int64_t first_entry = static_cast<std::int64_t>(group_first) * a.heads;
  const bool only_group = group_total == 1;
  combine_partials(a, weights, totals, a.partial_acc + first_entry * latent, a.partial_stats + first_entry * 2,
                   group_count, first_head, heads_here, only_group,
                   a.group_acc + static_cast<std::int64_t>(group_index) * a.heads * latent,
                   a.group_stats + static_cast<std::int64_t>(group_index) * a.heads * 2);
  if (only_group) return;

  // Level 2: the last group combiner combines the groups.
  if (!arrive_last(counters + kMaxGroups, group_total)) return;
  combine_partials(a, weights, totals, a.group_acc, a.group_stats, group_total, first_head, heads_here, true,
                   nullptr, nullptr);
}

// ---- The combine in the value expansion (mla_decode_partials, then mla_expand_partials) ------------

// A block: kExpandRows value rows of one head (kExpandRowsPerWarp a warp).
constexpr int kExpandRowsPerWarp = 4;
constexpr int kExpandRows = kWarps * kExpandRowsPerWarp;
// Partials a thread of the combine loads at once (float4 registers), before the stats arrive.
constexpr int kExpandHeld = 8;

struct ExpandArgs {
  const float* partial_acc;    // [splits, heads, latent_dim], unnormalised
  const float* partial_stats;  // [splits, heads, 2]: max, sum
  const std::int32_t* position;
  std::int64_t max_context;
  int splits, heads, latent_dim, v_dim;
  const void* weight;  // head h's value row j at weight + h * head_stride + row_offset + j * latent_dim
  std::int64_t head_stride, row_offset;
  float* out;  // [heads, v_dim]
};

// grid: (ceil(v_dim / kExpandRows), heads); block: kThreads. Head h's latent output, combined from its
// active splits' partials (as the decode kernel's final combine), then its value rows times it (as
// gemv). The block's first weight chunks load before the wait for the previous grid.
template <typename W>
__global__ void __launch_bounds__(kThreads) mla_expand_kernel(const ExpandArgs e) {
  constexpr int kStaged = sizeof(W) == 2 ? 2 : 1;  // 8-weight chunks a lane loads early, per row
  __shared__ float split_weights[kMaxSplits];
  __shared__ float4 part_sums[kThreads];
  __shared__ float4 latent4[kMaxLatentDim / 4];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, h = blockIdx.y;
  const W* head_rows = static_cast<const W*>(e.weight) + h * e.head_stride + e.row_offset;
  const int first_row = blockIdx.x * kExpandRows + warp * kExpandRowsPerWarp;
  WeightChunk<W> staged[kExpandRowsPerWarp][kStaged];
#pragma unroll
  for (int i = 0; i < kExpandRowsPerWarp; ++i)
#pragma unroll
    for (int u = 0; u < kStaged; ++u) {
      const std::int64_t k = lane * 8 + u * kChunkStride;
      if (first_row + i < e.v_dim && k < e.latent_dim)
        staged[i][u].load(head_rows + static_cast<std::int64_t>(first_row + i) * e.latent_dim, k);
    }
  const SplitPlan plan = plan_splits(*e.position, e.max_context, e.splits);  // before the wait: mla_decode.h
  begin_after_previous_grid();
  if (plan.active == 0) {  // P < 0: no key (the caller's error), NaN as mla_attention
    if (lane < kExpandRowsPerWarp && first_row + lane < e.v_dim)
      e.out[static_cast<std::int64_t>(h) * e.v_dim + first_row + lane] = __int_as_float(0x7fc00000);
    return;
  }
  const int chunks = e.latent_dim / 4, parts = kThreads / chunks;
  const int chunk = threadIdx.x % chunks, part = threadIdx.x / chunks;
  // Every load of the combine is issued at once, then used: each thread's first kExpandHeld
  // partials (one float4 column chunk of every parts-th split), and warp 0's stats (one float2 a
  // lane per 32 splits). After the position, one round trip to L2 where there were four or more
  // in turn (three for the stats, then the partials): ~1.6 us a layer on an H200 (docs/performance.md).
  // The sums keep their order, so the output does not depend on which loads were early.
  const auto* acc = reinterpret_cast<const float4*>(e.partial_acc) + static_cast<std::int64_t>(h) * chunks + chunk;
  const std::int64_t split_stride = static_cast<std::int64_t>(e.heads) * chunks;
  float4 held[kExpandHeld];
#pragma unroll
  for (int b = 0; b < kExpandHeld; ++b) {
    const int split = part + b * parts;
    if (part < parts && split < plan.active) held[b] = __ldcg(acc + split * split_stride);
  }
  // Weights of the partials: w_s = exp(max_s - max) / sum_s exp(max_s - max) sum_s.
  if (warp == 0) {
    constexpr int kPerLane = kMaxSplits / 32;
    float2 stats[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int split = lane + 32 * i;
      if (split < plan.active)
        stats[i] = __ldcg(reinterpret_cast<const float2*>(e.partial_stats) + static_cast<std::int64_t>(split) * e.heads + h);
    }
    float peak = negative_infinity();
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i < plan.active) peak = fmaxf(peak, stats[i].x);
    peak = warp_max(peak);
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i < plan.active) total += expf(stats[i].x - peak) * stats[i].y;
    total = warp_sum(total);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i < plan.active) split_weights[lane + 32 * i] = expf(stats[i].x - peak) / total;
  }
  __syncthreads();
  // The latent output: thread (part, chunk) sums every parts-th partial of one float4 column.
  if (part < parts) {
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int b = 0; b < kExpandHeld; ++b) {
      const int split = part + b * parts;
      if (split < plan.active) fma4(split_weights[split], held[b], sum);
    }
    for (int split = part + kExpandHeld * parts; split < plan.active; split += parts)
      fma4(split_weights[split], __ldcg(acc + split * split_stride), sum);
    part_sums[part * chunks + chunk] = sum;
  }
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < chunks) {
    float4 sum = part_sums[threadIdx.x];
    for (int p = 1; p < parts; ++p) {
      const float4 v = part_sums[p * chunks + threadIdx.x];
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    latent4[threadIdx.x] = sum;
  }
  __syncthreads();
  const float* latent = reinterpret_cast<const float*>(latent4);
#pragma unroll
  for (int i = 0; i < kExpandRowsPerWarp; ++i) {
    if (first_row + i >= e.v_dim) break;
    const W* row = head_rows + static_cast<std::int64_t>(first_row + i) * e.latent_dim;
    float acc[1] = {0.0f}, w[8];
#pragma unroll
    for (int u = 0; u < kStaged; ++u) {
      const std::int64_t k = lane * 8 + u * kChunkStride;
      if (k < e.latent_dim) {
        staged[i][u].to_f32(w);
        accumulate<1>(w, latent, 0, k, acc);
      }
    }
    for (std::int64_t k = lane * 8 + kStaged * kChunkStride; k < e.latent_dim; k += kChunkStride) {
      load8(row, k, w);
      accumulate<1>(w, latent, 0, k, acc);
    }
    const float total = warp_sum(acc[0]);
    if (lane == 0) e.out[static_cast<std::int64_t>(h) * e.v_dim + first_row + i] = total;
  }
}

// ---- Host side -----------------------------------------------------------------------------------

[[noreturn]] void refuse(const char* name, const std::string& what) {
  throw std::invalid_argument(std::string(name) + ": " + what);
}


void check_sizes(const char* name, std::int64_t heads, std::int64_t latent_dim, std::int64_t rope_dim,
                 std::int64_t max_context) {
  if (heads < 1 || heads > 65535 * 8)
    refuse(name, "heads " + std::to_string(heads) + " must be in [1, " + std::to_string(65535 * 8) + "]");
  if (latent_dim < 4 || latent_dim > kMaxLatentDim || latent_dim % 4 != 0)
    refuse(name, "latent_dim " + std::to_string(latent_dim) + " must be a multiple of 4 in [4, " +
                     std::to_string(kMaxLatentDim) + "] (mla_attention takes others)");
  if (rope_dim < 0 || rope_dim > kMaxRopeDim || rope_dim % 4 != 0)
    refuse(name, "rope_dim " + std::to_string(rope_dim) + " must be a multiple of 4 in [0, " +
                     std::to_string(kMaxRopeDim) + "] (mla_attention takes others)");
  if (max_context < 1) refuse(name, "max_context " + std::to_string(max_context) + " must be at least 1");
}

std::int64_t head_tiles(std::int64_t heads, std::int64_t max_context) {
  return ceil_div(heads, heads_per_block(heads, max_context));
}

int split_count(std::int64_t heads, std::int64_t max_context) {
  const std::int64_t splits = std::min({std::int64_t{kMaxSplits}, kWaveBlocks / head_tiles(heads, max_context),
                                        ceil_div(max_context, kMinSplitKeys)});
  return static_cast<int>(std::max<std::int64_t>(1, splits));
}

int group_count(int splits) { return splits > kGroupSplits ? static_cast<int>(ceil_div(splits, kGroupSplits)) : 0; }

// Keys a shared-memory tile holds: kMaxTileKeys when the block's shared memory fits the device (1 KiB
// left for static shared memory), else kSmallTileKeys (the widest f32 rows: latent 1024 + rope 128).
int tile_keys_for(const DeviceFacts& facts, int heads_per_block, int latent_dim, int rope_dim, int cache_bytes) {
  const auto bytes = [&](int keys) {
    return static_cast<std::int64_t>(shared_layout(heads_per_block, latent_dim, rope_dim, keys, cache_bytes).floats) * 4;
  };
  return bytes(kMaxTileKeys) + 1024 <= facts.block_shared_optin_bytes ? kMaxTileKeys : kSmallTileKeys;
}

template <int kHeads, typename C>
void launch_for_heads(const DecodeArgs& a, int lane_chunks, dim3 grid, const DeviceFacts& facts, const char* name,
                      cudaStream_t stream) {
  const auto kernel = lane_chunks <= 5 ? mla_decode_kernel<kHeads, 5, C> : mla_decode_kernel<kHeads, 9, C>;
  const std::size_t shared_bytes =
      static_cast<std::size_t>(shared_layout(kHeads, a.latent_dim, a.rope_dim, a.tile_keys, static_cast<int>(sizeof(C))).floats) *
      sizeof(float);
  // Past the default 48 KiB a kernel must opt in; the limit covers static shared memory too.
  const int allowed = allow_most_dynamic_shared_memory(reinterpret_cast<const void*>(kernel));
  if (shared_bytes > static_cast<std::size_t>(allowed))
    refuse(name, "needs " + std::to_string(shared_bytes) + " bytes of shared memory; cuda:" +
                     std::to_string(facts.device) + " has " + std::to_string(allowed) + " per block");
  launch_kernel(kernel, grid, kThreads, shared_bytes, stream, a);
}

}  // namespace

bool mla_decode_supports(std::int64_t heads, std::int64_t latent_dim, std::int64_t rope_dim, std::int64_t max_context,
                         DType cache_dtype, const float* q_latent, const float* q_rope, const void* latent_cache,
                         const void* rope_cache, const float* out_latent) {
  if (heads < 1 || heads > 65535 * 8 || max_context < 1) return false;
  if (cache_dtype != DType::f32 && cache_dtype != DType::bf16) return false;
  // Rows are bulk-copied in multiples of 16 bytes: 4 f32 or 8 bf16 elements.
  const std::int64_t grain = cache_dtype == DType::f32 ? 4 : 8;
  if (latent_dim < 4 || latent_dim > kMaxLatentDim || latent_dim % grain != 0) return false;
  if (rope_dim < 0 || rope_dim > kMaxRopeDim || rope_dim % grain != 0) return false;
  if (!aligned_16(q_latent) || !aligned_16(latent_cache) || !aligned_16(out_latent)) return false;
  return rope_dim == 0 || (aligned_16(q_rope) && aligned_16(rope_cache));  // unread without a rope part
}

std::size_t mla_decode_workspace_bytes(std::int64_t heads, std::int64_t latent_dim, std::int64_t max_context) {
  check_sizes("cuda::mla_decode_workspace_bytes", heads, latent_dim, 0, max_context);
  const int splits = split_count(heads, max_context);
  if (splits == 1) return 0;
  const std::size_t entries = static_cast<std::size_t>(splits + group_count(splits)) * static_cast<std::size_t>(heads);
  return entries * static_cast<std::size_t>(latent_dim + 2) * sizeof(float);
}

std::int64_t mla_decode_counter_count(std::int64_t heads) {
  if (heads < 1) refuse("cuda::mla_decode_counter_count", "heads " + std::to_string(heads) + " must be at least 1");
  return head_tiles(heads, 1) * kCountersPerTile;  // the most tiles: the fewest heads a block
}

namespace {

// mla_decode_attention, or with defer (out_latent and counters unused) mla_decode_partials.
void enqueue_decode(const char* name, const float* q_latent, const float* q_rope, std::int64_t heads,
                    std::int64_t latent_dim, std::int64_t rope_dim, const void* latent_cache, const void* rope_cache,
                    DType cache_dtype, const std::int32_t* position, std::int64_t max_context, float scale,
                    float* out_latent, void* workspace, std::int32_t* counters, bool defer, cudaStream_t stream) {
  check_sizes(name, heads, latent_dim, rope_dim, max_context);
  const int cache_bytes = cache_element_bytes(cache_dtype, name);
  if (cache_bytes == 2 && (latent_dim % 8 != 0 || rope_dim % 8 != 0))
    refuse(name, "a bf16 cache needs latent_dim (" + std::to_string(latent_dim) + ") and rope_dim (" +
                     std::to_string(rope_dim) + ") multiples of 8 (mla_attention takes others)");
  if (q_latent == nullptr || latent_cache == nullptr || (out_latent == nullptr && !defer))
    refuse(name, "q_latent, latent_cache and out_latent must be device pointers, not null");
  if (rope_dim > 0 && (q_rope == nullptr || rope_cache == nullptr))
    refuse(name, "q_rope and rope_cache must be device pointers when rope_dim is " + std::to_string(rope_dim));
  if (position == nullptr) refuse(name, "no position (a device pointer to one int32)");
  if (!mla_decode_supports(heads, latent_dim, rope_dim, max_context, cache_dtype, q_latent, q_rope, latent_cache,
                           rope_cache, out_latent) ||
      !aligned_16(workspace))
    refuse(name, "every pointer must be 16-byte aligned (mla_attention takes others)");

  DecodeArgs a{};
  a.q_latent = q_latent;
  a.q_rope = q_rope;
  a.latent_cache = latent_cache;
  a.rope_cache = rope_cache;
  a.position = position;
  a.out = out_latent;
  a.max_context = max_context;
  a.heads = static_cast<int>(heads);
  a.latent_dim = static_cast<int>(latent_dim);
  a.rope_dim = static_cast<int>(rope_dim);
  a.splits = split_count(heads, max_context);
  a.scale = scale;
  a.defer_combine = defer;
  a.cache_bytes = cache_bytes;
  const std::size_t workspace_needed = mla_decode_workspace_bytes(heads, latent_dim, max_context);
  if (defer && workspace_needed == 0)
    refuse(name, "max_context " + std::to_string(max_context) + " takes one split: nothing to defer (use mla_decode_attention)");
  if (workspace_needed > 0) {
    if (workspace == nullptr) refuse(name, "no workspace (" + std::to_string(workspace_needed) + " bytes are needed)");
    if (counters == nullptr && !defer)
      refuse(name, "no counters (" + std::to_string(mla_decode_counter_count(heads)) + " zeroed int32 are needed)");
    const int groups = group_count(a.splits);
    float* floats = static_cast<float*>(workspace);
    a.partial_acc = floats;
    a.group_acc = a.partial_acc + static_cast<std::size_t>(a.splits) * heads * latent_dim;
    a.partial_stats = a.group_acc + static_cast<std::size_t>(groups) * heads * latent_dim;
    a.group_stats = a.partial_stats + static_cast<std::size_t>(a.splits) * heads * 2;
    a.counters = counters;
  }
  const DeviceFacts& facts = current_device_facts();
  if (facts.compute_capability_major < 9)
    refuse(name, "cuda:" + std::to_string(facts.device) + " has compute capability " +
                     std::to_string(facts.compute_capability_major) +
                     ".x; the kernel's bulk copies need 9.0 (Hopper) or later (mla_attention runs anywhere)");
  const int block_heads = heads_per_block(heads, max_context);
  a.tile_keys = tile_keys_for(facts, block_heads, a.latent_dim, a.rope_dim, cache_bytes);
  const int lane_chunks = static_cast<int>(ceil_div((latent_dim + rope_dim) / 4, 32));
  const dim3 grid(static_cast<unsigned>(head_tiles(heads, max_context)), static_cast<unsigned>(a.splits));
  const auto launch = [&](auto cache_element) {
    using C = decltype(cache_element);
    switch (block_heads) {
      case 1: launch_for_heads<1, C>(a, lane_chunks, grid, facts, name, stream); break;
      case 2: launch_for_heads<2, C>(a, lane_chunks, grid, facts, name, stream); break;
      case 4: launch_for_heads<4, C>(a, lane_chunks, grid, facts, name, stream); break;
      default: launch_for_heads<8, C>(a, lane_chunks, grid, facts, name, stream); break;
    }
  };
  if (cache_bytes == 4) launch(float{});
  else launch(std::uint16_t{});
}


}  // namespace

void mla_decode_attention(const float* q_latent, const float* q_rope, std::int64_t heads, std::int64_t latent_dim,
                          std::int64_t rope_dim, const void* latent_cache, const void* rope_cache, DType cache_dtype,
                          const std::int32_t* position, std::int64_t max_context, float scale, float* out_latent,
                          void* workspace, std::int32_t* counters, cudaStream_t stream) {
  enqueue_decode("cuda::mla_decode_attention", q_latent, q_rope, heads, latent_dim, rope_dim, latent_cache,
                 rope_cache, cache_dtype, position, max_context, scale, out_latent, workspace, counters, false, stream);
}

void mla_decode_partials(const float* q_latent, const float* q_rope, std::int64_t heads, std::int64_t latent_dim,
                         std::int64_t rope_dim, const void* latent_cache, const void* rope_cache, DType cache_dtype,
                         const std::int32_t* position, std::int64_t max_context, float scale, void* workspace,
                         cudaStream_t stream) {
  enqueue_decode("cuda::mla_decode_partials", q_latent, q_rope, heads, latent_dim, rope_dim, latent_cache, rope_cache,
                 cache_dtype, position, max_context, scale, nullptr, workspace, nullptr, true, stream);
}

bool mla_expand_supports(std::int64_t heads, std::int64_t latent_dim, std::int64_t max_context, const ValueRows& rows,
                         const float* out) {
  if (heads < 1 || heads > 65535 || max_context < 1 || rows.v_dim < 1) return false;
  if (latent_dim < 8 || latent_dim > kMaxLatentDim || latent_dim % 8 != 0) return false;
  if (split_count(heads, max_context) < 2) return false;  // no partials to combine
  if (rows.dtype != DType::bf16 && rows.dtype != DType::f32) return false;
  const std::int64_t element = rows.dtype == DType::bf16 ? 2 : 4;
  return aligned_16(rows.weight) && (rows.head_stride * element) % 16 == 0 && (rows.row_offset * element) % 16 == 0 &&
         aligned_16(out);
}

void mla_expand_partials(const void* workspace, std::int64_t heads, std::int64_t latent_dim, std::int64_t max_context,
                         const std::int32_t* position, const ValueRows& rows, float* out, cudaStream_t stream) {
  const char* name = "cuda::mla_expand_partials";
  check_sizes(name, heads, latent_dim, 0, max_context);
  if (!mla_expand_supports(heads, latent_dim, max_context, rows, out) || workspace == nullptr || position == nullptr ||
      rows.weight == nullptr || out == nullptr || !aligned_16(workspace))
    refuse(name, "sizes, dtype, a null or misaligned pointer it cannot take (heads " + std::to_string(heads) +
                     ", latent " + std::to_string(latent_dim) + ", max_context " + std::to_string(max_context) +
                     ", v_dim " + std::to_string(rows.v_dim) + ")");
  ExpandArgs e{};
  e.splits = split_count(heads, max_context);
  e.partial_acc = static_cast<const float*>(workspace);
  // The layout of enqueue_decode's workspace: partials, group partials, then the stats.
  e.partial_stats = e.partial_acc + static_cast<std::size_t>(e.splits + group_count(e.splits)) * heads * latent_dim;
  e.position = position;
  e.max_context = max_context;
  e.heads = static_cast<int>(heads);
  e.latent_dim = static_cast<int>(latent_dim);
  e.v_dim = static_cast<int>(rows.v_dim);
  e.weight = rows.weight;
  e.head_stride = rows.head_stride;
  e.row_offset = rows.row_offset;
  e.out = out;
  const dim3 grid(static_cast<unsigned>(ceil_div(rows.v_dim, kExpandRows)), static_cast<unsigned>(heads));
  if (rows.dtype == DType::bf16) launch_kernel(mla_expand_kernel<__nv_bfloat16>, grid, kThreads, 0, stream, e);
  else launch_kernel(mla_expand_kernel<float>, grid, kThreads, 0, stream, e);
}

}  // namespace switchyard::cuda
