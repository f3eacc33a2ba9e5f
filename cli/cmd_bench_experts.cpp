// switchyard bench experts: one MoE layer's routed experts on the CPU, with weights of one dtype
// (bf16 by default, or a ggml block type such as q4_k), as decode steps of a few tokens (top-k
// experts each: bandwidth bound) and a prefill (compute bound), beside the STREAM triad bandwidth
// measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <set>

#include "core/arch_presets.h"
#include "core/quant_formats.h"
#include "core/statistics.h"
#include "core/error.h"
#include "core/stream_triad.h"
#include "core/text.h"
#include "cli/bench_experts.h"
#include "cli/model_options.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/linear.h"
#include "operators/cpu/routed_experts.h"

namespace switchyard::cli {
namespace {

using Clock = std::chrono::steady_clock;

// A [rows, cols] tensor of random values: normals of sd 0.02 for plain dtypes; for block types
// random bytes with every half-float scale a random finite value near 2^-10 (weights of order 0.02).
Tensor random_weights(DType dtype, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  Tensor t = Tensor::empty(dtype, {rows, cols});
  const auto unit = static_cast<std::size_t>(dtype_info(dtype).block_bytes);  // a block, or one element
  // Fill a pattern of random units and tile it: generating gigabytes of normals would dominate.
  std::vector<std::uint8_t> pattern(unit * 4096);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> scale(0.5f / 1024, 1.5f / 1024);
  for (std::size_t u = 0; u < 4096; ++u) {
    std::uint8_t* at = pattern.data() + u * unit;
    if (dtype == DType::bf16 || dtype == DType::f16) {
      const float v = normal(rng);
      const std::uint16_t bits = dtype == DType::bf16 ? cpu::f32_to_bf16(v) : cpu::f32_to_f16(v);
      std::memcpy(at, &bits, 2);
    } else if (dtype == DType::f32) {
      const float v = normal(rng);
      std::memcpy(at, &v, 4);
    } else {
      for (std::size_t i = 0; i < unit; i += 4) {  // block sizes are even: two bytes at least per draw
        const std::uint32_t bits = rng();
        std::memcpy(at + i, &bits, std::min<std::size_t>(4, unit - i));
      }
      quant::set_block_scales(dtype, at, scale(rng), scale(rng));
    }
  }
  auto* data = t.data_as<std::uint8_t>();
  const auto units = static_cast<std::int64_t>(storage_bytes(dtype, static_cast<std::uint64_t>(rows * cols)) / unit);
  const auto shift = static_cast<std::int64_t>(rng() % 4096);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < units; ++i)
    std::memcpy(data + static_cast<std::size_t>(i) * unit, pattern.data() + static_cast<std::size_t>((i + shift) % 4096) * unit, unit);
  return t;
}

DType weight_dtype_named(const std::string& name) {
  const std::string lower = to_lower(name);  // Q4_K as llama.cpp spells it, or q4_k
  for (const DTypeInfo& info : all_dtypes())
    if (lower == info.name && cpu::linear_supports(info.dtype)) return info.dtype;
  std::string names;
  for (const DTypeInfo& info : all_dtypes())
    if (cpu::linear_supports(info.dtype)) names += (names.empty() ? "" : ", ") + std::string(info.name);
  throw InputError("--weight_dtype " + quoted_argument(name) + " is not a dtype the CPU experts run; they run " + names);
}

}  // namespace

ExpertsBenchRow bench_experts_shape(const ModelConfig& config, const ExpertsBenchOptions& options) {
  const DType dtype = weight_dtype_named(options.weight_dtype);
  const std::int64_t hidden = config.hidden_size, inter = config.moe_intermediate_size;
  const int top_k = config.num_experts_per_tok;
  // Enough experts that every decode step reads from DRAM, not from a cache warmed by the last.
  const int pool = std::min(config.n_routed_experts, std::max(4 * top_k, options.min_experts));
  std::mt19937 rng(options.seed);
  std::vector<RoutedExperts::Expert> experts;
  for (int e = 0; e < pool; ++e)
    experts.push_back(RoutedExperts::Expert{LinearOp(random_weights(dtype, inter, hidden, rng)),
                                            LinearOp(random_weights(dtype, inter, hidden, rng)),
                                            LinearOp(random_weights(dtype, hidden, inter, rng))});
  const RoutedExperts op(std::move(experts));
  const double expert_bytes = 3.0 * static_cast<double>(storage_bytes(dtype, static_cast<std::uint64_t>(hidden * inter)));
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
  const std::int64_t most_tokens =
      std::max(options.prefill_tokens, *std::max_element(options.decode_tokens.begin(), options.decode_tokens.end()));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(most_tokens * hidden));
  for (float& v : x) v = normal(rng);
  std::vector<float> out(x.size());
  std::vector<std::int32_t> ids;
  std::vector<float> weights;

  ExpertsBenchRow row;
  row.config = config;
  row.pool = pool;
  // With ab_option, the flags' options (A) and those with its assignments (B) in turns A B B A, each
  // side its own median.
  const cpu::KernelOptions a = options.cpu_kernel_flags.options();
  const cpu::KernelOptions b = with_assignments(a, options.ab_option);
  auto use_side = [&](int side) { cpu::set_kernel_options(side == 1 ? b : a); };  // no kernel runs between steps
  const int sides = options.ab_option.empty() ? 1 : 2;
  // The side of round `round` when the first `warmup` rounds are not timed: the warm-up alternates
  // A B A ..., the timed rounds go A B B A A B B A ..., so neither side always runs first.
  auto side_of = [&](int round, int warmup) {
    if (sides == 1) return 0;
    if (round < warmup) return round % 2;
    const int t = (round - warmup) % 4;
    return t == 1 || t == 2 ? 1 : 0;
  };
  for (const std::int64_t tokens : options.decode_tokens) {
    std::vector<double> seconds[2];
    double touched[2] = {0, 0};
    constexpr int kWarmup = 3;
    for (int r = 0; r < sides * options.repeat + kWarmup; ++r) {
      const int side = side_of(r, kWarmup);
      use_side(side);
      route(tokens, ids, weights);
      const auto start = Clock::now();
      op.forward(x.data(), tokens, ids.data(), weights.data(), top_k, out.data());
      if (r < kWarmup) continue;
      seconds[side].push_back(std::chrono::duration<double>(Clock::now() - start).count());
      touched[side] += static_cast<double>(std::set<std::int32_t>(ids.begin(), ids.end()).size());
    }
    use_side(0);
    for (int side = 0; side < sides; ++side)
      row.decode.push_back({tokens, sides == 1 ? "" : side == 0 ? "A" : "B", median(seconds[side]),
                            touched[side] / static_cast<double>(seconds[side].size()) * expert_bytes});
  }
  std::vector<double> prefill[2];
  {
    constexpr int kWarmup = 1;
    for (int r = 0; r < sides * std::max(2, options.repeat / 4) + kWarmup; ++r) {
      const int side = side_of(r, kWarmup);
      use_side(side);
      route(options.prefill_tokens, ids, weights);
      const auto start = Clock::now();
      op.forward(x.data(), options.prefill_tokens, ids.data(), weights.data(), top_k, out.data());
      if (r < kWarmup) continue;
      prefill[side].push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    use_side(0);
  }
  row.prefill_seconds = median(prefill[0]);
  if (!prefill[1].empty()) row.prefill_seconds_b = median(prefill[1]);
  if (options.stages && is_block_quantized(dtype) && cpu::prefill_stages_supported()) {
    // Every expert's three matrices, at the prefill's mean tokens an expert.
    std::vector<cpu::PanelSource> matrices;
    for (const RoutedExperts::Expert& e : op.experts())
      for (const LinearOp* linear : {&e.gate, &e.up, &e.down})
        matrices.push_back({linear->weight().data(), dtype, linear->out_features(), linear->in_features()});
    row.stage_tokens = std::max<std::int64_t>(1, options.prefill_tokens * top_k / pool);
    row.stages = cpu::time_prefill_stages(matrices, row.stage_tokens);
    if (sides == 2) {
      use_side(1);
      row.stages_b = cpu::time_prefill_stages(matrices, row.stage_tokens);
      use_side(0);
    }
  }
  row.prefill_flops = static_cast<double>(options.prefill_tokens) * top_k * 3.0 * 2.0 * static_cast<double>(hidden * inter);
  return row;
}

int run_bench_experts(const ExpertsBenchOptions& options) {
  apply_cpu_threads(options.threads);
  apply_cpu_kernels(options.cpu_kernels);
  with_assignments(options.cpu_kernel_flags.options(), options.ab_option);  // a bad --ab_option before the STREAM run
  const DType dtype = weight_dtype_named(options.weight_dtype);  // before the STREAM run: a typo costs no minute
  std::vector<std::string> shapes = options.shapes;
  if (shapes.empty()) shapes = {"deepseek-v2-lite", "deepseek-v3"};
  for (const std::string& shape : shapes)
    if (!find_arch_preset(shape)) {
      std::string presets;
      for (const ArchPreset& p : arch_presets()) presets += (presets.empty() ? "" : ", ") + p.name;
      throw InputError("--shape " + quoted_argument(shape) + " is not a preset; presets: " + presets);
    }
  const StreamResult stream = stream_triad(options.stream_bytes);
  const cpu::Isa isa = cpu::chosen_isa();
  if (options.stages && !is_block_quantized(dtype))
    std::printf("(--stages times the block types' tiles prefill; %s weights have no such stages)\n", dtype_name(dtype));
  else if (options.stages && !cpu::prefill_stages_supported())
    std::printf("(--stages times the block types' tiles prefill, which this CPU does not run: it needs AMX or "
                "AVX512-BF16)\n");
  std::printf("bench experts: %d threads, %s weights, CPU kernels %s; ", stream.threads, dtype_name(dtype), cpu::isa_name(isa));
  const bool rounds = cpu::linear_rounds_x(isa, dtype, options.prefill_tokens);
  if (is_block_quantized(dtype)) {
    std::printf("decode x quantised to 8-bit blocks, integer dot products; prefill ");
    if (rounds)
      std::printf("(expert groups of %lld tokens or more) bf16 x against bf16 panels of the dequantised weights, %s\n",
                  static_cast<long long>(cpu::kQuantPrefillTokens),
                  isa == cpu::Isa::amx ? "on AMX tiles" : "by AVX512-BF16's dot products");
    else if (cpu::linear_quantizes_x(dtype, options.prefill_tokens))
      std::printf("the same\n");
    else
      std::printf("(expert groups of %lld tokens or more) f32 x on dequantised f32 weight panels\n",
                  static_cast<long long>(cpu::kQuantPrefillTokens));
  } else {
    // Decode's few tokens keep f32 activations; the prefill's expert groups may round them (AMX).
    std::printf("decode f32 activations, prefill %s", rounds ? "bf16 activations on AMX tiles (expert groups of " : "f32 activations");
    if (rounds) std::printf("%lld tokens or more)", static_cast<long long>(cpu::kAmxTokens));
    std::printf("\n");
  }
  std::printf("ceiling: STREAM triad %.1f GB/s (3 arrays x %zu MiB, best of 5)\n\n", stream.bytes_per_second / 1e9,
              stream.array_bytes >> 20);
  std::printf("%-18s %7s %5s %6s %6s | %6s %10s %8s %8s | %12s %9s %10s\n", "shape", "experts", "top-k", "hidden", "inter",
              "tokens", "decode ms", "GB/s", "% STREAM", "prefill ms", "TFLOP/s", "tokens/s");
  for (const std::string& shape : shapes) {
    const ModelConfig config = preset_model_config(shape);
    const int block = dtype_info(dtype).block_elements;
    if (config.hidden_size % block != 0 || config.moe_intermediate_size % block != 0) {
      std::printf("%-18s skipped: hidden %lld or inter %lld is not a multiple of %s's %d-weight block\n", shape.c_str(),
                  static_cast<long long>(config.hidden_size), static_cast<long long>(config.moe_intermediate_size),
                  dtype_name(dtype), block);
      continue;
    }
    const ExpertsBenchRow row = bench_experts_shape(config, options);
    for (std::size_t i = 0; i < row.decode.size(); ++i) {
      const ExpertsBenchDecode& d = row.decode[i];
      const double gbps = d.bytes / d.seconds / 1e9;
      std::printf("%-18s %7d %5d %6lld %6lld | %6lld %10.3f %8.1f %7.0f%% |", i == 0 ? shape.c_str() : "", row.pool,
                  row.config.num_experts_per_tok, static_cast<long long>(row.config.hidden_size),
                  static_cast<long long>(row.config.moe_intermediate_size), static_cast<long long>(d.tokens), d.seconds * 1e3,
                  gbps, 100.0 * gbps * 1e9 / stream.bytes_per_second);
      if (!d.side.empty()) std::printf(" %s |", d.side == "A" ? "A" : ("B: " + options.ab_option).c_str());
      if (i == 0)
        std::printf(" %12.2f %9.3f %10.1f\n", row.prefill_seconds * 1e3, row.prefill_flops / row.prefill_seconds / 1e12,
                    static_cast<double>(options.prefill_tokens) / row.prefill_seconds);
      else
        std::printf("\n");
    }
    for (const cpu::PrefillStageTimes* stages : {&row.stages, &row.stages_b}) {
      const cpu::PrefillStageTimes& s = *stages;
      if (s.panels == 0) continue;
      const std::string side = stages == &row.stages_b ? " with " + options.ab_option : "";
      const double flops = 2.0 * static_cast<double>(s.weights) * static_cast<double>(row.stage_tokens);
      std::printf("%-18s prefill stages%s, %lld panels of 32 rows (every expert once, %lld tokens a call): panels "
                  "alone %.2f ms (%.1f G weights/s), tiles alone %.2f ms (%.3f TFLOP/s, %s), both %.2f ms\n",
                  "", side.c_str(), static_cast<long long>(s.panels), static_cast<long long>(row.stage_tokens),
                  s.panels_seconds * 1e3, static_cast<double>(s.weights) / s.panels_seconds / 1e9,
                  s.tiles_seconds * 1e3, flops / s.tiles_seconds / 1e12, s.tiles_kernel, s.both_seconds * 1e3);
    }
    if (row.prefill_seconds_b > 0)
      std::printf("%-18s prefill with %s: %.2f ms, %.3f TFLOP/s, %.1f tokens/s (A: %.2f ms; B / A %.3f)\n", "",
                  options.ab_option.c_str(), row.prefill_seconds_b * 1e3,
                  row.prefill_flops / row.prefill_seconds_b / 1e12,
                  static_cast<double>(options.prefill_tokens) / row.prefill_seconds_b, row.prefill_seconds * 1e3,
                  row.prefill_seconds_b / row.prefill_seconds);
  }
  std::printf("\ndecode: steps of `tokens` tokens through top-k experts each (GB/s of the distinct experts' weight bytes "
              "a step touches, each read once)\n"
              "prefill: %lld tokens, random top-k routing over the pool; target decode >= 90%% of STREAM\n",
              static_cast<long long>(options.prefill_tokens));
  return 0;
}

}  // namespace switchyard::cli
