#include "operators/cpu/routed_experts.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/error.h"
#include "operators/cpu/kernels/kept_buffer.h"
#include "operators/cpu/kernels/linear.h"
#include "operators/cpu/kernels/silu_and_mul.h"

namespace switchyard {
namespace {

using Expert = RoutedExperts::Expert;
using cpu::kept_aligned_words;
using cpu::kept_buffer;

// Values below which a row-wise loop (gather, SiLU, weighted add) runs on one thread: a parallel
// region costs a few microseconds.
constexpr std::int64_t kMinParallelRowWork = 1 << 15;
// Tokens of a token tile: the rows cpu::write_x_tiles rounds at a time.
constexpr std::int64_t kTileTokens = 16;

// A spinning thread's pause (a decode item waiting for its slot's gate and up items).
inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// A call's slots grouped by expert, so that each expert's weights are read once: slot s = token *
// top_k + k goes to row row_of[s]; expert e's rows are [first[e], first[e + 1]).
struct Grouping {
  std::vector<std::int64_t> first;         // [experts + 1]
  std::vector<std::int64_t> row_of;        // [slots]
  std::vector<std::int64_t> token_of_row;  // [slots]: the token whose x a row is
  std::int64_t rows(std::size_t e) const { return first[e + 1] - first[e]; }
};

Grouping group_by_expert(const std::int32_t* ids, std::int64_t tokens, int top_k, std::size_t experts) {
  const std::int64_t slots = tokens * top_k;
  Grouping g;
  g.first.assign(experts + 1, 0);
  g.row_of.resize(static_cast<std::size_t>(slots));
  g.token_of_row.resize(static_cast<std::size_t>(slots));
  for (std::int64_t s = 0; s < slots; ++s) ++g.first[static_cast<std::size_t>(ids[s]) + 1];
  for (std::size_t e = 0; e < experts; ++e) g.first[e + 1] += g.first[e];
  std::vector<std::int64_t> filled(g.first.begin(), g.first.end() - 1);
  for (std::int64_t s = 0; s < slots; ++s) {
    const std::int64_t row = filled[static_cast<std::size_t>(ids[s])]++;
    g.row_of[static_cast<std::size_t>(s)] = row;
    g.token_of_row[static_cast<std::size_t>(row)] = s / top_k;
  }
  return g;
}

// How an expert with rows runs, by what its calls round into tiles (cpu::linear_rounds_x: the
// tiles prefill):
// - gated: its rows go from x straight into x's tiles (a token tile at a time, gathered in cache),
//   and one gated call computes gate, up and SiLU block by block into the down call's x tiles
//   (cpu::gated_batch): no f32 gate, up or h in memory;
// - else its x rows are gathered into xs, or into x's tiles where both gate and up round x; gate
//   and up write g and u, and SiLU writes h into g, or into the down call's x tiles where down
//   rounds x.
// Offsets are in 32-bit words for the tiles, rows for xs, values for g and u; -1: not there.
struct ExpertLayout {
  bool gated = false;
  std::int64_t x_tiles_at = -1;  // its rows of x as tiles, in x_tiles
  std::int64_t h_tiles_at = -1;  // its h as the down call's tiles, in h_tiles
  std::int64_t xs_first = -1;    // its rows of x in f32, in xs
  std::int64_t gu_first = 0;     // its g and u, [rows, inter] from here (none where gated)
};

struct Layout {
  std::vector<ExpertLayout> experts;
  std::int64_t x_tile_words = 0, h_tile_words = 0, xs_rows = 0, gu_values = 0;
};

Layout lay_out(std::span<const Expert> experts, const Grouping& grouping, std::int64_t hidden, std::int64_t inter,
               cpu::Isa isa) {
  Layout layout;
  layout.experts.resize(experts.size());
  for (std::size_t e = 0; e < experts.size(); ++e) {
    const std::int64_t n = grouping.rows(e);
    const Expert& expert = experts[e];
    ExpertLayout& at = layout.experts[e];
    const bool x_into_tiles = cpu::gated_takes(isa, expert.gate.weight().dtype(), expert.up.weight().dtype(), n);
    const bool down_tiles = cpu::linear_rounds_x(isa, expert.down.weight().dtype(), n);
    at.gated = n > 0 && x_into_tiles && down_tiles;
    at.gu_first = layout.gu_values;
    if (!at.gated) layout.gu_values += n * expert.gate.out_features();
    if (n == 0) continue;
    if (down_tiles) {
      at.h_tiles_at = layout.h_tile_words;
      layout.h_tile_words += static_cast<std::int64_t>(cpu::x_tiles_bytes(n, inter) / 4);
    }
    if (x_into_tiles) {
      at.x_tiles_at = layout.x_tile_words;
      layout.x_tile_words += static_cast<std::int64_t>(cpu::x_tiles_bytes(n, hidden) / 4);
    } else {
      at.xs_first = layout.xs_rows;
      layout.xs_rows += n;
    }
  }
  return layout;
}

// A token tile of an expert's rows: `tile` covers its rows [16 tile, 16 tile + 16).
struct TileItem {
  std::size_t expert;
  std::int64_t tile;  // -1: all of its rows at once
};

// One grouped call: its inputs, grouping, layout and buffers (the calling thread's, kept between
// calls: a prefill's layers ask for the same sizes).
struct GroupedCall {
  std::span<const Expert> experts;
  const float* x;  // [tokens, hidden]
  const std::int32_t* ids;
  int top_k;
  std::int64_t hidden, inter;
  bool parallel;  // the row-wise steps in parallel regions
  const Grouping& grouping;
  const Layout& layout;
  float *xs, *g, *u, *y;             // [xs_rows, hidden], [gu_values] twice, [slots, hidden]
  std::uint32_t *x_tiles, *h_tiles;  // [x_tile_words], [h_tile_words]

  std::int64_t rows(std::size_t e) const { return grouping.rows(e); }
};

// x's rows into xs, or into x's tiles a token tile at a time.
void gather_rows(const GroupedCall& c) {
  std::vector<TileItem> items;
  for (std::size_t e = 0; e < c.experts.size(); ++e)
    if (c.layout.experts[e].x_tiles_at >= 0)
      for (std::int64_t t = 0; t * kTileTokens < c.rows(e); ++t) items.push_back({e, t});
  const std::int64_t slots = static_cast<std::int64_t>(c.grouping.row_of.size());
  const auto tile_words = static_cast<std::int64_t>(cpu::x_tiles_bytes(kTileTokens, c.hidden) / 4);
#pragma omp parallel if (c.parallel)
  {
#pragma omp for nowait
    for (std::int64_t s = 0; s < slots; ++s) {
      const auto e = static_cast<std::size_t>(c.ids[s]);
      const std::int64_t xs_first = c.layout.experts[e].xs_first;
      if (xs_first >= 0)
        std::copy_n(c.x + s / c.top_k * c.hidden, c.hidden,
                    c.xs + (xs_first + c.grouping.row_of[static_cast<std::size_t>(s)] - c.grouping.first[e]) * c.hidden);
    }
#pragma omp for schedule(dynamic, 4)
    for (std::size_t i = 0; i < items.size(); ++i) {
      const TileItem item = items[i];
      thread_local std::vector<float> kept_rows;
      float* const rows = kept_buffer(kept_rows, kTileTokens * c.hidden);  // [16, hidden]: one token tile's rows
      const std::int64_t row = c.grouping.first[item.expert] + item.tile * kTileTokens;
      const std::int64_t count = std::min(kTileTokens, c.grouping.first[item.expert + 1] - row);
      for (std::int64_t r = 0; r < count; ++r)
        std::copy_n(c.x + c.grouping.token_of_row[static_cast<std::size_t>(row + r)] * c.hidden, c.hidden,
                    rows + r * c.hidden);
      cpu::write_x_tiles(rows, count, c.hidden, 0,
                         c.x_tiles + c.layout.experts[item.expert].x_tiles_at + item.tile * tile_words);
    }
  }
}

// The gated experts in one batch; the others' gate and up projections in another (gate and up
// share x's rounded tiles).
void run_gate_and_up(const GroupedCall& c) {
  std::vector<cpu::GatedCall> gated;
  std::vector<cpu::LinearCall> calls;
  for (std::size_t e = 0; e < c.experts.size(); ++e) {
    const std::int64_t n = c.rows(e);
    if (n == 0) continue;
    const Expert& expert = c.experts[e];
    const ExpertLayout& at = c.layout.experts[e];
    if (at.gated) {
      gated.push_back({c.x_tiles + at.x_tiles_at, n, c.hidden, expert.gate.weight().data(), expert.gate.weight().dtype(),
                       expert.up.weight().data(), expert.up.weight().dtype(), c.inter, c.h_tiles + at.h_tiles_at});
      continue;
    }
    const bool tiles = at.x_tiles_at >= 0;
    const float* xe = tiles ? c.x : c.xs + at.xs_first * c.hidden;  // (tiles: x unread)
    calls.push_back(expert.gate.cpu_call(xe, n, c.g + at.gu_first));
    if (tiles) calls.back().x_tiles = c.x_tiles + at.x_tiles_at;
    calls.push_back(expert.up.cpu_call(xe, n, c.u + at.gu_first));
    if (tiles) calls.back().x_tiles = c.x_tiles + at.x_tiles_at;
  }
  cpu::linear_batch(calls);
  cpu::gated_batch(gated);
}

// SiLU of the experts not gated: where the down call rounds x into tiles, each token tile's rows of
// silu(g) * u go into them while in cache; other experts' rows are written to g for their down
// call to read.
void run_silu(const GroupedCall& c) {
  std::vector<TileItem> items;
  for (std::size_t e = 0; e < c.experts.size(); ++e) {
    const std::int64_t n = c.rows(e);
    if (n == 0 || c.layout.experts[e].gated) continue;
    if (c.layout.experts[e].h_tiles_at < 0) {
      items.push_back({e, -1});
      continue;
    }
    for (std::int64_t t = 0; t * kTileTokens < n; ++t) items.push_back({e, t});
  }
  const auto tile_words = static_cast<std::int64_t>(cpu::x_tiles_bytes(kTileTokens, c.inter) / 4);
#pragma omp parallel for schedule(dynamic, 4) if (c.parallel)
  for (std::size_t i = 0; i < items.size(); ++i) {
    const TileItem item = items[i];
    const ExpertLayout& at = c.layout.experts[item.expert];
    const std::int64_t n = c.rows(item.expert);
    float *const g = c.g + at.gu_first, *const u = c.u + at.gu_first;
    if (item.tile < 0) {
      cpu::silu_and_mul(g, u, n * c.inter, g);
      continue;
    }
    thread_local std::vector<float> kept_rows;
    float* const rows = kept_buffer(kept_rows, kTileTokens * c.inter);  // [16, inter]: one token tile's rows
    const std::int64_t row = item.tile * kTileTokens, count = std::min(kTileTokens, n - row);
    cpu::silu_and_mul(g + row * c.inter, u + row * c.inter, count * c.inter, rows);
    cpu::write_x_tiles(rows, count, c.inter, 0, c.h_tiles + at.h_tiles_at + item.tile * tile_words);
  }
}

// Every expert's down projection in one batch, into its rows of y.
void run_down(const GroupedCall& c) {
  std::vector<cpu::LinearCall> calls;
  for (std::size_t e = 0; e < c.experts.size(); ++e) {
    const std::int64_t n = c.rows(e);
    if (n == 0) continue;
    const ExpertLayout& at = c.layout.experts[e];
    // (x unread where the call takes tiles: a gated expert's h is only there)
    calls.push_back(c.experts[e].down.cpu_call(c.g + at.gu_first, n, c.y + c.grouping.first[e] * c.hidden));
    if (at.h_tiles_at >= 0) calls.back().x_tiles = c.h_tiles + at.h_tiles_at;
  }
  cpu::linear_batch(calls);
}

}  // namespace

RoutedExperts::RoutedExperts(const BuildContext& context, const Module& experts) {
  const ExpertNames names = expert_names(context.tree.config());
  const Device cpu = Device::cpu();
  for (int e : experts.children) {
    const Module& expert = context.tree.at(e);
    experts_.push_back(Expert{LinearOp(context, context.child(expert, names.gate), cpu),
                              LinearOp(context, context.child(expert, names.up), cpu),
                              LinearOp(context, context.child(expert, names.down), cpu)});
    const Expert& added = experts_.back();
    // Both paths multiply the weights alone (cpu::linear on their rows), as no supported family has
    // expert biases; a checkpoint that has them is refused rather than run without them.
    if (added.gate.has_bias() || added.up.has_bias() || added.down.has_bias())
      throw InputError(std::string(expert.name) + ": routed experts with biases are not supported");
  }
  hidden_ = context.tree.config().hidden_size;
}

RoutedExperts::RoutedExperts(std::vector<Expert> experts) : experts_(std::move(experts)) {
  hidden_ = experts_.empty() ? 0 : experts_.front().gate.in_features();
}

void RoutedExperts::forward(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights,
                            int top_k, float* out) const {
  if (tokens * top_k <= kFusedSlots) return forward_fused(x, tokens, ids, weights, top_k, out);
  forward_grouped(x, tokens, ids, weights, top_k, out);
}

void RoutedExperts::forward_grouped(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights,
                                    int top_k, float* out) const {
  const std::int64_t slots = tokens * top_k;
  const std::int64_t inter = experts_.empty() ? 0 : experts_.front().down.in_features();
  const Grouping grouping = group_by_expert(ids, tokens, top_k, experts_.size());
  const Layout layout = lay_out(experts_, grouping, hidden_, inter, cpu::chosen_isa());
  // Buffers kept between calls (kept_buffer). The calling thread's; the parallel loops use their
  // addresses, not the (per-thread) names.
  thread_local std::vector<float> kept_xs, kept_y, kept_g, kept_u;
  thread_local std::vector<std::uint32_t> kept_x_tiles, kept_h_tiles;
  float* const y = kept_buffer(kept_y, slots * hidden_);
  float* const g = kept_buffer(kept_g, layout.gu_values);
  float* const u = kept_buffer(kept_u, layout.gu_values);
  float* const xs = kept_buffer(kept_xs, layout.xs_rows * hidden_);
  std::uint32_t* const x_tiles = kept_aligned_words(kept_x_tiles, layout.x_tile_words);
  std::uint32_t* const h_tiles = kept_aligned_words(kept_h_tiles, layout.h_tile_words);
  // The row-wise steps around the projections run parallel too: with the projections on AMX tiles
  // this fast, serial row steps would leave the other cores idle for a large share of prefill.
  const GroupedCall call{experts_, x,  ids, top_k, hidden_, inter, slots * hidden_ >= kMinParallelRowWork,
                         grouping, layout, xs, g, u, y, x_tiles, h_tiles};
  gather_rows(call);
  run_gate_and_up(call);
  run_silu(call);
  run_down(call);
  // Each token's rows in slot order, as forward_fused adds them.
#pragma omp parallel for if (call.parallel)
  for (std::int64_t t = 0; t < tokens; ++t) {
    float* row = out + t * hidden_;
    std::fill(row, row + hidden_, 0.0f);
    for (std::int64_t s = t * top_k; s < (t + 1) * top_k; ++s) {
      const float w = weights[s];
      const float* ys = y + grouping.row_of[static_cast<std::size_t>(s)] * hidden_;
      for (std::int64_t i = 0; i < hidden_; ++i) row[i] += w * ys[i];
    }
  }
}

void RoutedExperts::forward_fused(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights,
                                  int top_k, float* out) const {
  // One parallel region for the whole layer: threads share out the rows of every selected
  // expert's gate and up projections, then of the down projections. A projection per fork-join
  // would cost 3 * top_k of them per token; the weights are streamed once either way, and
  // cpu::linear runs on the calling thread inside the region.
  // Items go to threads as they ask (dynamic): a phase ends when its last item does, and with a
  // static split one slow or preempted core would hold up every layer. 32 rows an item: enough
  // work to amortise taking it, small enough to balance.
  // No barrier between the phases: items are taken in order, gate/up ones first, and a down item of
  // slot s waits only for slot s's gate/up items, all of which were taken before it (by threads
  // that are running them), so the phases overlap by up to an item a thread and nothing deadlocks.
  constexpr std::int64_t kRows = 32;
  const std::int64_t slots = tokens * top_k;
  const std::int64_t inter = experts_.front().gate.out_features();
  const std::int64_t up_items = (inter + kRows - 1) / kRows, down_items = (hidden_ + kRows - 1) / kRows;
  const std::int64_t up_total = slots * up_items, all_items = up_total + slots * down_items;
  // h: [slots, inter], y: [slots, hidden]; the calling thread's, kept between calls (decode calls
  // this for every layer of every step). Written in full before they are read.
  thread_local std::vector<float> kept_h, kept_y;
  kept_h.resize(static_cast<std::size_t>(slots * inter));
  kept_y.resize(static_cast<std::size_t>(slots * hidden_));
  float *const h = kept_h.data(), *const y = kept_y.data();
  std::unique_ptr<std::atomic<std::int64_t>[]> up_done(new std::atomic<std::int64_t>[static_cast<std::size_t>(slots)]);
  for (std::int64_t s = 0; s < slots; ++s) up_done[static_cast<std::size_t>(s)].store(0, std::memory_order_relaxed);
  std::atomic<std::int64_t> next{0};
  // x and each slot's h keep their values through this call: the items' quantised x is reused per
  // thread without comparing it (cpu::linear_versioned_x).
  const std::uint64_t version = cpu::new_x_version();
  // Row `first` of a [rows, in] weight (plain dtypes: row-major, whole elements).
  auto row = [](const Tensor& w, std::int64_t first) {
    return static_cast<const char*>(w.data()) +
           storage_bytes(w.dtype(), static_cast<std::uint64_t>(first * w.dim(1)));
  };
  auto up_item = [&](std::int64_t item, float* g, float* u) {
    const std::int64_t slot = item / up_items, first = item % up_items * kRows;
    const std::int64_t rows = std::min(kRows, inter - first);
    const Expert& e = experts_[static_cast<std::size_t>(ids[slot])];
    const float* xs = x + slot / top_k * hidden_;
    cpu::linear_versioned_x(version, xs, 1, hidden_, row(e.gate.weight(), first), e.gate.weight().dtype(), rows, g);
    cpu::linear_versioned_x(version, xs, 1, hidden_, row(e.up.weight(), first), e.up.weight().dtype(), rows, u);
    cpu::silu_and_mul(g, u, rows, h + slot * inter + first);
    up_done[static_cast<std::size_t>(slot)].fetch_add(1, std::memory_order_release);
  };
  auto down_item = [&](std::int64_t item) {
    const std::int64_t slot = item / down_items, first = item % down_items * kRows;
    const std::int64_t rows = std::min(kRows, hidden_ - first);
    while (up_done[static_cast<std::size_t>(slot)].load(std::memory_order_acquire) < up_items) cpu_relax();
    const Tensor& down = experts_[static_cast<std::size_t>(ids[slot])].down.weight();
    cpu::linear_versioned_x(version, h + slot * inter, 1, inter, row(down, first), down.dtype(), rows,
                            y + slot * hidden_ + first);
  };
#pragma omp parallel
  {
    float g[kRows], u[kRows];
    for (std::int64_t item = next.fetch_add(1, std::memory_order_relaxed); item < all_items;
         item = next.fetch_add(1, std::memory_order_relaxed)) {
      if (item < up_total) up_item(item, g, u);
      else down_item(item - up_total);
    }
  }
  // In slot order, as the grouped path adds them.
  std::fill(out, out + tokens * hidden_, 0.0f);
  for (std::int64_t slot = 0; slot < slots; ++slot) {
    float* out_row = out + slot / top_k * hidden_;
    const float w = weights[slot];
    const float* ys = y + slot * hidden_;
    for (std::int64_t i = 0; i < hidden_; ++i) out_row[i] += w * ys[i];
  }
}

}  // namespace switchyard
