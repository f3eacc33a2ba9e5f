// check_profile: places a model by a YAML profile with Switchyard's placement library and prints
// the plan, the table `switchyard check` prints. No weights are read, so a preset name is enough
// to check a profile for a model of any size.
//
//   usage: check_profile PROFILE.yaml MODEL [GPU_MEMORY]
//     MODEL       a preset (deepseek-v3, tiny-deepseek-v3, ...), a checkpoint directory
//                 (config.json and safetensors) or a GGUF file
//     GPU_MEMORY  each GPU's budget, one for all or one per GPU: 24GiB or 80GiB,80GiB
//   example: check_profile optimize_rules/DeepSeek-V3-Chat.yaml deepseek-v3 24GiB
//
// Exit status as switchyard's: 0 clean, 1 when the profile or the model is wrong (the table lists
// every finding with its file, line and column), 2 for usage and unreadable files.
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "placement/check.h"
#include "placement/report.h"

namespace {

// A directory is a checkpoint, a file a GGUF, anything else the name of a preset (run_check says
// so when there is no such preset).
switchyard::ModelSpec model_spec(const std::string& model) {
  switchyard::ModelSpec spec;
  std::error_code error;
  if (std::filesystem::is_directory(model, error)) spec.model_path = model;
  else if (std::filesystem::is_regular_file(model, error)) spec.gguf_path = model;
  else spec.arch = model;
  return spec;
}

// "24GiB" or "80GiB,80GiB": the budgets check compares each GPU's memory with.
std::vector<std::uint64_t> gpu_budgets(const std::string& list) {
  std::vector<std::uint64_t> budgets;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    const std::optional<std::uint64_t> bytes = switchyard::parse_byte_size(item);
    if (!bytes) throw switchyard::InputError("'" + item + "' is not a size (write e.g. 24GiB or 80GB)");
    budgets.push_back(*bytes);
  }
  return budgets;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: check_profile PROFILE.yaml MODEL [GPU_MEMORY]\n";
    return switchyard::kExitUsageOrIo;
  }
  try {
    switchyard::CheckOptions options;
    options.profile = argv[1];
    options.model = model_spec(argv[2]);
    if (argc == 4) options.budget.gpu_bytes = gpu_budgets(argv[3]);
    // A profile that cannot be parsed at all, or a model that cannot be read, throws; every other
    // mistake (a bad regex, a device over budget) is a diagnostic in the result, with its place.
    const switchyard::CheckResult result = switchyard::run_check(options);
    std::cout << switchyard::format_check_table(result, options.budget);
    return result.diagnostics.has_errors() ? switchyard::kExitBadContent : 0;
  } catch (const switchyard::InputError& e) {
    std::cerr << "check_profile: error: " << e.what() << "\n";
    return e.exit_code();
  }
}
