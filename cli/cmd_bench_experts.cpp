// switchyard bench experts: one MoE layer's routed experts on the CPU, bf16 weights, as the
// decode step (one token, top-k experts: bandwidth bound) and a 128-token prefill (compute
// bound), beside the STREAM triad bandwidth measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "core/arch_presets.h"
#include "core/statistics.h"
#include "core/error.h"
#include "core/stream_triad.h"
#include "cli/bench_experts.h"
#include "cli/model_options.h"
#include "operators/kernels/cpu/half.h"
#include "operators/kernels/cpu/linear.h"
#include "operators/blocks/routed_experts.h"

namespace switchyard::cli {
namespace {

using Clock = std::chrono::steady_clock;

Tensor random_bf16(std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::bf16, {rows, cols});
  auto* data = t.data_as<std::uint16_t>();
  std::normal_distribution<float> normal(0.0f, 0.02f);
  // Fill a block of random values and tile it: generating gigabytes of normals would dominate.
  std::vector<std::uint16_t> block(1 << 16);
  for (auto& v : block) v = cpu::f32_to_bf16(normal(rng));
  const std::int64_t n = t.numel();
  const auto shift = static_cast<std::size_t>(rng() % block.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) data[i] = block[(static_cast<std::size_t>(i) + shift) % block.size()];
  return t;
}

}  // namespace

ExpertsBenchRow bench_experts_shape(const ModelConfig& config, const ExpertsBenchOptions& options) {
  const std::int64_t hidden = config.hidden_size, inter = config.moe_intermediate_size;
  const int top_k = config.num_experts_per_tok;
  // Enough experts that every decode step reads from DRAM, not from a cache warmed by the last.
  const int pool = std::min(config.n_routed_experts, std::max(4 * top_k, options.min_experts));
  std::mt19937 rng(options.seed);
  std::vector<RoutedExperts::Expert> experts;
  for (int e = 0; e < pool; ++e)
    experts.push_back(RoutedExperts::Expert{LinearOp(random_bf16(inter, hidden, rng)),
                                            LinearOp(random_bf16(inter, hidden, rng)),
                                            LinearOp(random_bf16(hidden, inter, rng))});
  const RoutedExperts op(std::move(experts));
  std::vector<int> order(static_cast<std::size_t>(pool));
  std::iota(order.begin(), order.end(), 0);
  auto route = [&](std::int64_t tokens, std::vector<std::int32_t>& ids, std::vector<float>& weights) {
    ids.resize(static_cast<std::size_t>(tokens * top_k));
    weights.assign(ids.size(), 1.0f / static_cast<float>(top_k));
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int k = 0; k < top_k; ++k) ids[static_cast<std::size_t>(t * top_k + k)] = order[static_cast<std::size_t>(k)];
    }
  };
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(options.prefill_tokens * hidden));
  for (float& v : x) v = normal(rng);
  std::vector<float> out(x.size());
  std::vector<std::int32_t> ids;
  std::vector<float> weights;

  ExpertsBenchRow row;
  row.config = config;
  row.pool = pool;
  std::vector<double> decode;
  for (int r = 0; r < options.repeat + 3; ++r) {
    route(1, ids, weights);
    const auto start = Clock::now();
    op.forward(x.data(), 1, ids.data(), weights.data(), top_k, out.data());
    if (r >= 3) decode.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  row.decode_seconds = median(decode);
  row.decode_bytes = static_cast<double>(top_k) * 3.0 * static_cast<double>(hidden * inter) * 2.0;
  std::vector<double> prefill;
  for (int r = 0; r < std::max(2, options.repeat / 4) + 1; ++r) {
    route(options.prefill_tokens, ids, weights);
    const auto start = Clock::now();
    op.forward(x.data(), options.prefill_tokens, ids.data(), weights.data(), top_k, out.data());
    if (r >= 1) prefill.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  row.prefill_seconds = median(prefill);
  row.prefill_flops = static_cast<double>(options.prefill_tokens) * top_k * 3.0 * 2.0 * static_cast<double>(hidden * inter);
  return row;
}

int run_bench_experts(const ExpertsBenchOptions& options) {
  apply_cpu_threads(options.threads);
  apply_cpu_kernels(options.cpu_kernels);
  std::vector<std::string> shapes = options.shapes;
  if (shapes.empty()) shapes = {"deepseek-v2-lite", "deepseek-v3"};
  for (const std::string& shape : shapes)  // before the STREAM run: a typo costs no minute
    if (!find_arch_preset(shape)) {
      std::string presets;
      for (const ArchPreset& p : arch_presets()) presets += (presets.empty() ? "" : ", ") + p.name;
      throw InputError("--shape " + quoted_argument(shape) + " is not a preset; presets: " + presets);
    }
  const StreamResult stream = stream_triad(options.stream_bytes);
  // Decode's one token keeps f32 activations; the prefill's expert groups may round them (AMX).
  const bool rounds = cpu::linear_rounds_x(cpu::chosen_isa(), DType::bf16, options.prefill_tokens);
  std::printf("bench experts: %d threads, bf16 weights, CPU kernels %s; decode f32 activations, prefill %s", stream.threads,
              cpu::isa_name(cpu::chosen_isa()), rounds ? "bf16 activations on AMX tiles (expert groups of " : "f32 activations");
  if (rounds) std::printf("%lld tokens or more)", static_cast<long long>(cpu::kAmxTokens));
  std::printf("\n");
  std::printf("ceiling: STREAM triad %.1f GB/s (3 arrays x %zu MiB, best of 5)\n\n", stream.bytes_per_second / 1e9,
              stream.array_bytes >> 20);
  std::printf("%-18s %7s %5s %6s %6s | %10s %8s %8s | %12s %9s\n", "shape", "experts", "top-k", "hidden", "inter",
              "decode ms", "GB/s", "% STREAM", "prefill ms", "TFLOP/s");
  for (const std::string& shape : shapes) {
    const ExpertsBenchRow row = bench_experts_shape(preset_model_config(shape), options);
    const double gbps = row.decode_bytes / row.decode_seconds / 1e9;
    std::printf("%-18s %7d %5d %6lld %6lld | %10.3f %8.1f %7.0f%% | %12.2f %9.3f\n", shape.c_str(), row.pool,
                row.config.num_experts_per_tok, static_cast<long long>(row.config.hidden_size),
                static_cast<long long>(row.config.moe_intermediate_size), row.decode_seconds * 1e3, gbps,
                100.0 * gbps * 1e9 / stream.bytes_per_second, row.prefill_seconds * 1e3,
                row.prefill_flops / row.prefill_seconds / 1e12);
  }
  std::printf("\ndecode: one token through top-k experts (weights read once: GB/s of expert bytes touched)\n"
              "prefill: %lld tokens, random top-k routing over the pool; target decode >= 70%% of STREAM\n",
              static_cast<long long>(options.prefill_tokens));
  return 0;
}

}  // namespace switchyard::cli
