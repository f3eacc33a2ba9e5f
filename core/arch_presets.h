#pragma once
// Built-in architectures for `--arch NAME`: the published config.json of each model (hyper-
// parameters only), plus tiny variants of each family for tests. No weights are involved.
#include <string>
#include <string_view>
#include <vector>

#include "core/model_config.h"

namespace switchyard {

struct ArchPreset {
  std::string name;         // "deepseek-v3"
  std::string description;  // "DeepSeek-V3/R1, 671B"
  std::string config_json;  // config.json text, parsed by parse_model_config
};

const std::vector<ArchPreset>& arch_presets();
const ArchPreset* find_arch_preset(std::string_view name);
// Throws InputError with the list of presets (and a did-you-mean) for an unknown name.
ModelConfig preset_model_config(std::string_view name);

}  // namespace switchyard
