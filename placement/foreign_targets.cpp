#include "placement/foreign_targets.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/text.h"

namespace switchyard {
namespace {

struct FamilyNames {
  ForeignFamily family;
  std::vector<std::string> python_modules;       // where its module classes live
  std::vector<std::string> replacement_classes;  // under ktransformers.operators.
};

// The families of ktransformers' optimize_rules/ that Switchyard has no module tree for. A family
// that gains one (core/models/) leaves this list by itself: families_switchyard_runs() names it.
const std::vector<FamilyNames>& foreign_families() {
  static const std::vector<FamilyNames> families = {
      {{"qwen2_moe", "Qwen2-MoE (Qwen2-57B-A14B)"},
       {"ktransformers.models.modeling_qwen2_moe", "transformers.models.qwen2_moe.modeling_qwen2_moe"},
       {"experts.KQwen2MoeSparseMoeBlock", "experts.KQwen2MoeSparseMoeBlockV2", "balance_serve_attention.KQwen2MoeAttention",
        "layernorm.KQwen2MoeRMSNorm"}},
      {{"qwen3_next", "Qwen3-Next"},
       {"ktransformers.models.modeling_qwen3_next", "transformers.models.qwen3_next.modeling_qwen3_next"},
       {"experts.KQwen3NextSparseMoeBlockV2", "balance_serve_attention.KQwen3NextAttention",
        "balance_serve_attention.KQwen3NextGatedDeltaNet", "layernorm.KQwen3NextRMSNorm"}},
      {{"smallthinker", "SmallThinker"},
       {"ktransformers.models.modeling_smallthinker"},
       {"experts.KSmallthinkerMoeBlock", "experts.KSmallthinkerExperts", "balance_serve_attention.KSmallthinkerAttention",
        "layernorm.KSmallthinkerRMSNorm", "RoPE.KSmallthinkerRotaryEmbedding", "mlp.KSmallthinkerDenseMlpBlock"}},
      {{"llama", "Llama (ktransformers runs InternLM2.5 as one)"},
       {"ktransformers.models.modeling_llama", "transformers.models.llama.modeling_llama"},
       {"models.KLlamaModel", "attention.KLlamaAttention"}},
      {{"glm4_moe", "GLM-4.5 (glm4_moe)"},
       {"ktransformers.models.modeling_glm4_moe", "transformers.models.glm4_moe.modeling_glm4_moe"},
       {"experts.KGlm4MoeMoE", "experts.KGlm4Experts", "balance_serve_attention.KGlm4MoeAttention",
        "layernorm.KGlm4MoeRMSNorm", "RoPE.KGlm4MoeRotaryEmbedding", "mlp.KGlm4MoeMLP"}},
  };
  return families;
}

bool runs(const ForeignFamily& family) {
  const auto& run = families_switchyard_runs();
  return std::find(run.begin(), run.end(), family.model_type) != run.end();
}

struct DeviceKind {
  const char* kind;
  const char* description;
};
constexpr DeviceKind kForeignDevices[] = {
    {"npu", "an Ascend NPU (torch_npu)"},
    {"xpu", "an Intel GPU (XPU)"},
    {"mps", "an Apple GPU (MPS)"},
    {"hpu", "an Intel Gaudi (HPU)"},
};

// "npu" for "npu", "NPU:3" or " npu:0 "; "" for anything that is not a word with an optional ordinal.
std::string device_kind(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  const std::string lower = to_lower(text);
  const std::size_t colon = lower.find(':');
  const std::string kind = lower.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string ordinal = lower.substr(colon + 1);
    if (ordinal.empty() || ordinal.size() > 4 ||
        !std::all_of(ordinal.begin(), ordinal.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
      return "";
  }
  return kind;
}

}  // namespace

const ForeignFamily* foreign_family_of_module_class(std::string_view spelling) {
  const std::size_t dot = spelling.rfind('.');
  if (dot == std::string_view::npos) return nullptr;
  const std::string_view module = spelling.substr(0, dot);
  for (const FamilyNames& f : foreign_families())
    for (const std::string& python_module : f.python_modules)
      if (module == python_module) return runs(f.family) ? nullptr : &f.family;
  return nullptr;
}

const ForeignFamily* foreign_family_of_replacement(std::string_view spelling) {
  constexpr std::string_view kPrefix = "ktransformers.operators.";
  if (!starts_with(spelling, kPrefix)) return nullptr;
  const std::string_view name = spelling.substr(kPrefix.size());
  for (const FamilyNames& f : foreign_families())
    for (const std::string& replacement : f.replacement_classes)
      if (name == replacement) return runs(f.family) ? nullptr : &f.family;
  return nullptr;
}

const std::vector<std::string>& families_switchyard_runs() {
  static const std::vector<std::string> families = [] {
    std::vector<std::string> types;
    for (const ArchPreset& preset : arch_presets()) {
      const std::string type = nlohmann::json::parse(preset.config_json).value("model_type", "");
      if (!type.empty() && std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
    }
    return types;
  }();
  return families;
}

std::string foreign_device_description(std::string_view device) {
  const std::string kind = device_kind(device);
  for (const DeviceKind& d : kForeignDevices)
    if (kind == d.kind) return d.description;
  return "";
}

std::string foreign_device_kind(std::string_view device) {
  return foreign_device_description(device).empty() ? std::string() : device_kind(device);
}

}  // namespace switchyard
