#include "core/module_class.h"

#include <deque>
#include <stdexcept>
#include <unordered_map>

#include "core/model_family.h"

namespace switchyard {
namespace {

struct ClassTable {
  std::deque<ModuleClass> classes;  // deque: stable addresses for `base` pointers
  std::unordered_map<std::string, const ModuleClass*> by_spelling;
  std::vector<std::string> spellings;

  const ModuleClass& add(std::string name, const char* base, ModuleRole role, std::vector<std::string> paths) {
    ModuleClass c;
    c.id = static_cast<int>(classes.size());
    c.name = std::move(name);
    c.python_paths = std::move(paths);
    c.base = base ? by_spelling.at(base) : nullptr;
    c.role = role;
    const ModuleClass& stored = classes.emplace_back(std::move(c));
    remember(stored.name, stored);
    for (const std::string& path : stored.python_paths) remember(path, stored);
    return stored;
  }
  void remember(const std::string& spelling, const ModuleClass& c) {
    if (by_spelling.emplace(spelling, &c).second) spellings.push_back(spelling);
  }
  // One more Python path for the registered class `native` (after its first, the display name).
  void alias(const std::string& path, const std::string& native) {
    for (ModuleClass& c : classes)
      if (c.name == native) {
        c.python_paths.push_back(path);
        remember(path, c);
        return;
      }
    throw std::logic_error("alias of unregistered module class " + native);
  }

  // A family's classes under their Python modules (core/model_family.h).
  void add_family(const FamilyClasses& family) {
    for (const FamilyClass& cls : family.classes) {
      const std::string python_name = cls.python_name ? cls.python_name : cls.name;
      std::vector<std::string> paths;
      for (const std::string& module : family.python_modules) paths.push_back(module + "." + python_name);
      add(cls.name, cls.base, by_spelling.at(cls.base)->role, std::move(paths));
    }
  }

  ClassTable() {
    add("Module", nullptr, ModuleRole::generic, {"torch.nn.Module", "torch.nn.modules.module.Module"});
    add("Linear", "Module", ModuleRole::linear, {"torch.nn.Linear", "torch.nn.modules.linear.Linear"});
    add("Embedding", "Module", ModuleRole::embedding, {"torch.nn.Embedding", "torch.nn.modules.sparse.Embedding"});
    add("ModuleList", "Module", ModuleRole::module_list, {"torch.nn.ModuleList", "torch.nn.modules.container.ModuleList"});
    // Family-neutral natives.
    add("CausalLM", "Module", ModuleRole::causal_lm, {});
    add("Model", "Module", ModuleRole::model, {});
    add("DecoderLayer", "Module", ModuleRole::decoder_layer, {});
    add("Attention", "Module", ModuleRole::attention, {});
    add("MoE", "Module", ModuleRole::moe, {});
    add("MoEGate", "Module", ModuleRole::gate, {});
    add("MLP", "Module", ModuleRole::mlp, {});
    add("RMSNorm", "Module", ModuleRole::rms_norm, {});
    add("RotaryEmbedding", "Module", ModuleRole::rotary, {});

    for (const ModelFamily* family : model_families()) {
      for (const FamilyClasses& classes : family->classes) add_family(classes);
      for (const ClassAlias& a : family->class_aliases) alias(a.python_path, a.name);
    }
  }
};

const ClassTable& table() {
  static const ClassTable t;
  return t;
}

}  // namespace

const char* module_role_name(ModuleRole role) {
  switch (role) {
    case ModuleRole::generic: return "module";
    case ModuleRole::causal_lm: return "causal LM";
    case ModuleRole::model: return "model";
    case ModuleRole::module_list: return "module list";
    case ModuleRole::decoder_layer: return "decoder layer";
    case ModuleRole::attention: return "attention";
    case ModuleRole::moe: return "MoE block";
    case ModuleRole::gate: return "MoE gate";
    case ModuleRole::mlp: return "MLP";
    case ModuleRole::linear: return "linear";
    case ModuleRole::embedding: return "embedding";
    case ModuleRole::rms_norm: return "RMSNorm";
    case ModuleRole::rotary: return "rotary embedding";
  }
  return "module";
}

bool ModuleClass::is_a(const ModuleClass& other) const {
  for (const ModuleClass* c = this; c; c = c->base)
    if (c == &other) return true;
  return false;
}

const ModuleClass* find_module_class(std::string_view name_or_path) {
  const auto& map = table().by_spelling;
  const auto it = map.find(std::string(name_or_path));
  return it == map.end() ? nullptr : it->second;
}

const ModuleClass& module_class(std::string_view native_name) {
  const ModuleClass* c = find_module_class(native_name);
  if (!c) throw std::logic_error("unregistered module class " + std::string(native_name));
  return *c;
}

const std::vector<std::string>& module_class_spellings() { return table().spellings; }

}  // namespace switchyard
