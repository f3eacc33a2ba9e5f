#include "cli/model_options.h"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "core/arch_presets.h"
#include "core/device.h"
#include "core/error.h"
#include "core/text.h"
#include "core/units.h"
#include "operators/cpu/kernels/isa.h"
#include "placement/gpu_layers.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/device_context.h"
#endif
#include "placement/memory_estimate.h"

namespace switchyard::cli {
namespace {
constexpr bool kWithCudaBackend = SWITCHYARD_HAVE_CUDA;
}  // namespace

std::string quoted_argument(const std::string& text) {
  constexpr std::size_t kShown = 40;
  return "'" + (text.size() <= kShown ? text : text.substr(0, kShown) + "...") + "'";
}

template <typename Integer>
CLI::Validator integer_range(Integer low, Integer high) {
  static_assert(std::is_integral_v<Integer>);
  const std::string range = std::to_string(low) + " to " + std::to_string(high);
  auto check = [low, high, range](std::string& text) -> std::string {
    Integer value{};
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    // from_chars reads no sign into an unsigned type; "-5" is still a number, outside the range.
    const bool negative_for_unsigned = std::is_unsigned_v<Integer> && text.size() > 1 && text[0] == '-' &&
                                       text.find_first_not_of("0123456789", 1) == std::string::npos;
    if (negative_for_unsigned || (error == std::errc::result_out_of_range && stop == end) ||
        (error == std::errc() && stop == end && (value < low || value > high)))
      return quoted_argument(text) + " is outside " + range;
    if (error != std::errc() || stop != end) return quoted_argument(text) + " is not a whole number (" + range + ")";
    text = std::to_string(value);
    return {};
  };
  return CLI::Validator(check, "INT in " + range);
}

template CLI::Validator integer_range<int>(int, int);
template CLI::Validator integer_range<unsigned>(unsigned, unsigned);
template CLI::Validator integer_range<long>(long, long);
template CLI::Validator integer_range<unsigned long>(unsigned long, unsigned long);
template CLI::Validator integer_range<long long>(long long, long long);
template CLI::Validator integer_range<unsigned long long>(unsigned long long, unsigned long long);

int max_cpu_threads() {
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(hardware, std::min(8 * hardware, 1024));
}

namespace {

// Why max_cpu_threads() is what it is, for the messages that state it.
std::string cpu_threads_rule() {
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int cap = max_cpu_threads();
  if (cap == 8 * hardware) return "8 per hardware thread; this machine has " + std::to_string(hardware);
  if (cap == 1024) return "at most 1024 in all";
  return "one per hardware thread";
}

}  // namespace

void add_cpu_threads_option(CLI::App& command, const std::string& name, int& threads, const std::string& description) {
  const int cap = max_cpu_threads();
  CLI::Validator range = integer_range(1, cap);
  CLI::Validator explained(
      [range](std::string& text) -> std::string {
        const std::string problem = range(text);
        return problem.empty() ? problem : problem + " CPU threads (" + cpu_threads_rule() + ")";
      },
      "INT in 1 to " + std::to_string(cap));
  command.add_option(name, threads, description + "; 1 to " + std::to_string(cap))->transform(explained);
}

void apply_cpu_threads(int threads) {
  if (threads > 0) {
    omp_set_num_threads(threads);
    return;
  }
  // omp_get_max_threads reads OMP_NUM_THREADS without starting a thread.
  if (omp_get_max_threads() > max_cpu_threads()) {
    const char* variable = std::getenv("OMP_NUM_THREADS");
    throw InputError("OMP_NUM_THREADS=" + std::string(variable ? variable : "?") + " asks for " +
                     std::to_string(omp_get_max_threads()) + " CPU threads, more than " +
                     std::to_string(max_cpu_threads()) + " (" + cpu_threads_rule() +
                     "); lower it, or give the thread count with the command's option");
  }
}

void set_group(CLI::App& command, std::initializer_list<const char*> names, const std::string& group) {
  for (const char* name : names) command.get_option(name)->group(group);
}

void ModelOptions::set_model(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string what = "give a .gguf file, a split set's first file, or a folder: a GGUF's, or a checkpoint's with config.json";
  std::error_code error;
  if (fs::is_regular_file(path, error)) {
    if (to_lower(fs::path(path).extension().string()) != ".gguf")
      throw CLI::ValidationError("--model", quoted_argument(path) + " is not a .gguf file; " + what);
    gguf_path = path;
    return;
  }
  if (!fs::is_directory(path, error)) throw CLI::ValidationError("--model", quoted_argument(path) + " does not exist; " + what);
  bool gguf = false, safetensors = false;
  for (fs::directory_iterator entry(path, error), end; !error && entry != end; entry.increment(error)) {
    const std::string extension = to_lower(entry->path().extension().string());
    gguf = gguf || extension == ".gguf";
    safetensors = safetensors || extension == ".safetensors";
  }
  // A folder with GGUF files and no safetensors is a GGUF's even where a config.json lies beside it.
  if (gguf && !safetensors) gguf_path = path;
  else if (fs::is_regular_file(fs::path(path) / "config.json", error)) model_path = path;
  else throw CLI::ValidationError("--model", "the folder " + quoted_argument(path) + " holds no .gguf file and no config.json; " + what);
}

void ModelOptions::add_to(CLI::App& command, bool profile_required) {
  std::string presets;
  for (const ArchPreset& p : arch_presets()) presets += (presets.empty() ? "" : ", ") + p.name;
  command.add_option("--arch", arch, "built-in architecture: " + presets);
  command.add_option("--model_path", model_path,
                     "checkpoint directory (config.json + safetensors); with --gguf_path, the directory of the config.json "
                     "to use instead of the GGUF's metadata");
  command.add_option("--gguf_path", gguf_path,
                     "GGUF model: a .gguf file, the first file of a split set, or a directory holding one; the config "
                     "comes from its metadata");
  command
      .add_option_function<std::string>(
          "-m,--model", [this](const std::string& path) { set_model(path); },
          "llama.cpp's -m: a .gguf file, a split set's first file, or a folder (a GGUF's: --gguf_path; a checkpoint's "
          "with config.json: --model_path)")
      ->excludes("--arch")
      ->excludes("--model_path")
      ->excludes("--gguf_path");
  this->profile_required = profile_required;
  command.add_option("--optimize_config_path,--optimize_rule_path", profile,
                     "optimize-rule YAML profile (llama.cpp's -ot, --cpu-moe and --n-cpu-moe add rules before its own)");
  command.add_option("--override-kv,--override_kv", override_kv,
                     "KEY=TYPE:VALUE as llama.cpp has it: a GGUF metadata value read in place of the file's, TYPE "
                     "int, float, bool or str (tokenizer.ggml.pre=str:qwen2 names the tokenizer's pre-tokenizer); "
                     "may be repeated")
      ->take_all()
      ->expected(1);
  command.add_option("--override-tensor,--override_tensor", override_tensor,
                     "-ot REGEX=DEVICE[,REGEX=DEVICE...] as llama.cpp has it: the modules whose GGUF tensor names "
                     "(blk.3.ffn_up_exps.weight) or module names the regex finds go to DEVICE (CPU, CUDA0, cpu, "
                     "cuda:N); may be repeated, and wins over the profile")
      ->take_all()
      ->expected(1);
  command.add_option("--n-gpu-layers,--n_gpu_layers,--gpu-layers", n_gpu_layers,
                     "-ngl N as llama.cpp has it: the last N decoder layers on the GPUs, the others whole on the CPU "
                     "(without a profile)")
      ->transform(whole_number<int>());
  command.add_option("--tensor-split,--tensor_split", tensor_split,
                     "-ts 3,1 as llama.cpp has it: each GPU's share of the GPU layers (without a profile; default: "
                     "by --gpu_memory)");
  command.add_option("--main-gpu,--main_gpu", main_gpu,
                     "-mg I: the GPU that holds the layers when they are not divided (without a profile)")
      ->transform(whole_number<int>());
  command.add_flag("--cpu-moe,--cpu_moe", cpu_moe, "every MoE layer's routed experts on the CPU (llama.cpp's --cpu-moe)");
  command.add_flag("--fit", fit,
                   "with --gpu_memory: the routed experts of as many MoE layers on the GPUs as fit, the first "
                   "layers' on the CPU (llama.cpp's --fit); prints what it chose");
  command.add_option("--fit_margin,--fit-margin", fit_margin, "what --fit leaves free on every GPU")->capture_default_str();
  command.add_option("--n-cpu-moe,--n_cpu_moe", n_cpu_moe,
                     "the routed experts of the first N MoE layers on the CPU (llama.cpp's --n-cpu-moe)")
      ->transform(whole_number<int>());
  command.add_option("--weight_dtype", weight_dtype,
                     "storage dtype assumed without a checkpoint: bf16, f16, f32, fp8, q8_0, q6_k, q5_k, q4_k, q3_k, "
                     "q5_1, q5_0, q4_1, q4_0, iq4_xs, iq4_nl, iq3_s, iq3_xxs, iq2_s, iq2_xs, iq2_xxs, iq1_m, iq1_s, "
                     "mxfp4, or a mix: q5_k_m, q4_k_m, q2_k")
      ->capture_default_str();
  command.add_option("--gpus", gpus, "number of GPUs (default: as many as the profile names)")->transform(whole_number<int>());
  command.add_option("--gpu_memory", gpu_memory,
                     "GPU memory budget, one for all or one per GPU: 24GiB,32GiB (with --device_map: per physical GPU)");
  command.add_option("--device_map", device_map,
                     "run the profile's GPUs on this machine's: cuda:1=0,cuda:2-3=1 or all=0 (a 4-, 6- or 8-GPU "
                     "profile on fewer GPUs, with every boundary of the real layout; check adds the folded GPUs' "
                     "memory against the physical GPU's budget)");
  command.add_option("--cpu_memory", cpu_memory, "CPU memory budget, e.g. 512GiB");
  // Its range is checked in to_check_options (a caller may set it without the command line).
  command.add_option("--max_context,-c,--ctx-size,--cache_lens", max_context, "KV-cache length in tokens, 1 to 2^32")
      ->capture_default_str()
      ->transform(whole_number<std::int64_t>());
  command.add_option("--kv_cache_dtype", kv_cache_dtype,
                     "KV cache element type, f32 or bf16 (default: the checkpoint's activation dtype, torch_dtype: "
                     "f32 for float32, bf16 otherwise)");
  command.add_option("--default_device", default_device, "device of modules no rule matches (default cuda:0, or cpu without GPUs)");
  // run, chat and serve, which need no profile, also read the model's text.
  if (!profile_required)
    command.add_option("--chat-template,--chat_template", chat_template,
                       "a Jinja chat template, as a file or as the template's text, used instead of the model's");
  set_group(command, {"--arch", "--model_path", "--gguf_path", "--model", "--weight_dtype", "--override-kv"}, kModelGroup);
  if (!profile_required) set_group(command, {"--chat-template"}, kModelGroup);
  set_group(command,
            {"--optimize_config_path", "--override-tensor", "--n-gpu-layers", "--tensor-split", "--main-gpu", "--cpu-moe", "--fit",
             "--fit_margin", "--n-cpu-moe", "--gpus", "--gpu_memory", "--device_map", "--cpu_memory", "--max_context",
             "--kv_cache_dtype", "--default_device"},
            kPlacementGroup);
}

void add_cpu_kernels_option(CLI::App& command, std::string& value) {
  command
      .add_option("--cpu_kernels", value,
                  "CPU kernel variant: auto (the widest this CPU runs), scalar, avx2, avx512, avx512bf16 (GGUF block "
                  "types' prefill on bf16 dot products, activations rounded to bf16), amx (bf16 prefill on AMX tiles, "
                  "activations rounded to bf16; avx512 keeps them f32)")
      ->capture_default_str();
}

void apply_cpu_kernels(const std::string& value) {
  if (value == "auto") return;
  // The variants, or those this CPU runs, as a list: "scalar, avx2, ...".
  auto variants = [](bool supported_only) {
    std::string list;
    for (cpu::Isa each : cpu::kAllIsas)
      if (!supported_only || cpu::isa_supported(each)) list += std::string(list.empty() ? "" : ", ") + cpu::isa_name(each);
    return list;
  };
  const std::optional<cpu::Isa> isa = cpu::isa_named(value);
  if (!isa) throw InputError("--cpu_kernels: " + quoted_argument(value) + " is not a variant (auto, " + variants(false) + ")");
  if (!cpu::isa_supported(*isa))
    throw InputError("--cpu_kernels: this CPU cannot run the " + value + " kernels; it runs " + variants(true));
  cpu::choose_isa(*isa);
}

CheckOptions ModelOptions::to_check_options() const {
  CheckOptions options;
  const int sources = !arch.empty() + !model_path.empty() + !gguf_path.empty();
  const bool gguf_with_config = sources == 2 && !gguf_path.empty() && !model_path.empty();
  if (sources != 1 && !gguf_with_config)
    throw InputError(sources == 0 ? "give one of --arch PRESET, --model_path DIR and --gguf_path FILE"
                                  : "give one of --arch PRESET, --model_path DIR and --gguf_path FILE (or --gguf_path with "
                                    "the --model_path of its config.json), not " +
                                        std::string(!arch.empty() ? "--arch with another" : "both"));
  options.model.arch = arch;
  options.model.model_path = model_path;
  options.model.gguf_path = gguf_path;
  options.model.weight_dtype = to_lower(weight_dtype);  // Q4_K_M as llama.cpp spells it
  if (!override_kv.empty() && gguf_path.empty())
    throw InputError("--override-kv replaces a GGUF file's metadata values; give the model as --gguf_path FILE (or -m FILE)");
  for (const std::string& each : override_kv) options.model.gguf_overrides.push_back(parse_gguf_override(each));
  options.profile = profile;
  options.quick_rules = QuickRuleFlags{};
  options.quick_rules.override_tensor = override_tensor;
  options.quick_rules.cpu_moe = cpu_moe;
  options.quick_rules.n_cpu_moe = n_cpu_moe;
  options.quick_rules.layers.n_gpu_layers = n_gpu_layers;
  if (tensor_split) options.quick_rules.layers.tensor_split = parse_tensor_split(*tensor_split);
  if (main_gpu && *main_gpu >= kMaxCudaDevices)
    throw InputError("--main-gpu " + std::to_string(*main_gpu) + ": a plan has at most " + std::to_string(kMaxCudaDevices) +
                     " GPUs, 0 to " + std::to_string(kMaxCudaDevices - 1));
  options.quick_rules.layers.main_gpu = main_gpu;
  options.fit.enabled = fit;
  if (const auto margin = parse_byte_size(fit_margin)) options.fit.margin_bytes = *margin;
  else throw InputError("--fit_margin: " + quoted_argument(fit_margin) + " is not a size (write e.g. 1GiB or 512MiB)");
  if (profile_required && profile.empty() && options.quick_rules.empty() && !fit)
    throw InputError("give a profile (--optimize_config_path FILE) or llama.cpp's placement flags (-ot REGEX=DEVICE, "
                     "--cpu-moe, --n-cpu-moe N, -ngl N, -ts SHARES, --main-gpu I)");
  if (gpus && (*gpus < 0 || *gpus > kMaxCudaDevices))
    throw InputError("--gpus " + std::to_string(*gpus) + " is outside 0 to " + std::to_string(kMaxCudaDevices));
  options.gpus = gpus;
  if (!gpu_memory.empty()) {
    std::stringstream list(gpu_memory);
    std::string item;
    while (std::getline(list, item, ',')) {
      const auto bytes = parse_byte_size(item);
      if (!bytes) throw InputError("--gpu_memory: " + quoted_argument(item) + " is not a size (write e.g. 24GiB or 80GB)");
      options.budget.gpu_bytes.push_back(*bytes);
    }
    if (device_map.empty() && gpus && options.budget.gpu_bytes.size() > 1 &&
        static_cast<int>(options.budget.gpu_bytes.size()) != *gpus)
      throw InputError("--gpu_memory lists " + std::to_string(options.budget.gpu_bytes.size()) + " sizes but --gpus is " +
                       std::to_string(*gpus));
  }
  if (!device_map.empty()) options.budget.device_map = DeviceMap::parse(device_map);
  // --fit without --gpu_memory: what the GPUs present have free now.
  if (fit && options.budget.gpu_bytes.empty()) {
#if SWITCHYARD_HAVE_CUDA
    for (std::size_t bytes : cuda::free_memory_bytes()) options.budget.gpu_bytes.push_back(bytes);
    if (gpus && static_cast<int>(options.budget.gpu_bytes.size()) > *gpus) options.budget.gpu_bytes.resize(static_cast<std::size_t>(*gpus));
    if (options.budget.gpu_bytes.size() == 1 && !gpus) options.gpus = 1;
#endif
    if (options.budget.gpu_bytes.empty())
      throw InputError("--fit needs the GPUs' budgets: this machine has no GPU to ask"
                       + std::string(kWithCudaBackend ? "" : " (a build without the CUDA backend)") +
                       "; give --gpu_memory 24GiB (one for all GPUs, or one per GPU)");
  }
  if (!cpu_memory.empty()) {
    options.budget.cpu_bytes = parse_byte_size(cpu_memory);
    if (!options.budget.cpu_bytes) throw InputError("--cpu_memory: " + quoted_argument(cpu_memory) + " is not a size (write e.g. 512GiB)");
  }
  if (max_context < 1 || max_context > kMaxContextTokens)
    throw InputError("--max_context " + std::to_string(max_context) + " is outside 1 to 2^32 (" +
                     std::to_string(kMaxContextTokens) + ") tokens of KV cache");
  options.budget.max_context = max_context;
  if (kv_cache_dtype) {
    options.budget.kv_cache_dtype = parse_kv_cache_dtype(*kv_cache_dtype);
    if (!options.budget.kv_cache_dtype)
      throw InputError("--kv_cache_dtype: " + quoted_argument(*kv_cache_dtype) + " is not a KV cache dtype (f32, bf16)");
  }
  if (!default_device.empty()) {
    options.default_device = parse_device(default_device);
    if (!options.default_device) throw InputError("--default_device: " + quoted_argument(default_device) + " is not a device (cpu, cuda:N)");
  }
  return options;
}

namespace {

// The CUDA devices this process sees: 0 without the CUDA backend. Opens the CUDA runtime.
int cuda_devices_present() {
#if SWITCHYARD_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

}  // namespace

std::string ModelOptions::fall_back_to_cpu() {
  if (!profile.empty() || !device_map.empty() || (!default_device.empty() && to_lower(default_device) != "cpu")) return {};
  std::string flags;
  auto say = [&flags](const std::string& flag) { flags += (flags.empty() ? "" : " ") + flag; };
  for (const std::string& each : override_tensor) {
    // -ot REGEX=DEVICE[,...]: a rule that names a GPU is a choice llama.cpp refuses without one too.
    std::stringstream list(each);
    std::string item;
    while (std::getline(list, item, ','))
      if (!starts_with(to_lower(item.substr(item.rfind('=') + 1)), "cpu")) return {};
    say("-ot " + each);
  }
  if (n_gpu_layers) say("-ngl " + std::to_string(*n_gpu_layers));
  if (tensor_split) say("-ts " + *tensor_split);
  if (main_gpu) say("--main-gpu " + std::to_string(*main_gpu));
  if (cpu_moe) say("--cpu-moe");
  if (n_cpu_moe) say("--n-cpu-moe " + std::to_string(*n_cpu_moe));
  if (fit) say("--fit");
  if (flags.empty() || cuda_devices_present() > 0) return {};
  if (gpus) say("--gpus " + std::to_string(*gpus));
  if (!gpu_memory.empty()) say("--gpu_memory " + gpu_memory);
  override_tensor.clear();
  n_gpu_layers.reset();
  tensor_split.reset();
  main_gpu.reset();
  cpu_moe = false;
  n_cpu_moe.reset();
  fit = false;
  gpus.reset();
  gpu_memory.clear();
  return flags;
}

namespace {

// Before a weight goes to a GPU: every GPU the plan puts bytes on must be present, after
// --device_map. A 4-GPU profile on a 1-GPU machine fails here, naming the flag that folds it.
void check_gpus_present(const CheckResult& check, const DeviceMap& map) {
#if SWITCHYARD_HAVE_CUDA
  const int count = cuda::device_count();
  std::string missing;
  int needed = 0;
  for (const DeviceMemory& m : check.memory) {
    if (!m.device.is_cuda() || m.total_bytes() == 0) continue;
    needed = std::max(needed, m.device.index + 1);
    const int physical = map.physical(m.device.index);
    if (physical < count) continue;
    missing += (missing.empty() ? "" : ", ") + m.device.str() +
               (physical == m.device.index ? std::string() : " (GPU " + std::to_string(physical) + " by --device_map)");
  }
  if (missing.empty()) return;
  throw InputError("the plan runs on " + missing + ", which this machine does not have: it has " + std::to_string(count) +
                       " CUDA device" + (count == 1 ? "" : "s") +
                       (count > 0 ? ". Fold the profile's " + std::to_string(needed) +
                                        " GPUs onto this machine's with --device_map (e.g. --device_map all=0, or "
                                        "cuda:1=0), or use a profile for " + std::to_string(count) + " GPU" +
                                        (count == 1 ? "" : "s")
                                  : ". Run it on the CPU: --default_device cpu places there what no rule places, a CPU "
                                    "profile (or none, with llama.cpp's -ngl, --cpu-moe or --fit) places every module "
                                    "there; on a machine with GPUs, --device_map folds the profile's onto them"),
                   1);
#else
  (void)check;  // the builders say that this build has no CUDA backend
  (void)map;
#endif
}

}  // namespace

std::unique_ptr<CausalLM> build_model(const BuildContext& context, const CausalLMOptions& options,
                                      const CheckResult& check) {
  check_gpus_present(check, options.device_map);
  try {
    return std::make_unique<CausalLM>(context, options);
  } catch (const InputError& error) {
    throw InputError(explain_out_of_memory(error.what(), check.memory, context.max_context), error.exit_code());
  }
}

}  // namespace switchyard::cli
