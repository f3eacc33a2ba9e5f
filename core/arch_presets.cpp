#include "core/arch_presets.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"

namespace switchyard {
namespace {

// DeepSeek-V3 and R1 share this architecture (61 layers, 256 routed experts, MLA).
constexpr const char* kDeepseekV3 = R"({
  "model_type": "deepseek_v3", "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
  "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_nextn_predict_layers": 1,
  "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
  "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
  "v_head_dim": 128, "qk_nope_head_dim": 128, "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4,
  "num_experts_per_tok": 8, "moe_layer_freq": 1, "first_k_dense_replace": 3, "norm_topk_prob": true,
  "scoring_func": "sigmoid", "max_position_embeddings": 163840, "rms_norm_eps": 1e-06,
  "rope_theta": 10000, "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16",
  "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                   "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
})";

constexpr const char* kDeepseekV2 = R"({
  "model_type": "deepseek_v2", "vocab_size": 102400, "hidden_size": 5120, "intermediate_size": 12288,
  "moe_intermediate_size": 1536, "num_hidden_layers": 60, "num_attention_heads": 128,
  "num_key_value_heads": 128, "n_shared_experts": 2, "n_routed_experts": 160, "routed_scaling_factor": 16.0,
  "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128,
  "qk_nope_head_dim": 128, "topk_method": "group_limited_greedy", "n_group": 8, "topk_group": 3,
  "num_experts_per_tok": 6, "moe_layer_freq": 1, "first_k_dense_replace": 1, "norm_topk_prob": false,
  "scoring_func": "softmax", "max_position_embeddings": 163840, "rms_norm_eps": 1e-06, "rope_theta": 10000,
  "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16",
  "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                   "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}
})";

constexpr const char* kDeepseekV2Lite = R"({
  "model_type": "deepseek_v2", "vocab_size": 102400, "hidden_size": 2048, "intermediate_size": 10944,
  "moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
  "num_key_value_heads": 16, "n_shared_experts": 2, "n_routed_experts": 64, "routed_scaling_factor": 1.0,
  "kv_lora_rank": 512, "q_lora_rank": null, "qk_rope_head_dim": 64, "v_head_dim": 128,
  "qk_nope_head_dim": 128, "topk_method": "greedy", "n_group": 1, "topk_group": 1,
  "num_experts_per_tok": 6, "moe_layer_freq": 1, "first_k_dense_replace": 1, "norm_topk_prob": false,
  "scoring_func": "softmax", "max_position_embeddings": 163840, "rms_norm_eps": 1e-06, "rope_theta": 10000,
  "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16",
  "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                   "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}
})";

constexpr const char* kQwen3_30B_A3B = R"({
  "model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
  "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
  "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
  "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": true,
  "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16", "rope_scaling": null
})";

constexpr const char* kMixtral8x7B = R"({
  "model_type": "mixtral", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
  "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
  "num_experts_per_tok": 2, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

// Tiny models keep every structural feature of their family (q_lora, groups, dense layers, YaRN)
// at widths that run in milliseconds.
constexpr const char* kTinyDeepseekV3 = R"({
  "model_type": "deepseek_v3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
  "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_nextn_predict_layers": 1,
  "num_attention_heads": 4, "num_key_value_heads": 4, "n_shared_experts": 1, "n_routed_experts": 16,
  "routed_scaling_factor": 2.5, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 8,
  "v_head_dim": 16, "qk_nope_head_dim": 16, "topk_method": "noaux_tc", "n_group": 4, "topk_group": 2,
  "num_experts_per_tok": 4, "moe_layer_freq": 1, "first_k_dense_replace": 1, "norm_topk_prob": true,
  "scoring_func": "sigmoid", "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 10000,
  "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16",
  "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 1024,
                   "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
})";

constexpr const char* kTinyDeepseekV2 = R"({
  "model_type": "deepseek_v2", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
  "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4,
  "n_shared_experts": 2, "n_routed_experts": 8, "routed_scaling_factor": 1.0, "kv_lora_rank": 32,
  "q_lora_rank": null, "qk_rope_head_dim": 8, "v_head_dim": 16, "qk_nope_head_dim": 16,
  "topk_method": "greedy", "n_group": 1, "topk_group": 1, "num_experts_per_tok": 2, "moe_layer_freq": 1,
  "first_k_dense_replace": 1, "norm_topk_prob": false, "scoring_func": "softmax",
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 10000,
  "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16"
})";

constexpr const char* kTinyQwen3Moe = R"({
  "model_type": "qwen3_moe", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
  "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 16, "num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
  "mlp_only_layers": [], "norm_topk_prob": true, "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16"
})";

constexpr const char* kTinyMixtral = R"({
  "model_type": "mixtral", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 96,
  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4,
  "num_experts_per_tok": 2, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

}  // namespace

const std::vector<ArchPreset>& arch_presets() {
  static const std::vector<ArchPreset> presets = {
      {"deepseek-v3", "DeepSeek-V3 / R1, 671B, 61 layers, 256 experts", kDeepseekV3},
      {"deepseek-v2", "DeepSeek-V2, 236B, 60 layers, 160 experts", kDeepseekV2},
      {"deepseek-v2-lite", "DeepSeek-V2-Lite, 16B, 27 layers, 64 experts", kDeepseekV2Lite},
      {"qwen3-30b-a3b", "Qwen3-30B-A3B, 48 layers, 128 experts", kQwen3_30B_A3B},
      {"mixtral-8x7b", "Mixtral-8x7B, 32 layers, 8 experts", kMixtral8x7B},
      {"tiny-deepseek-v3", "DeepSeek-V3 structure at test size", kTinyDeepseekV3},
      {"tiny-deepseek-v2", "DeepSeek-V2 structure without q_lora, at test size", kTinyDeepseekV2},
      {"tiny-qwen3-moe", "Qwen3-MoE structure at test size", kTinyQwen3Moe},
      {"tiny-mixtral", "Mixtral structure at test size", kTinyMixtral},
  };
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
