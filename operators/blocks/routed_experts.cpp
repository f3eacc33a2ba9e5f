#include "operators/blocks/routed_experts.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/error.h"
#include "operators/kernels/cpu/kept_buffer.h"
#include "operators/kernels/cpu/kernel_variants.h"
#include "operators/kernels/cpu/linear.h"
#include "operators/kernels/cpu/silu_and_mul.h"

namespace switchyard {
namespace {

// Values below which a row-wise loop (gather, SiLU, weighted add) runs on one thread: a parallel
// region costs a few microseconds.
constexpr std::int64_t kMinParallelRowWork = 1 << 15;

thread_local RoutedExperts::GroupedSeconds last_grouped;  // the calling thread's last grouped call
std::mutex totals_mutex;  // a grouped call adds to the totals once, at its end (a prefill's layers)
RoutedExperts::GroupedTotals totals;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point& mark) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - mark).count();
  mark = now;
  return seconds;
}

using cpu::kept_aligned_words;
using cpu::kept_buffer;

// A spinning thread's pause (a decode item waiting for its slot's gate and up items).
inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
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
  // Rows grouped by expert, so each expert's weights are read once: slot s = token * top_k + k goes
  // to row row_of[s], expert e's rows from first[e] on.
  const std::int64_t slots = tokens * top_k;
  GroupedSeconds seconds;
  Clock::time_point mark = Clock::now();
  std::vector<std::int64_t> first(experts_.size() + 1, 0), row_of(static_cast<std::size_t>(slots));
  for (std::int64_t s = 0; s < slots; ++s) ++first[static_cast<std::size_t>(ids[s]) + 1];
  for (std::size_t e = 0; e < experts_.size(); ++e) first[e + 1] += first[e];
  {
    std::vector<std::int64_t> filled(first.begin(), first.end() - 1);
    for (std::int64_t s = 0; s < slots; ++s) row_of[static_cast<std::size_t>(s)] = filled[static_cast<std::size_t>(ids[s])]++;
  }
  // The row-wise steps around the projections run parallel too: with the projections on AMX tiles
  // this fast, serial row steps would leave the other cores idle for a large share of prefill.
  const bool parallel = slots * hidden_ >= kMinParallelRowWork;
  const cpu::Isa isa = cpu::chosen_isa();
  const cpu::KernelVariants& variants = cpu::kernel_variants();
  const std::int64_t inter = experts_.empty() ? 0 : experts_.front().down.in_features();
  // How each expert with tokens runs, by what its calls round into tiles (cpu::linear_rounds_x:
  // the tiles prefill):
  // - gated: its rows go from x straight into x's tiles (16, a token tile, gathered in cache at a
  //   time), and one gated call computes gate, up and SiLU block by block into the down call's x
  //   tiles (cpu::gated_batch): no f32 gate, up or h in memory;
  // - else its x rows are gathered into xs (expert e's from row xs_first[e] on), or into x's tiles
  //   where both gate and up round x; gate and up write g and u (from inter_first[e] on), and SiLU
  //   writes h into g, or into the down call's x tiles where down rounds x.
  struct TileItem {
    std::size_t expert;
    std::int64_t tile;  // the expert's token tile
  };
  std::vector<TileItem> x_tile_items;
  std::vector<std::int64_t> x_tiles_at(experts_.size(), -1);  // word offsets into x_tiles; -1: rows into xs
  std::vector<std::int64_t> tiles_at(experts_.size(), -1);    // the down calls' x tiles: word offsets into `tiles`
  std::vector<std::int64_t> xs_first(experts_.size(), -1);
  std::vector<std::int64_t> inter_first(experts_.size() + 1, 0);  // the not gated experts' g and u
  std::vector<char> gated(experts_.size(), 0);
  std::int64_t x_tile_words = 0, xs_rows = 0, tile_words = 0;
  for (std::size_t e = 0; e < experts_.size(); ++e) {
    const std::int64_t n = first[e + 1] - first[e];
    const Expert& expert = experts_[e];
    const bool x_into_tiles = !variants.experts_gather_rows &&
                              cpu::gated_takes(isa, expert.gate.weight().dtype(), expert.up.weight().dtype(), n);
    const bool down_tiles = cpu::linear_rounds_x(isa, expert.down.weight().dtype(), n);
    gated[e] = n > 0 && x_into_tiles && down_tiles && !variants.experts_silu_apart && !variants.experts_gate_up_apart;
    inter_first[e + 1] = inter_first[e] + (gated[e] ? 0 : n * expert.gate.out_features());
    if (n == 0) continue;
    if (down_tiles && !variants.experts_silu_apart) {
      tiles_at[e] = tile_words;
      tile_words += static_cast<std::int64_t>(cpu::x_tiles_bytes(n, inter) / 4);
    }
    if (!x_into_tiles) {
      xs_first[e] = xs_rows;
      xs_rows += n;
      continue;
    }
    x_tiles_at[e] = x_tile_words;
    x_tile_words += static_cast<std::int64_t>(cpu::x_tiles_bytes(n, hidden_) / 4);
    for (std::int64_t t = 0; t * 16 < n; ++t) x_tile_items.push_back({e, t});
  }
  // Buffers kept between calls (kept_buffer). The calling thread's; the parallel loops below use
  // their addresses, not the (per-thread) names.
  thread_local std::vector<float> kept[4];
  float* const y = kept_buffer(kept[1], slots * hidden_);
  float* const g = kept_buffer(kept[2], inter_first.back());
  float* const u = kept_buffer(kept[3], inter_first.back());
  std::vector<std::int64_t> token_of_row(static_cast<std::size_t>(slots));
  for (std::int64_t s = 0; s < slots; ++s) token_of_row[static_cast<std::size_t>(row_of[static_cast<std::size_t>(s)])] = s / top_k;
  float* const xs = kept_buffer(kept[0], xs_rows * hidden_);
  thread_local std::vector<std::uint32_t> kept_x_tiles, kept_tiles;
  std::uint32_t* const x_tiles = kept_aligned_words(kept_x_tiles, x_tile_words);
  std::uint32_t* const tiles = kept_aligned_words(kept_tiles, tile_words);
  const auto hidden_tile_words = static_cast<std::int64_t>(cpu::x_tiles_bytes(16, hidden_) / 4);  // one token tile
#pragma omp parallel if (parallel)
  {
#pragma omp for nowait
    for (std::int64_t s = 0; s < slots; ++s) {
      const auto e = static_cast<std::size_t>(ids[s]);
      if (xs_first[e] >= 0)
        std::copy_n(x + s / top_k * hidden_, hidden_, xs + (xs_first[e] + row_of[static_cast<std::size_t>(s)] - first[e]) * hidden_);
    }
#pragma omp for schedule(dynamic, 4)
    for (std::size_t i = 0; i < x_tile_items.size(); ++i) {
      const TileItem item = x_tile_items[i];
      thread_local std::vector<float> kept_rows;
      float* const rows = kept_buffer(kept_rows, 16 * hidden_);  // [16, hidden]: one token tile's rows
      const std::int64_t row = first[item.expert] + item.tile * 16;
      const std::int64_t count = std::min<std::int64_t>(16, first[item.expert + 1] - row);
      for (std::int64_t r = 0; r < count; ++r)
        std::copy_n(x + token_of_row[static_cast<std::size_t>(row + r)] * hidden_, hidden_, rows + r * hidden_);
      cpu::write_x_tiles(rows, count, hidden_, 0, x_tiles + x_tiles_at[item.expert] + item.tile * hidden_tile_words);
    }
  }
  seconds.gather = seconds_since(mark);
  // The gated experts in one batch; the others' gate and up projections in another (gate and up
  // share x's rounded tiles).
  std::vector<cpu::GatedCall> gated_calls;
  std::vector<cpu::LinearCall> calls;
  for (std::size_t e = 0; e < experts_.size(); ++e) {
    const std::int64_t n = first[e + 1] - first[e];
    if (n == 0) continue;
    const Expert& expert = experts_[e];
    if (gated[e]) {
      gated_calls.push_back({x_tiles + x_tiles_at[e], n, hidden_, expert.gate.weight().data(), expert.gate.weight().dtype(),
                             expert.up.weight().data(), expert.up.weight().dtype(), inter, tiles + tiles_at[e]});
      continue;
    }
    const float* xe = x_tiles_at[e] >= 0 ? x : xs + xs_first[e] * hidden_;  // (tiles: x unread)
    calls.push_back(expert.gate.cpu_call(xe, n, g + inter_first[e]));
    if (x_tiles_at[e] >= 0) calls.back().x_tiles = x_tiles + x_tiles_at[e];
    calls.push_back(expert.up.cpu_call(xe, n, u + inter_first[e]));
    if (x_tiles_at[e] >= 0) calls.back().x_tiles = x_tiles + x_tiles_at[e];
  }
  cpu::linear_batch(calls);
  seconds.gate_up_prep = cpu::last_batch_seconds().prep;
  cpu::gated_batch(gated_calls);
  seconds.gate_up = seconds_since(mark);
  // SiLU of the experts not gated: where the down call rounds x into tiles, each token tile's 16
  // rows of silu(g) * u go into them while in cache, and the down batch reads those; other
  // experts' rows are written to g for their down call to read.
  struct SiluItem {
    std::size_t expert;
    std::int64_t tile;  // the token tile rounded into tiles_at[expert]; -1: the expert's rows into g
  };
  const auto token_tile_words = static_cast<std::int64_t>(cpu::x_tiles_bytes(16, inter) / 4);  // one token tile
  std::vector<SiluItem> silu_items;
  for (std::size_t e = 0; e < experts_.size(); ++e) {
    const std::int64_t n = first[e + 1] - first[e];
    if (n == 0 || gated[e]) continue;
    if (tiles_at[e] < 0) {
      silu_items.push_back({e, -1});
      continue;
    }
    for (std::int64_t t = 0; t * 16 < n; ++t) silu_items.push_back({e, t});
  }
#pragma omp parallel for schedule(dynamic, 4) if (parallel)
  for (std::size_t i = 0; i < silu_items.size(); ++i) {
    const SiluItem item = silu_items[i];
    const std::int64_t e_first = inter_first[item.expert], n = first[item.expert + 1] - first[item.expert];
    if (item.tile < 0) {
      cpu::silu_and_mul(g + e_first, u + e_first, n * inter, g + e_first);
      continue;
    }
    thread_local std::vector<float> kept_rows;
    float* const rows = kept_buffer(kept_rows, 16 * inter);  // [16, inter]: one token tile's rows
    const std::int64_t row = item.tile * 16, count = std::min<std::int64_t>(16, n - row);
    cpu::silu_and_mul(g + e_first + row * inter, u + e_first + row * inter, count * inter, rows);
    cpu::write_x_tiles(rows, count, inter, 0, tiles + tiles_at[item.expert] + item.tile * token_tile_words);
  }
  seconds.silu = seconds_since(mark);
  calls.clear();
  for (std::size_t e = 0; e < experts_.size(); ++e) {
    const std::int64_t n = first[e + 1] - first[e];
    if (n == 0) continue;
    // (x unread where the call takes tiles: a gated expert's h is only there)
    calls.push_back(experts_[e].down.cpu_call(g + inter_first[e], n, y + first[e] * hidden_));
    if (tiles_at[e] >= 0) calls.back().x_tiles = tiles + tiles_at[e];
  }
  cpu::linear_batch(calls);
  seconds.down = seconds_since(mark);
  seconds.down_prep = cpu::last_batch_seconds().prep;
  // Each token's rows in slot order, as forward_fused adds them.
#pragma omp parallel for if (parallel)
  for (std::int64_t t = 0; t < tokens; ++t) {
    float* row = out + t * hidden_;
    std::fill(row, row + hidden_, 0.0f);
    for (std::int64_t s = t * top_k; s < (t + 1) * top_k; ++s) {
      const float w = weights[s];
      const float* ys = y + row_of[static_cast<std::size_t>(s)] * hidden_;
      for (std::int64_t i = 0; i < hidden_; ++i) row[i] += w * ys[i];
    }
  }
  seconds.scatter = seconds_since(mark);
  last_grouped = seconds;
  const std::lock_guard lock(totals_mutex);
  ++totals.calls;
  totals.seconds += seconds;
}

RoutedExperts::GroupedSeconds RoutedExperts::last_grouped_seconds() { return last_grouped; }

RoutedExperts::GroupedTotals RoutedExperts::grouped_totals() {
  const std::lock_guard lock(totals_mutex);
  return totals;
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
  const cpu::KernelVariants& variants = cpu::kernel_variants();
  // x and each slot's h keep their values through this call: the items' quantised x is reused per
  // thread without comparing it (cpu::linear_versioned_x).
  const std::uint64_t version = variants.experts_compare_x ? 0 : cpu::new_x_version();
  const bool barrier = variants.experts_phase_barrier;
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
    if (barrier) {
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t item = 0; item < up_total; ++item) up_item(item, g, u);
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t item = 0; item < all_items - up_total; ++item) down_item(item);
    } else {
      for (std::int64_t item = next.fetch_add(1, std::memory_order_relaxed); item < all_items;
           item = next.fetch_add(1, std::memory_order_relaxed)) {
        if (item < up_total) up_item(item, g, u);
        else down_item(item - up_total);
      }
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
