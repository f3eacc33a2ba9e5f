#include "core/module_class.h"

#include <deque>
#include <stdexcept>
#include <unordered_map>

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

  // One model family: the Python module paths its classes live under, and its class names.
  struct Family {
    std::vector<std::string> python_modules;
    std::vector<std::pair<std::string, const char*>> classes;  // (class name, native base)
  };
  void add_family(const Family& family) {
    for (const auto& [name, base] : family.classes) {
      std::vector<std::string> paths;
      // A class registered under a family-local name (MoEGate) keeps that Python name.
      std::string python_name = name;
      if (const auto dot = name.find('.'); dot != std::string::npos) python_name = name.substr(dot + 1);
      for (const std::string& module : family.python_modules) paths.push_back(module + "." + python_name);
      const std::string native = name.find('.') == std::string::npos ? name : name.substr(0, name.find('.'));
      add(native, base, by_spelling.at(base)->role, std::move(paths));
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

    add_family({{"ktransformers.models.modeling_deepseek_v3", "transformers.models.deepseek_v3.modeling_deepseek_v3"},
                {{"DeepseekV3ForCausalLM", "CausalLM"}, {"DeepseekV3Model", "Model"},
                 {"DeepseekV3DecoderLayer", "DecoderLayer"}, {"DeepseekV3Attention", "Attention"},
                 {"DeepseekV3MoE", "MoE"}, {"DeepseekV3MoEGate.MoEGate", "MoEGate"}, {"DeepseekV3MLP", "MLP"},
                 {"DeepseekV3RMSNorm", "RMSNorm"}, {"DeepseekV3RotaryEmbedding", "RotaryEmbedding"}}});
    add_family({{"ktransformers.models.modeling_deepseek_v3"},
                {{"DeepseekV3YarnRotaryEmbedding", "DeepseekV3RotaryEmbedding"}}});
    add_family({{"ktransformers.models.modeling_deepseek", "transformers.models.deepseek_v2.modeling_deepseek_v2"},
                {{"DeepseekV2ForCausalLM", "CausalLM"}, {"DeepseekV2Model", "Model"},
                 {"DeepseekV2DecoderLayer", "DecoderLayer"}, {"DeepseekV2Attention", "Attention"},
                 {"DeepseekV2MoE", "MoE"}, {"DeepseekV2MoEGate.MoEGate", "MoEGate"}, {"DeepseekV2MLP", "MLP"},
                 {"DeepseekV2RMSNorm", "RMSNorm"}, {"DeepseekV2RotaryEmbedding", "RotaryEmbedding"}}});
    add_family({{"ktransformers.models.modeling_deepseek"},
                {{"DeepseekV2YarnRotaryEmbedding", "DeepseekV2RotaryEmbedding"}}});
    add_family({{"ktransformers.models.modeling_qwen3_moe", "transformers.models.qwen3_moe.modeling_qwen3_moe"},
                {{"Qwen3MoeForCausalLM", "CausalLM"}, {"Qwen3MoeModel", "Model"},
                 {"Qwen3MoeDecoderLayer", "DecoderLayer"}, {"Qwen3MoeAttention", "Attention"},
                 {"Qwen3MoeSparseMoeBlock", "MoE"}, {"Qwen3MoeMLP", "MLP"}, {"Qwen3MoeRMSNorm", "RMSNorm"},
                 {"Qwen3MoeRotaryEmbedding", "RotaryEmbedding"}}});
    // ktransformers' Qwen3-MoE attention takes its RoPE from modeling_qwen2_moe's class (one per
    // layer), and its Qwen3 profiles match that class; transformers' model, which the tree
    // follows, has one model.rotary_emb, and those rules place it.
    alias("ktransformers.models.modeling_qwen2_moe.Qwen2MoeRotaryEmbedding", "Qwen3MoeRotaryEmbedding");
    add_family({{"ktransformers.models.modeling_mixtral", "transformers.models.mixtral.modeling_mixtral"},
                {{"MixtralForCausalLM", "CausalLM"}, {"MixtralModel", "Model"},
                 {"MixtralDecoderLayer", "DecoderLayer"}, {"MixtralAttention", "Attention"},
                 {"MixtralSparseMoeBlock", "MoE"}, {"MixtralBlockSparseTop2MLP", "MLP"},
                 {"MixtralRMSNorm", "RMSNorm"}, {"MixtralRotaryEmbedding", "RotaryEmbedding"}}});
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
