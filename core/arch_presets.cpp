#include "core/arch_presets.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"

namespace switchyard {

const std::vector<ArchPreset>& arch_presets() {
  static const std::vector<ArchPreset> presets = [] {
    std::vector<ArchPreset> all;
    for (const bool test_size : {false, true})
      for (const ModelFamily* family : model_families())
        for (const ArchPreset& preset : family->presets)
          if (preset.test_size == test_size) all.push_back(preset);
    return all;
  }();
  return presets;
}

const ArchPreset* find_arch_preset(std::string_view name) {
  for (const ArchPreset& preset : arch_presets())
    if (preset.name == name) return &preset;
  return nullptr;
}

ModelConfig preset_model_config(std::string_view name) {
  const ArchPreset* preset = find_arch_preset(name);
  if (!preset) {
    std::vector<std::string> names;
    for (const ArchPreset& p : arch_presets()) names.push_back(p.name);
    throw InputError("unknown --arch '" + std::string(name) + "'" + did_you_mean(name, names) +
                     "; presets: " + join(names, ", "));
  }
  return parse_model_config(nlohmann::json::parse(preset->config_json), "preset " + preset->name);
}

}  // namespace switchyard
