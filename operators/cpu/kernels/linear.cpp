#include "operators/cpu/kernels/linear.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "operators/cpu/kernels/kept_buffer.h"
#include "operators/cpu/kernels/kernel_options.h"
#include "operators/cpu/kernels/linear_kernels.h"
#include "operators/cpu/kernels/quant_dot.h"
#include "operators/cpu/kernels/silu_and_mul.h"

namespace switchyard::cpu {
namespace {

using detail::LinearBlock;
using detail::LinearProblem;
using detail::LinearWeight;

// Threads own whole groups of 16 rows: one 64-byte line of y per token, so no two threads write
// the same cache line.
constexpr std::int64_t kRowGroup = 16;
// Below this many multiply-adds a parallel region costs more than it saves.
constexpr std::int64_t kMinParallelWork = 1 << 16;
// A thread's share of tokens when tokens are split too (few rows, many tokens).
constexpr std::int64_t kMinTokensPerThread = 16;

using detail::BlockFunctions;

void run_block(const BlockFunctions& blocks, const LinearProblem& p, const LinearBlock& block) {
  (p.weight_type == LinearWeight::quantized ? blocks.quantized : blocks.plain)(p, block);
}

BlockFunctions block_functions(Isa isa) {
  if (!isa_supported(isa))
    throw std::invalid_argument(std::string("linear: this CPU cannot run the ") + isa_name(isa) + " variant");
  switch (isa) {
#if defined(SWITCHYARD_CPU_X86)
    case Isa::amx: return {detail::linear_block_amx, detail::quant_linear_block_amx};
    case Isa::avx512bf16: return {detail::linear_block_tiles_avx512_bf16, detail::quant_linear_block_avx512_bf16};
    case Isa::avx512: {
      // Quantised weights take AVX512-VNNI's byte products; an AVX-512 CPU without it (Skylake-SP)
      // runs them with AVX2's.
      const detail::BlockFn quantized = detail::has_avx512_vnni() ? detail::quant_linear_block_avx512 : detail::quant_linear_block_avx2;
      return {detail::linear_block_avx512, quantized};
    }
    case Isa::avx2: return {detail::linear_block_avx2, detail::quant_linear_block_avx2};
#else
    case Isa::amx:
    case Isa::avx512bf16:
    case Isa::avx512:
    case Isa::avx2:
#endif
    case Isa::scalar: return {detail::linear_block_scalar, detail::quant_linear_block_scalar};
  }
  return {detail::linear_block_scalar, detail::quant_linear_block_scalar};
}

LinearWeight weight_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return LinearWeight::f32;
    case DType::bf16: return LinearWeight::bf16;
    case DType::f16: return LinearWeight::f16;
    default: break;
  }
  if (is_block_quantized(dtype)) return LinearWeight::quantized;
  throw std::invalid_argument(std::string("linear: weights of dtype ") + dtype_name(dtype) +
                              " are not supported (f32, bf16, f16 and ggml's block types, q4_0 ... q6_k, "
                              "the IQ types and mxfp4, are)");
}

// A call's problem; for block types, checks that rows are whole blocks.
LinearProblem problem_of(const LinearCall& c) {
  LinearProblem problem{c.x, c.tokens, c.in, c.weight, weight_type(c.weight_dtype), c.out, c.y};
  if (problem.weight_type == LinearWeight::quantized) {
    const int block = dtype_info(c.weight_dtype).block_elements;
    if (c.in % block != 0)
      throw std::invalid_argument(std::string("linear: weights of dtype ") + dtype_name(c.weight_dtype) +
                                  " store rows of whole " + std::to_string(block) + "-weight blocks, but in = " +
                                  std::to_string(c.in) + " (out = " + std::to_string(c.out) + ") is not a multiple of " +
                                  std::to_string(block));
    problem.quant_dtype = c.weight_dtype;
  }
  return problem;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// 64-byte aligned storage for quantised activations: BlockQ8_K is 64-byte aligned, so that the
// kernels' 64-byte loads of its bytes never split a cache line.
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const Aligned64<U>&) const { return true; }
};

// Tokens of x a thread quantises at a time (an item of the parallel region).
constexpr std::int64_t kQuantizeTokens = 4;

// Row blocks a thread's share of rows is cut into: threads take blocks as they ask, so a core that
// runs slow (another process, an interrupt) takes fewer and the call does not wait for it alone
// (the same reason as the CPU experts' dynamic decode items).
constexpr std::int64_t kBlocksPerThread = 4;

// How `threads` threads share y: by row groups, and by tokens as well when there are too few row
// groups to go round and enough tokens to share (each token part re-reads its rows' weights); each
// thread's rows cut into up to kBlocksPerThread blocks. With x's tiles a group is two tile rows
// (kTilesRowGroup): a block of 16 rows would run the AMX block's one-weight-tile edge, which loads
// x's tiles once per 16 rows instead of 32.
constexpr std::int64_t kTilesRowGroup = 32;

struct LinearSplit {
  std::int64_t group_rows, row_groups, row_blocks, token_parts;
  std::int64_t blocks() const { return row_blocks * token_parts; }
};

// `least_rows` (0: none): blocks of at least that many rows (as whole groups), fewer blocks where
// needed (KernelOptions::tile_block_rows).
LinearSplit split_for(const LinearProblem& p, std::int64_t threads, std::int64_t blocks_per_thread,
                      std::int64_t least_rows = 0) {
  const std::int64_t group_rows = p.x_tiles != nullptr ? kTilesRowGroup : kRowGroup;
  const std::int64_t row_groups = ceil_div(p.out, group_rows);
  std::int64_t token_parts = 1;
  if (row_groups < 2 * threads && p.x_tiles == nullptr)  // AMX blocks take every token
    token_parts = std::clamp<std::int64_t>(threads / std::max<std::int64_t>(row_groups, 1), 1,
                                           std::max<std::int64_t>(p.tokens / kMinTokensPerThread, 1));
  const std::int64_t row_parts = std::max<std::int64_t>(threads / token_parts, 1);
  std::int64_t row_blocks = std::min(row_groups, row_parts * blocks_per_thread);
  if (least_rows > 0) row_blocks = std::clamp<std::int64_t>(p.out / std::max(least_rows, group_rows), 1, row_blocks);
  return LinearSplit{group_rows, row_groups, row_blocks, token_parts};
}

// Block `id` of the split (maybe empty).
LinearBlock block_of(const LinearProblem& p, const LinearSplit& split, std::int64_t id) {
  const std::int64_t row_block = id % split.row_blocks, token_part = id / split.row_blocks;
  return LinearBlock{
      std::min(p.out, split.row_groups * row_block / split.row_blocks * split.group_rows),
      std::min(p.out, split.row_groups * (row_block + 1) / split.row_blocks * split.group_rows),
      p.tokens * token_part / split.token_parts,
      p.tokens * (token_part + 1) / split.token_parts,
  };
}

// The x-tile writer this CPU runs fastest: the AVX-512 one on every AMX machine.
using TileWriter = void (*)(const float*, std::int64_t, std::int64_t, std::int64_t, std::uint32_t*);
TileWriter tile_writer() {
#if defined(SWITCHYARD_CPU_X86)
  if (isa_supported(Isa::avx512)) return detail::write_x_tile_avx512;
#endif
  return detail::write_x_tile_scalar;
}

}  // namespace

namespace detail {

void FreeAligned::operator()(void* p) const noexcept { std::free(p); }

namespace {
void* aligned_or_throw(std::size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0 ? 64 : 0));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

AlignedWords aligned_words(std::size_t bytes) { return AlignedWords(static_cast<std::uint32_t*>(aligned_or_throw(bytes))); }
AlignedBytes aligned_bytes(std::size_t bytes) { return AlignedBytes(static_cast<std::uint8_t*>(aligned_or_throw(bytes))); }

std::size_t x_tiles_bytes(std::int64_t tokens, std::int64_t in) {
  return static_cast<std::size_t>(ceil_div(tokens, 16) * ceil_div(in, 32)) * 1024;
}

}  // namespace detail

bool linear_rounds_x(Isa isa, DType weight_dtype, std::int64_t tokens) {
  if (isa != Isa::amx && isa != Isa::avx512bf16) return false;
  if (weight_dtype == DType::bf16) return tokens >= kAmxTokens;
  return is_block_quantized(weight_dtype) && tokens >= kQuantPrefillTokens;
}

bool linear_supports(DType weight_dtype) {
  switch (weight_dtype) {
    case DType::f32: case DType::bf16: case DType::f16:
    case DType::q8_0: case DType::q4_0: case DType::q4_1: case DType::q5_0: case DType::q5_1:
    case DType::q2_k: case DType::q3_k: case DType::q4_k: case DType::q5_k: case DType::q6_k:
    case DType::iq2_xxs: case DType::iq2_xs: case DType::iq2_s: case DType::iq3_xxs: case DType::iq3_s:
    case DType::iq1_s: case DType::iq1_m: case DType::iq4_nl: case DType::iq4_xs: case DType::mxfp4: return true;
    default: return false;  // BuildContext::param widens anything else
  }
}

bool linear_quantizes_x(DType weight_dtype, std::int64_t tokens) {
  return detail::takes_q8_k(weight_dtype) || (is_block_quantized(weight_dtype) && tokens < kQuantPrefillTokens);
}

namespace {

// One problem without x tiles: its row blocks, as threads ask (no bookkeeping: decode's hundreds of
// one-row-block items a layer come this way).
void run_one(const BlockFunctions& blocks, const LinearProblem& problem) {
  if (omp_in_parallel() || omp_get_max_threads() == 1) {
    // Called from inside a parallel region (the CPU experts' items), or with one thread: a region
    // would get one thread anyway, and opening it costs a few tenths of a microsecond a call.
    const LinearSplit split = split_for(problem, 1, 1);
    for (std::int64_t id = 0; id < split.blocks(); ++id) {
      const LinearBlock block = block_of(problem, split, id);
      if (block.row_begin < block.row_end && block.token_begin < block.token_end) run_block(blocks, problem, block);
    }
    return;
  }
  std::atomic<std::int64_t> next{0};  // the next block to take
#pragma omp parallel if (problem.tokens * problem.in * problem.out >= kMinParallelWork)
  {
    const LinearSplit split = split_for(problem, omp_get_num_threads(), kBlocksPerThread);
    for (std::int64_t id = next.fetch_add(1, std::memory_order_relaxed); id < split.blocks();
         id = next.fetch_add(1, std::memory_order_relaxed)) {
      const LinearBlock block = block_of(problem, split, id);
      if (block.row_begin < block.row_end && block.token_begin < block.token_end) run_block(blocks, problem, block);
    }
  }
}

// The bytes a batch writes before its blocks run (x's tiles, x quantised), kept by the calling
// thread between batches and grown to the largest: a prefill's layers ask for the same sizes
// (V2-Lite's gate and up: 12 MiB of tiles at 512 tokens), and fresh pages every batch cost more
// than writing them (the allocator returns them, and each one faults in again). One batch at a
// time per thread: no block function starts another batch.
std::uint8_t* batch_scratch(std::size_t bytes) {
  thread_local detail::AlignedBytes kept;
  thread_local std::size_t capacity = 0;
  if (bytes > capacity) {
    kept.reset();
    kept = detail::aligned_bytes(bytes);
    capacity = bytes;
  }
  return kept.get();
}

// The batch with `blocks`; x's tiles for the calls that round x where `rounds_like` would.
void run_batch(Isa rounds_like, const BlockFunctions& blocks, std::span<const LinearCall> calls) {
  auto rounds_x = [rounds_like](const LinearCall& c) { return linear_rounds_x(rounds_like, c.weight_dtype, c.tokens); };
  std::vector<LinearProblem> problems;
  problems.reserve(calls.size());
  // Where each problem's tiles and quantised x lie in the batch's scratch (byte offsets; kNone:
  // none); a problem on the same x as an earlier one shares the earlier's.
  constexpr std::size_t kNone = SIZE_MAX;
  std::vector<std::size_t> tiles_at, activations_at;
  std::size_t scratch_bytes = 0;
  auto reserve = [&](std::size_t bytes) {
    const std::size_t at = scratch_bytes;
    scratch_bytes += (bytes + 63) / 64 * 64;  // each part 64-byte aligned (tile loads, AVX-512 stores)
    return at;
  };
  struct TileWork {
    std::size_t problem;
    std::int64_t tile;
  };
  std::vector<TileWork> tile_work;  // filled (padding included) in the parallel region
  struct QuantizeWork {
    std::size_t problem;
    std::int64_t token;  // the first of up to kQuantizeTokens
  };
  std::vector<QuantizeWork> quantize_work;  // done in the parallel region
  std::int64_t work = 0;
  for (const LinearCall& c : calls) {
    LinearProblem problem = problem_of(c);
    if (c.tokens <= 0 || c.out <= 0) continue;
    std::size_t activations = kNone, tiles = kNone;
    if (c.in > 0 && linear_quantizes_x(c.weight_dtype, c.tokens) && !rounds_x(c)) {
      // A call on the same x as an earlier one (gate and up) takes its activations, if of the same kind.
      problem.x_quantized_stride = detail::activation_bytes(c.weight_dtype, c.in);
      for (std::size_t i = 0; i < problems.size() && activations == kNone; ++i)
        if (activations_at[i] != kNone && problems[i].x == c.x && problems[i].tokens == c.tokens &&
            problems[i].in == c.in && detail::takes_q8_k(problems[i].quant_dtype) == detail::takes_q8_k(c.weight_dtype))
          activations = activations_at[i];
      if (activations == kNone) {
        activations = reserve(static_cast<std::size_t>(problem.x_quantized_stride * c.tokens));
        for (std::int64_t t = 0; t < c.tokens; t += kQuantizeTokens) quantize_work.push_back({problems.size(), t});
      }
    }
    if (c.in <= 0) {
      std::fill(c.y, c.y + c.tokens * c.out, 0.0f);
      continue;
    }
    if (c.x_tiles != nullptr && !rounds_x(c))
      throw std::invalid_argument("linear_batch: x_tiles given for a call that does not round x (" +
                                  std::to_string(c.tokens) + " tokens of " + dtype_name(c.weight_dtype) + " weights)");
    if (rounds_x(c) && c.x_tiles != nullptr) {
      problem.x_tiles = c.x_tiles;  // the caller's (tiles_at stays kNone: nothing to write or place)
    } else if (rounds_x(c)) {
      // A call on the same x as an earlier one (an MLP's gate and up projections) takes its tiles.
      for (std::size_t i = 0; i < problems.size() && tiles == kNone; ++i)
        if (tiles_at[i] != kNone && problems[i].x == c.x && problems[i].tokens == c.tokens && problems[i].in == c.in)
          tiles = tiles_at[i];
      if (tiles == kNone) {
        tiles = reserve(detail::x_tiles_bytes(c.tokens, c.in));
        for (std::int64_t tile = 0; tile < ceil_div(c.tokens, 16); ++tile) tile_work.push_back({problems.size(), tile});
      }
    }
    work += c.tokens * c.in * c.out;
    problems.push_back(problem);
    tiles_at.push_back(tiles);
    activations_at.push_back(activations);
  }
  if (problems.empty()) return;
  std::uint8_t* const scratch = scratch_bytes > 0 ? batch_scratch(scratch_bytes) : nullptr;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    if (tiles_at[i] != kNone) problems[i].x_tiles = reinterpret_cast<const std::uint32_t*>(scratch + tiles_at[i]);
    if (activations_at[i] != kNone) problems[i].x_quantized = scratch + activations_at[i];
  }
  if (problems.size() == 1 && tile_work.empty() && quantize_work.empty()) return run_one(blocks, problems.front());
  std::vector<LinearSplit> splits(problems.size());
  std::vector<std::int64_t> first_block(problems.size() + 1, 0);  // the batch's block ids, call by call
  std::atomic<std::int64_t> next{0};  // the next block to take
  const TileWriter write_x_tile = tile_writer();
#pragma omp parallel if (work >= kMinParallelWork)
  {
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < tile_work.size(); ++i) {
      const LinearProblem& p = problems[tile_work[i].problem];
      write_x_tile(p.x, p.tokens, p.in, tile_work[i].tile, const_cast<std::uint32_t*>(p.x_tiles));
    }
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < quantize_work.size(); ++i) {
      const LinearProblem& p = problems[quantize_work[i].problem];
      const std::int64_t first = quantize_work[i].token;
      detail::quantize_activations(p.quant_dtype, p.x, first, std::min(p.tokens, first + kQuantizeTokens), p.in,
                                   const_cast<std::uint8_t*>(p.x_quantized));
    }
#pragma omp single
    {
      const std::int64_t threads = omp_get_num_threads();
      // KernelOptions::tile_block_rows, where the batch still has kBlocksPerThread blocks a thread.
      std::int64_t least_rows = kernel_options().tile_block_rows;
      if (least_rows > 0) {
        std::int64_t coarse = 0;
        for (const LinearProblem& p : problems)
          coarse += split_for(p, threads, kBlocksPerThread, p.x_tiles != nullptr ? least_rows : 0).blocks();
        if (coarse < threads * kBlocksPerThread) least_rows = 0;
      }
      for (std::size_t i = 0; i < problems.size(); ++i) {
        splits[i] = split_for(problems[i], threads, kBlocksPerThread, problems[i].x_tiles != nullptr ? least_rows : 0);
        first_block[i + 1] = first_block[i] + splits[i].blocks();
      }
    }
    // (the loops end in a barrier: the tiles and activations are written and the splits known past here)
    for (std::int64_t id = next.fetch_add(1, std::memory_order_relaxed); id < first_block.back();
         id = next.fetch_add(1, std::memory_order_relaxed)) {
      const auto i = static_cast<std::size_t>(std::upper_bound(first_block.begin(), first_block.end(), id) -
                                              first_block.begin() - 1);
      const LinearBlock block = block_of(problems[i], splits[i], id - first_block[i]);
      if (block.row_begin < block.row_end && block.token_begin < block.token_end) run_block(blocks, problems[i], block);
    }
  }
}

// The x-tile chunk writer this CPU runs fastest (as tile_writer).
using ChunkWriter = void (*)(const float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                             std::int64_t, std::uint32_t*);
ChunkWriter chunk_writer() {
#if defined(SWITCHYARD_CPU_X86)
  if (isa_supported(Isa::avx512)) return detail::write_x_tile_chunks_avx512;
#endif
  return detail::write_x_tile_chunks_scalar;
}

// gated_batch with `blocks` (the tiles path's block functions of one ISA). Items are a call's
// rows [row_begin, row_end): whole 32-row chunks of h, as many rows as
// KernelOptions::tile_block_rows while the batch keeps kBlocksPerThread items a thread (a thread
// reads the call's x tiles once per item, twice: gate and up), fewer down to one chunk where it
// would not. `isa`: the variant whose tiles path `blocks` run, which every call must take.
void run_gated(Isa isa, const BlockFunctions& blocks, std::span<const GatedCall> calls) {
  for (const GatedCall& c : calls)
    if (c.tokens > 0 && c.out > 0 && !gated_takes(isa, c.gate_dtype, c.up_dtype, c.tokens))
      throw std::invalid_argument(std::string("gated_batch: the ") + isa_name(isa) + " variant does not round x for " +
                                  std::to_string(c.tokens) + " tokens of " + dtype_name(c.gate_dtype) + "/" +
                                  dtype_name(c.up_dtype) + " weights");
  constexpr std::int64_t kChunk = 32;  // h's rows a chunk of its tiles holds
  struct Item {
    std::size_t call;
    std::int64_t row_begin, row_end;
  };
  std::vector<LinearProblem> gates, ups;  // each call's whole problem (validated); y set per item
  std::int64_t work = 0;
  for (const GatedCall& c : calls) {
    // problem_of checks the dtypes and the block multiples; x is read from its tiles only.
    gates.push_back(problem_of(LinearCall{nullptr, c.tokens, c.in, c.gate, c.gate_dtype, c.out, nullptr}));
    ups.push_back(problem_of(LinearCall{nullptr, c.tokens, c.in, c.up, c.up_dtype, c.out, nullptr}));
    gates.back().x_tiles = ups.back().x_tiles = c.x_tiles;
    if (c.tokens > 0 && c.out > 0 && (c.x_tiles == nullptr || c.h_tiles == nullptr))
      throw std::invalid_argument("gated_batch: a call without x's tiles or h's");
    work += 2 * std::max<std::int64_t>(c.tokens, 0) * std::max<std::int64_t>(c.in, 0) * std::max<std::int64_t>(c.out, 0);
  }
  const std::int64_t threads = omp_get_max_threads();
  const std::int64_t least = kernel_options().tile_block_rows;
  std::int64_t item_rows = std::max(kChunk, ceil_div(least, kChunk) * kChunk);
  auto items_of = [&](std::int64_t rows) {
    std::int64_t count = 0;
    for (const GatedCall& c : calls)
      if (c.tokens > 0 && c.out > 0) count += ceil_div(c.out, rows);
    return count;
  };
  while (item_rows > kChunk && items_of(item_rows) < threads * kBlocksPerThread) item_rows -= kChunk;
  std::vector<Item> items;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const GatedCall& c = calls[i];
    if (c.tokens <= 0 || c.out <= 0) continue;
    if (c.in <= 0) {  // h = silu(0) * 0 = 0 everywhere
      std::fill(c.h_tiles, c.h_tiles + detail::x_tiles_bytes(c.tokens, c.out) / 4, 0u);
      continue;
    }
    for (std::int64_t r = 0; r < c.out; r += item_rows) items.push_back({i, r, std::min(c.out, r + item_rows)});
  }
  const ChunkWriter write_chunks = chunk_writer();
  std::atomic<std::size_t> next{0};
#pragma omp parallel if (work >= kMinParallelWork)
  {
    // Per thread: gate's then h's rows [tokens, item rows], and up's.
    thread_local std::vector<float> kept_g, kept_u;
    for (std::size_t id = next.fetch_add(1, std::memory_order_relaxed); id < items.size();
         id = next.fetch_add(1, std::memory_order_relaxed)) {
      const Item item = items[id];
      const GatedCall& c = calls[item.call];
      const std::int64_t rows = item.row_end - item.row_begin;
      float* const g = kept_buffer(kept_g, c.tokens * rows);
      float* const u = kept_buffer(kept_u, c.tokens * rows);
      // The item's rows of each weight as a problem of `rows` outputs: y [tokens, rows].
      auto slice = [&](LinearProblem p, DType dtype, float* y) {
        p.weight = static_cast<const std::uint8_t*>(p.weight) +
                   item.row_begin * static_cast<std::int64_t>(storage_bytes(dtype, static_cast<std::uint64_t>(c.in)));
        p.out = rows;
        p.y = y;
        run_block(blocks, p, LinearBlock{0, rows, 0, c.tokens});
      };
      slice(gates[item.call], c.gate_dtype, g);
      slice(ups[item.call], c.up_dtype, u);
      silu_and_mul(g, u, c.tokens * rows, g);
      for (std::int64_t tile = 0; tile < ceil_div(c.tokens, 16); ++tile)
        write_chunks(g, rows, c.tokens, c.out, tile, item.row_begin / kChunk, ceil_div(item.row_end, kChunk), c.h_tiles);
    }
  }
}

}  // namespace

void linear_batch(Isa isa, std::span<const LinearCall> calls) { run_batch(isa, block_functions(isa), calls); }

void linear_batch(std::span<const LinearCall> calls) { linear_batch(chosen_isa(), calls); }

void detail::linear_batch_with(Isa rounds_like, BlockFunctions blocks, std::span<const LinearCall> calls) {
  run_batch(rounds_like, blocks, calls);
}

bool gated_takes(Isa isa, DType gate_dtype, DType up_dtype, std::int64_t tokens) {
  return linear_rounds_x(isa, gate_dtype, tokens) && linear_rounds_x(isa, up_dtype, tokens);
}

void gated_batch(Isa isa, std::span<const GatedCall> calls) { run_gated(isa, block_functions(isa), calls); }

void gated_batch(std::span<const GatedCall> calls) { gated_batch(chosen_isa(), calls); }

void detail::gated_batch_with(Isa rounds_like, BlockFunctions blocks, std::span<const GatedCall> calls) {
  run_gated(rounds_like, blocks, calls);
}

std::size_t x_tiles_bytes(std::int64_t tokens, std::int64_t in) { return detail::x_tiles_bytes(tokens, in); }

void write_x_tiles(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t tile, std::uint32_t* tiles) {
  tile_writer()(x, tokens, in, tile, tiles);
}

void linear(Isa isa, const float* x, std::int64_t tokens, std::int64_t in, const void* weight, DType weight_dtype,
            std::int64_t out, float* y) {
  linear_versioned_x(isa, 0, x, tokens, in, weight, weight_dtype, out, y);
}

void linear_versioned_x(Isa isa, std::uint64_t x_version, const float* x, std::int64_t tokens, std::int64_t in,
                        const void* weight, DType weight_dtype, std::int64_t out, float* y) {
  const LinearCall call{x, tokens, in, weight, weight_dtype, out, y};
  // Many tokens of quantised x: linear_batch quantises them in parallel.
  if (linear_rounds_x(isa, weight_dtype, tokens) || (linear_quantizes_x(weight_dtype, tokens) && tokens >= kQuantPrefillTokens) ||
      tokens <= 0 || out <= 0 || in <= 0)
    return linear_batch(isa, std::span(&call, 1));
  LinearProblem problem = problem_of(call);
  if (linear_quantizes_x(weight_dtype, tokens) && tokens < kQuantPrefillTokens) {
    // Decode inside the CPU experts' parallel region calls this per few rows of gate and up, on the
    // same x: the calling thread keeps its last x's bytes, and quantises again only when x may
    // differ (quantising is deterministic, so equal x gives equal bytes). With a version, the same
    // pointer and version say x is the same; without one, x is compared with a copy of the last, bit
    // for bit (a quarter of a quantisation). Such a call allocates nothing. The other threads of
    // run_one's region only read the bytes; nothing writes them before it ends.
    struct LastActivations {
      std::vector<float> x;  // a copy, for calls without a version
      const float* x_at = nullptr;
      std::uint64_t version = 0;
      std::int64_t tokens = 0, in = 0;
      bool q8_k = false;
      std::vector<std::uint8_t, Aligned64<std::uint8_t>> bytes;
    };
    thread_local LastActivations last;
    problem.x_quantized_stride = detail::activation_bytes(weight_dtype, in);
    const auto count = static_cast<std::size_t>(tokens * in);
    const bool q8_k = detail::takes_q8_k(weight_dtype);
    const bool same_shape = last.tokens == tokens && last.in == in && last.q8_k == q8_k;
    const bool same = x_version != 0
                          ? same_shape && last.version == x_version && last.x_at == x
                          : same_shape && last.version == 0 && last.x.size() == count &&
                                std::memcmp(last.x.data(), x, count * sizeof(float)) == 0;
    if (!same) {
      if (x_version == 0) last.x.assign(x, x + count);
      else last.x.clear();
      last.x_at = x;
      last.version = x_version;
      last.tokens = tokens;
      last.in = in;
      last.q8_k = q8_k;
      last.bytes.resize(static_cast<std::size_t>(problem.x_quantized_stride * tokens));
      detail::quantize_activations(weight_dtype, x, 0, tokens, in, last.bytes.data());
    }
    problem.x_quantized = last.bytes.data();
  }
  run_one(block_functions(isa), problem);
}

void linear(const float* x, std::int64_t tokens, std::int64_t in, const void* weight, DType weight_dtype,
            std::int64_t out, float* y) {
  linear(chosen_isa(), x, tokens, in, weight, weight_dtype, out, y);
}

void linear_versioned_x(std::uint64_t x_version, const float* x, std::int64_t tokens, std::int64_t in,
                        const void* weight, DType weight_dtype, std::int64_t out, float* y) {
  linear_versioned_x(chosen_isa(), x_version, x, tokens, in, weight, weight_dtype, out, y);
}

std::uint64_t new_x_version() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace switchyard::cpu
