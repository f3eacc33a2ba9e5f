#pragma once
// Options every model-describing subcommand shares: --arch | --model_path, --weight_dtype,
// --gpus, --gpu_memory, --cpu_memory, --max_context, --default_device, and the profile path
// (--optimize_config_path, alias --optimize_rule_path).
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "operators/causal_lm.h"
#include "placement/check.h"

namespace switchyard::cli {

struct ModelOptions {
  std::string arch;
  std::string model_path;
  std::string weight_dtype = "bf16";
  std::string profile;
  std::optional<int> gpus;
  std::string gpu_memory;
  std::string cpu_memory;
  std::int64_t max_context = 4096;
  std::string default_device;

  void add_to(CLI::App& command, bool profile_required = true);
  // Validates the combination and converts sizes; throws InputError (exit 2) on bad usage.
  CheckOptions to_check_options() const;
};

// --cpu_kernels auto|scalar|avx2|avx512|amx: the CPU kernels' variant (cpu::choose_isa), for run
// and the benches. auto: the widest this CPU runs.
void add_cpu_kernels_option(CLI::App& command, std::string& value);
// Applies it; an InputError (exit 2) names the variants this CPU runs when it cannot run the one asked.
void apply_cpu_kernels(const std::string& value);

// The model as `check` placed it, built on its devices. Running out of device memory is an
// InputError that also gives the plan's estimate for each device (explain_out_of_memory).
std::unique_ptr<CausalLM> build_model(const BuildContext& context, const CausalLMOptions& options,
                                      const CheckResult& check);

}  // namespace switchyard::cli
