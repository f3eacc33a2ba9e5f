#pragma once
// Module classes: the Python classes a ktransformers rule's `match.class` names, with their
// inheritance, so matching follows isinstance. Each concrete class (DeepseekV3MoE, ...) derives
// from one of our family-neutral natives (MoE, Attention, ...), which themselves derive from
// Module; `class: MoE` thus matches the MoE block of every family. The families list their own
// classes (core/model_family.h); this table holds the natives and collects theirs.
#include <string>
#include <string_view>
#include <vector>

namespace switchyard {

// What a module is, whatever its family; operators declare which roles they can replace.
enum class ModuleRole {
  generic, causal_lm, model, module_list, decoder_layer, attention, moe, gate, mlp, linear,
  embedding, rms_norm, rotary,
};
const char* module_role_name(ModuleRole role);

struct ModuleClass {
  int id = 0;
  std::string name;                       // native name: "DeepseekV3MoE", "Linear", "MoE"
  std::vector<std::string> python_paths;  // "ktransformers.models.modeling_deepseek_v3.DeepseekV3MoE", ...
  const ModuleClass* base = nullptr;      // nullptr only for Module
  ModuleRole role = ModuleRole::generic;

  // isinstance(module_of_this_class, other)
  bool is_a(const ModuleClass& other) const;
  // The path ktransformers rules use for this class (first python path), else the native name.
  const std::string& display_name() const { return python_paths.empty() ? name : python_paths.front(); }
};

// Looks a class up by native name or any of its Python paths; nullptr when unknown.
const ModuleClass* find_module_class(std::string_view name_or_path);
// The class with this native name; it must exist (used by the tree builders).
const ModuleClass& module_class(std::string_view native_name);
// Every spelling find_module_class accepts, for did-you-mean.
const std::vector<std::string>& module_class_spellings();

}  // namespace switchyard
