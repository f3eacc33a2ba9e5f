#include "examples/model_options.h"

#include <optional>
#include <sstream>
#include <string>

#include "core/arch_presets.h"
#include "core/error.h"
#include "core/units.h"
#include "operators/cpu/isa.h"
#include "placement/memory_estimate.h"

namespace switchyard::cli {

void ModelOptions::add_to(CLI::App& command, bool profile_required) {
  std::string presets;
  for (const ArchPreset& p : arch_presets()) presets += (presets.empty() ? "" : ", ") + p.name;
  command.add_option("--arch", arch, "built-in architecture: " + presets);
  command.add_option("--model_path", model_path, "checkpoint directory (config.json + safetensors)");
  auto* profile_option = command.add_option("--optimize_config_path,--optimize_rule_path", profile,
                                            "optimize-rule YAML profile");
  if (profile_required) profile_option->required();
  command.add_option("--weight_dtype", weight_dtype,
                     "storage dtype assumed without a checkpoint: bf16, f16, f32, fp8, q8_0, q6_k, q5_k_m, q4_k_m, q2_k")
      ->capture_default_str();
  command.add_option("--gpus", gpus, "number of GPUs (default: as many as the profile names)");
  command.add_option("--gpu_memory", gpu_memory, "GPU memory budget, one for all or one per GPU: 24GiB,32GiB");
  command.add_option("--cpu_memory", cpu_memory, "CPU memory budget, e.g. 512GiB");
  command.add_option("--max_context", max_context, "KV-cache length in tokens")->capture_default_str();
  command.add_option("--default_device", default_device, "device of modules no rule matches (default cuda:0, or cpu without GPUs)");
}

void add_cpu_kernels_option(CLI::App& command, std::string& value) {
  command
      .add_option("--cpu_kernels", value,
                  "CPU kernel variant: auto (the widest this CPU runs), scalar, avx2, avx512, amx (bf16 prefill on AMX "
                  "tiles, activations rounded to bf16; avx512 keeps them f32)")
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
  if (!isa) throw InputError("--cpu_kernels: '" + value + "' is not a variant (auto, " + variants(false) + ")");
  if (!cpu::isa_supported(*isa))
    throw InputError("--cpu_kernels: this CPU cannot run the " + value + " kernels; it runs " + variants(true));
  cpu::choose_isa(*isa);
}

CheckOptions ModelOptions::to_check_options() const {
  CheckOptions options;
  if (arch.empty() == model_path.empty()) throw InputError("give exactly one of --arch PRESET and --model_path DIR");
  options.model.arch = arch;
  options.model.model_path = model_path;
  options.model.weight_dtype = weight_dtype;
  options.profile = profile;
  if (gpus && (*gpus < 0 || *gpus > 1024)) throw InputError("--gpus must be between 0 and 1024");
  options.gpus = gpus;
  if (!gpu_memory.empty()) {
    std::stringstream list(gpu_memory);
    std::string item;
    while (std::getline(list, item, ',')) {
      const auto bytes = parse_byte_size(item);
      if (!bytes) throw InputError("--gpu_memory: '" + item + "' is not a size (write e.g. 24GiB or 80GB)");
      options.budget.gpu_bytes.push_back(*bytes);
    }
    if (gpus && options.budget.gpu_bytes.size() > 1 && static_cast<int>(options.budget.gpu_bytes.size()) != *gpus)
      throw InputError("--gpu_memory lists " + std::to_string(options.budget.gpu_bytes.size()) + " sizes but --gpus is " +
                       std::to_string(*gpus));
  }
  if (!cpu_memory.empty()) {
    options.budget.cpu_bytes = parse_byte_size(cpu_memory);
    if (!options.budget.cpu_bytes) throw InputError("--cpu_memory: '" + cpu_memory + "' is not a size (write e.g. 512GiB)");
  }
  if (max_context < 0 || max_context > (1LL << 32)) throw InputError("--max_context must be between 0 and 2^32 tokens");
  options.budget.max_context = max_context;
  if (!default_device.empty()) {
    options.default_device = parse_device(default_device);
    if (!options.default_device) throw InputError("--default_device: '" + default_device + "' is not a device (cpu, cuda:N)");
  }
  return options;
}

std::unique_ptr<CausalLM> build_model(const BuildContext& context, const CausalLMOptions& options,
                                      const CheckResult& check) {
  try {
    return std::make_unique<CausalLM>(context, options);
  } catch (const InputError& error) {
    throw InputError(explain_out_of_memory(error.what(), check.memory, context.max_context), error.exit_code());
  }
}

}  // namespace switchyard::cli
