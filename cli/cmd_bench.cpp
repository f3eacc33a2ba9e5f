// switchyard bench: measurements that print their own ceilings. `bench check` times the dry run
// phase by phase on one thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/input_file.h"
#include "core/statistics.h"
#include "cli/bench_decode.h"
#include "cli/bench_experts.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "placement/check.h"
#include "placement/report.h"
#include "placement/validate.h"

namespace switchyard::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Timings {
  std::vector<double> describe, parse, walk, validate, memory, report, total;
};

double minimum(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

// `count` rules ahead of a profile, in the shapes large generated profiles take: a third per
// decoder layer's attention projection (they win), a third per routed expert below a
// `recursive: false` experts rule (they never apply), a third unanchored names no module has.
std::string generated_rules(int count, int layers) {
  std::string yaml;
  for (int i = 0; i < count; ++i) {
    const int layer = i % std::max(1, layers);
    std::string pattern;
    switch (i % 3) {
      case 0: pattern = "^model\\\\.layers\\\\." + std::to_string(layer) + "\\\\.self_attn\\\\.o_proj$"; break;
      case 1: pattern = "^model\\\\.layers\\\\." + std::to_string(layer) + "\\\\.mlp\\\\.experts\\\\." + std::to_string(i) + "\\\\."; break;
      default: pattern = "layers\\\\.[0-9]+\\\\.extra_" + std::to_string(i); break;
    }
    yaml += "- match:\n    name: \"" + pattern + "\"\n  replace:\n    class: default\n    kwargs: {generate_device: \"cpu\"}\n";
  }
  return yaml;
}

struct BenchCheckCommand {
  ModelOptions model;
  int repeat = 20;
  int generated = 0;

  int run() const {
    const CheckOptions options = model.to_check_options();
    if (!options.quick_rules.empty() || options.profile.empty())
      throw InputError("bench check times a profile's check: give --optimize_config_path (its quick rules, -ot, "
                       "--cpu-moe and --n-cpu-moe, are not timed)");
    std::string profile_text;
    if (generated > 0) {
      Diagnostics ignored;
      const ModuleTree probe = describe_model(options.model, ignored);
      profile_text = generated_rules(generated, probe.num_layers()) + read_input_file(options.profile, "profile", kMaxProfileBytes);
    }
    Timings t;
    std::size_t modules = 0, tree_size = 0, rule_count = 0;
    for (int i = 0; i < repeat; ++i) {
      CheckResult result;
      const auto start = Clock::now();
      auto phase = Clock::now();
      result.tree = std::make_unique<ModuleTree>(describe_model(options.model, result.diagnostics));
      t.describe.push_back(ms_since(phase));
      phase = Clock::now();
      result.rules = std::make_unique<RuleSet>(generated > 0 ? parse_rules(profile_text, options.profile.string(), result.diagnostics)
                                                             : load_rules(options.profile, result.diagnostics));
      t.parse.push_back(ms_since(phase));
      PlacementOptions placement;
      placement.gpus = options.gpus.value_or(result.rules->gpus_named());
      placement.default_device = options.default_device.value_or(placement.gpus ? Device::cuda(0) : Device::cpu());
      phase = Clock::now();
      result.plan = plan_placement(*result.tree, *result.rules, placement, result.diagnostics);
      t.walk.push_back(ms_since(phase));
      phase = Clock::now();
      validate_plan(result.plan, result.diagnostics);
      t.validate.push_back(ms_since(phase));
      phase = Clock::now();
      result.memory = estimate_memory(result.plan, options.budget);
      check_memory(result.memory, result.diagnostics, result.rules->file.string());
      t.memory.push_back(ms_since(phase));
      phase = Clock::now();
      const std::string table = format_check_table(result, options.budget);
      t.report.push_back(ms_since(phase));
      t.total.push_back(ms_since(start));
      modules = result.plan.visited.size();
      tree_size = result.tree->size();
      rule_count = result.rules->rules.size();
    }
    std::printf("bench check: %s, %s, %zu rules%s, %zu modules in the tree, %zu visited, %d runs, one thread\n",
                options.model.arch.empty() ? options.model.model_path.c_str() : options.model.arch.c_str(),
                options.profile.c_str(), rule_count,
                generated > 0 ? (" (" + std::to_string(generated) + " generated ahead of the profile)").c_str() : "",
                tree_size, modules, repeat);
    std::printf("%-10s %10s %10s\n", "phase", "min ms", "median ms");
    const std::pair<const char*, const std::vector<double>*> rows[] = {
        {"model", &t.describe}, {"parse", &t.parse},   {"walk", &t.walk},    {"validate", &t.validate},
        {"memory", &t.memory},  {"report", &t.report}, {"total", &t.total}};
    for (const auto& [name, values] : rows) std::printf("%-10s %10.2f %10.2f\n", name, minimum(*values), median(*values));
    std::printf("targets: total under 50 ms on one core for a shipped profile; under 2 s for 10,000 rules and 20 s for "
                "100,000 against deepseek-v3\n");
    return 0;
  }
};

}  // namespace

// cli/cmd_bench_gemv.cpp: registers `bench gemv` on `bench`.
Runner add_bench_gemv_command(CLI::App& bench);
// cli/cmd_bench_tokenize.cpp: `bench tokenize`.
Runner add_bench_tokenize_command(CLI::App& bench);

Runner add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks that print their ceilings beside the result");
  bench->require_subcommand(1);
  auto check = std::make_shared<BenchCheckCommand>();
  CLI::App* sub = bench->add_subcommand("check", "time the dry run of a profile, phase by phase");
  check->model.add_to(*sub);
  sub->add_option("--repeat", check->repeat, "runs to time")->capture_default_str()->transform(integer_range<int>(1, 10000));
  sub->add_option("--generated_rules", check->generated,
                  "put N generated rules ahead of the profile (per-layer, per-expert and unanchored names), "
                  "to time the check of large profiles")
      ->capture_default_str()
      ->transform(integer_range<int>(0, 10'000'000));
  auto experts = std::make_shared<ExpertsBenchOptions>();
  CLI::App* experts_sub = bench->add_subcommand("experts", "CPU routed experts vs STREAM: decode GB/s, prefill TFLOP/s");
  experts_sub->add_option("--weight_dtype", experts->weight_dtype, "the experts' weights: bf16, f16, f32, or a block type (q4_k, q8_0, ...)")
      ->capture_default_str();
  experts_sub->add_option("--decode_tokens", experts->decode_tokens, "tokens of each decode step timed (default 1 8)")
      ->transform(integer_range<std::int64_t>(1, 4096));
  experts_sub->add_option("--shape", experts->shapes, "presets whose expert shapes to time (default deepseek-v2-lite deepseek-v3)");
  add_cpu_threads_option(*experts_sub, "--threads", experts->threads, "CPU threads (default: all cores)");
  add_cpu_kernels_option(*experts_sub, experts->cpu_kernels);
  experts_sub->add_option("--repeat", experts->repeat, "decode steps timed")
      ->capture_default_str()
      ->transform(integer_range(1, 10000));
  experts->cpu_kernel_flags.add_to(*experts_sub);
  add_ab_option(*experts_sub, experts->ab_option, "decode and prefill (and --stages)");
  experts_sub->add_flag("--stages", experts->stages,
                        "block types: time the tiles prefill's stages apart too (bf16 panels from the blocks, the "
                        "tiles' products on a cached panel, both), over every expert's rows once (CPUs with AMX or "
                        "AVX512-BF16)");
  experts_sub->add_option("--experts", experts->min_experts,
                          "experts allocated at least (the shape's own count at most); a pool larger than the L3 keeps "
                          "decode reading from DRAM, the shape's own count gives prefill its real tokens per expert")
      ->capture_default_str()
      ->transform(integer_range(1, 1024));
  // A prefill's activations and outputs: 2 x tokens x hidden f32, 0.9 GiB at 16384 tokens of DeepSeek-V3.
  experts_sub->add_option("--prefill_tokens", experts->prefill_tokens, "tokens in the prefill run")
      ->capture_default_str()
      ->transform(integer_range<std::int64_t>(1, 16384));
  // STREAM's three arrays take 3 x this; 64 GiB in all at the largest.
  experts_sub
      ->add_option_function<std::size_t>(
          "--stream_mib", [experts](std::size_t mib) { experts->stream_bytes = mib << 20; },
          "STREAM array size in MiB (default 512)")
      ->transform(integer_range<std::size_t>(1, 16384));
  auto decode = std::make_shared<DecodeBenchOptions>();
  CLI::App* decode_sub = bench->add_subcommand(
      "decode", "a placed model end to end: prefill and decode tokens/s, the per-token split, STREAM and HBM ceilings");
  decode->add_to(*decode_sub);
  Runner gemv = add_bench_gemv_command(*bench);
  Runner tokenize = add_bench_tokenize_command(*bench);
  return [bench, check, experts, decode, gemv, tokenize]() -> int {
    if (bench->got_subcommand("check")) return check->run();
    if (bench->got_subcommand("experts")) return run_bench_experts(*experts);
    if (bench->got_subcommand("decode")) return decode->run();
    if (bench->got_subcommand("gemv")) return gemv();
    if (bench->got_subcommand("tokenize")) return tokenize();
    throw InputError("bench: give a benchmark (check, experts, decode, gemv, tokenize)");
  };
}

}  // namespace switchyard::cli
