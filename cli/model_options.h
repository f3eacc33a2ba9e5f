#pragma once
// Options every model-describing subcommand shares: --arch | --model_path | --gguf_path, --weight_dtype,
// --gpus, --gpu_memory, --cpu_memory, --max_context, --kv_cache_dtype, --default_device, and the profile path
// (--optimize_config_path, alias --optimize_rule_path); the CPU thread and kernel options of run
// and the benches; the range check of every integer flag.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "operators/model/causal_lm.h"
#include "placement/check.h"

namespace switchyard::cli {

// The headings `--help` lists a command's flags under (CLI11 option groups).
inline constexpr const char* kModelGroup = "Model";
inline constexpr const char* kPlacementGroup = "Placement";
inline constexpr const char* kSamplingGroup = "Sampling";
inline constexpr const char* kOutputGroup = "Output";
inline constexpr const char* kPerformanceGroup = "Performance";
// Puts the options `names` (each one of its names) of `command` under the heading `group`.
void set_group(CLI::App& command, std::initializer_list<const char*> names, const std::string& group);

struct ModelOptions {
  std::string arch;
  std::string model_path;
  std::string gguf_path;
  std::string weight_dtype = "bf16";
  std::vector<std::string> override_kv;  // --override-kv KEY=TYPE:VALUE, as typed (core/gguf.h GgufOverride)
  std::string profile;
  std::optional<int> gpus;
  std::string gpu_memory;
  std::string cpu_memory;
  std::int64_t max_context = 4096;
  std::optional<std::string> kv_cache_dtype;  // f32 | bf16; absent: the checkpoint's activation dtype
  std::string default_device;
  // llama.cpp's placement flags (placement/quick_rules.h): -ot / --override-tensor, --cpu-moe,
  // --n-cpu-moe, -ngl, -ts, -mg (cli/flag_spellings.h rewrites llama.cpp's multi-letter short flags,
  // which CLI11 cannot name).
  std::vector<std::string> override_tensor;
  bool cpu_moe = false;
  std::optional<int> n_cpu_moe;
  std::optional<int> n_gpu_layers;          // -ngl (placement/gpu_layers.h)
  std::optional<std::string> tensor_split;  // -ts, as typed
  std::optional<int> main_gpu;              // -mg
  std::string device_map;         // --device_map (core/device_map.h), as typed
  bool fit = false;               // --fit (placement/fit.h)
  std::string fit_margin = "1GiB";
  bool profile_required = true;  // else a command without a profile or quick rules uses its own default
  std::string chat_template;     // --chat-template (run, chat, serve): a file or the template's text

  // -m PATH, as llama.cpp takes it: a file or a folder holding .gguf files sets gguf_path, a
  // checkpoint folder (config.json, safetensors) model_path. CLI::ValidationError (exit 2) for a
  // path that is neither.
  void set_model(const std::string& path);

  // On a machine without a CUDA device, a plan without a profile whose GPU flags (-ngl, -ts,
  // --main-gpu, --cpu-moe, --n-cpu-moe, --fit, -ot ...=CPU, and with them --gpus and --gpu_memory)
  // would put modules on a GPU runs on the CPU instead, as llama.cpp does: clears those flags and
  // returns them as typed, for the caller's one warning. "" (nothing changed) where a GPU is
  // present, a profile is given, or a flag names a GPU itself (--default_device cuda:N,
  // --device_map, -ot REGEX=CUDA0), which still fails as it would have.
  std::string fall_back_to_cpu();
  // With profile_required, the command needs --optimize_config_path or a quick rule; without, it
  // is one that runs the model (run, chat, serve), which also takes --chat-template.
  void add_to(CLI::App& command, bool profile_required = true);
  // Validates the combination, the ranges (--max_context 1 to kMaxContextTokens, --gpus 0 to 1024)
  // and converts sizes; throws InputError (exit 2) on bad usage. check, split, run and the benches
  // all take their options through here, so what one refuses the others refuse too.
  CheckOptions to_check_options() const;
};

// A user's argument as an error message quotes it: 'whole' when short, its first 40 characters
// and "..." otherwise (an argument may be megabytes long).
std::string quoted_argument(const std::string& text);

// --max_context's largest value: 2^32 tokens, far past any model's trained context.
constexpr std::int64_t kMaxContextTokens = std::int64_t{1} << 32;

// The CLI11 check of an integer flag: a base-10 whole number from `low` to `high`, or a usage
// error (exit 2) "--flag: '-5' is outside 1 to 1048576". The text is rewritten in plain decimal,
// so that CLI11's own conversion, which reads "010" as octal 8 and "-1" as 2^64 - 1 for an
// unsigned flag, reads the number the user wrote: attach it with ->transform(), which keeps the
// rewrite (->check() would test the range but convert the original text). Defined for the
// standard signed and unsigned integer types from int up.
template <typename Integer>
CLI::Validator integer_range(Integer low, Integer high);
// The same for a flag whose range is checked elsewhere (where the library takes the value).
template <typename Integer>
CLI::Validator whole_number() {
  return integer_range(std::numeric_limits<Integer>::min(), std::numeric_limits<Integer>::max());
}

// The most CPU threads --cpu_infer and --threads take: 8 per hardware thread, at most 1024 (but
// never fewer than the hardware threads). Past some thousands libgomp crashes or aborts while
// creating them, and more threads than cores only slow the CPU work.
int max_cpu_threads();
// --cpu_infer / --threads N: CPU threads from 1 to max_cpu_threads(); left out, OpenMP's default
// (all cores, or OMP_NUM_THREADS).
void add_cpu_threads_option(CLI::App& command, const std::string& name, int& threads, const std::string& description);
// Sets OpenMP's thread count to `threads` (0: leave OpenMP's default). Throws InputError (exit 2)
// when the default comes from an OMP_NUM_THREADS past max_cpu_threads(). Called before the
// command's first parallel region.
void apply_cpu_threads(int threads);

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
