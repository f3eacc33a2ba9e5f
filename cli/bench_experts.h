#pragma once
// `switchyard bench experts`: CPU routed-expert throughput against the STREAM ceiling.
#include <string>
#include <vector>

#include "core/model_config.h"
#include "operators/blocks/routed_experts.h"
#include "operators/kernels/cpu/prefill_stages.h"

namespace switchyard::cli {

struct ExpertsBenchOptions {
  std::vector<std::string> shapes;  // presets whose expert shapes to time; empty: v2-lite and v3
  int threads = 0;                  // 0: OpenMP's default
  std::string cpu_kernels = "auto";  // --cpu_kernels
  int repeat = 20;
  std::int64_t prefill_tokens = 128;
  std::vector<std::int64_t> decode_tokens = {1, 8};  // decode steps of this many tokens
  std::string weight_dtype = "bf16";  // bf16, f16, f32 or a block type (q4_k, q8_0, ...)
  int min_experts = 16;             // experts allocated at least (so decode reads come from DRAM)
  std::size_t stream_bytes = std::size_t{512} << 20;
  unsigned seed = 1;
  // A kernel variant's environment variable (operators/kernels/cpu/kernel_variants.h, "VAR" or
  // "VAR=VALUE"): decode and prefill timed with it unset and set, alternating A B B A, in this process.
  std::string ab_env;
  bool stages = false;  // the tiles prefill's stages timed apart (block types)
};

struct ExpertsBenchDecode {
  std::int64_t tokens = 0;
  std::string variant;  // with ab_env: "unset" or "set"
  double seconds = 0, bytes = 0;  // median step; bytes of the distinct experts' weights it touched (mean)
};

struct ExpertsBenchRow {
  ModelConfig config;
  int pool = 0;
  std::vector<ExpertsBenchDecode> decode;  // one per ExpertsBenchOptions::decode_tokens
  double prefill_seconds = 0, prefill_flops = 0;
  double prefill_seconds_set = 0;  // with ab_env: the prefill's median with the variable set
  std::int64_t stage_tokens = 0;   // with stages: tokens a call, the prefill's mean per expert
  cpu::PrefillStageTimes stages;
  cpu::PrefillStageTimes stages_set;  // with stages and ab_env: the stages again with the variable set
  // With stages: the prefill's phases, the mean of the timed calls, per side of ab_env.
  RoutedExperts::GroupedSeconds phases[2];
};

ExpertsBenchRow bench_experts_shape(const ModelConfig& config, const ExpertsBenchOptions& options);
// The grouped prefill's phases in milliseconds, as both benches print them: "gather 0.30, gate/up
// 13.22 (x written 1.68), silu 1.99, down 7.79 (x written 1.22), weighted sum 0.40".
std::string phases_ms(const RoutedExperts::GroupedSeconds& phases);
int run_bench_experts(const ExpertsBenchOptions& options);

}  // namespace switchyard::cli
