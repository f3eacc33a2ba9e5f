#pragma once
// `switchyard bench decode`: a placed model end to end (prefill, decode, the per-token split)
// against its two ceilings measured in the same run: routed-expert bytes per token over STREAM
// bandwidth (the CPU side), and GPU-resident bytes per token over HBM copy bandwidth.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/cpu_kernel_flags.h"
#include "cli/model_options.h"

namespace switchyard::cli {

struct DecodeBenchOptions {
  ModelOptions model;
  int prompt_tokens = 512;
  int decode_tokens = 64;
  int profile_tokens = 8;  // decode steps timed again with --profile's events for the split
  int cpu_infer = 0;
  std::string cpu_kernels = "auto";
  bool use_cuda_graph = true;
  unsigned seed = 1;
  // Groups of kernel-name words (comma-separated) whose kernels the GPU side is timed without, one
  // group after another: each kernel's cost in the chain (cuda::leave_out_kernels).
  std::vector<std::string> leave_out;
  // The GPU side timed again with every kernel's wait end stamped (measure/cuda/timeline.h).
  bool timeline = false;
  CpuKernelFlags cpu_kernel_flags;
  // An A/B inside the process (cli/cpu_kernel_flags.h): decode and prefill timed with the CPU
  // kernel options the flags give (A) and with these assignments (B), alternating (A B B A ...),
  // ab_rounds times each.
  std::string ab_option;
  int ab_rounds = 4;

  void add_to(CLI::App& command);
  int run() const;
};

}  // namespace switchyard::cli
