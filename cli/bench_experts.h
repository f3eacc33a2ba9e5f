#pragma once
// `switchyard bench experts`: CPU routed-expert throughput against the STREAM ceiling.
#include <string>
#include <vector>

#include "cli/cpu_kernel_flags.h"
#include "core/model_config.h"
#include "operators/cpu/kernels/prefill_stages.h"

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
  CpuKernelFlags cpu_kernel_flags;  // the CPU kernel options (A)
  // An A/B in this process (cli/cpu_kernel_flags.h, "cpu_prefetch_bytes=0"): decode and prefill
  // timed with the options the flags give (A) and with these assignments (B), alternating A B B A.
  std::string ab_option;
  bool stages = false;  // the tiles prefill's stages timed apart (block types)
};

struct ExpertsBenchDecode {
  std::int64_t tokens = 0;
  std::string side;  // with ab_option: "A" or "B"
  double seconds = 0, bytes = 0;  // median step; bytes of the distinct experts' weights it touched (mean)
};

struct ExpertsBenchRow {
  ModelConfig config;
  int pool = 0;
  std::vector<ExpertsBenchDecode> decode;  // one per ExpertsBenchOptions::decode_tokens (and side)
  double prefill_seconds = 0, prefill_flops = 0;
  double prefill_seconds_b = 0;    // with ab_option: the prefill's median on side B
  std::int64_t stage_tokens = 0;   // with stages: tokens a call, the prefill's mean per expert
  cpu::PrefillStageTimes stages;
  cpu::PrefillStageTimes stages_b;  // with stages and ab_option: the stages again on side B
};

ExpertsBenchRow bench_experts_shape(const ModelConfig& config, const ExpertsBenchOptions& options);
int run_bench_experts(const ExpertsBenchOptions& options);

}  // namespace switchyard::cli
