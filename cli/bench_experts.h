#pragma once
// `switchyard bench experts`: CPU routed-expert throughput against the STREAM ceiling.
#include <string>
#include <vector>

#include "core/model_config.h"

namespace switchyard::cli {

struct ExpertsBenchOptions {
  std::vector<std::string> shapes;  // presets whose expert shapes to time; empty: v2-lite and v3
  int threads = 0;                  // 0: OpenMP's default
  std::string cpu_kernels = "auto";  // --cpu_kernels
  int repeat = 20;
  std::int64_t prefill_tokens = 128;
  int min_experts = 16;             // experts allocated at least (so decode reads come from DRAM)
  std::size_t stream_bytes = std::size_t{512} << 20;
  unsigned seed = 1;
};

struct ExpertsBenchRow {
  ModelConfig config;
  int pool = 0;
  double decode_seconds = 0, decode_bytes = 0;
  double prefill_seconds = 0, prefill_flops = 0;
};

ExpertsBenchRow bench_experts_shape(const ModelConfig& config, const ExpertsBenchOptions& options);
int run_bench_experts(const ExpertsBenchOptions& options);

}  // namespace switchyard::cli
