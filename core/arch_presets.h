#pragma once
// Built-in architectures for `--arch NAME` and make-model's --preset: each family's presets
// (core/models/<family>.cpp), the published models first, then the tiny variants for tests.
#include <string_view>
#include <vector>

#include "core/model_config.h"
#include "core/model_family.h"

namespace switchyard {

const std::vector<ArchPreset>& arch_presets();
const ArchPreset* find_arch_preset(std::string_view name);
// Throws InputError with the list of presets (and a did-you-mean) for an unknown name.
ModelConfig preset_model_config(std::string_view name);

}  // namespace switchyard
