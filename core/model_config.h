#pragma once
// ModelConfig: the architecture hyper-parameters of a HF config.json, for the four MoE families we
// place. Parsing accepts both the classic `rope_scaling` and transformers v5 `rope_parameters`.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace switchyard {

enum class Architecture { deepseek_v3, deepseek_v2, qwen3_moe, mixtral };
const char* architecture_model_type(Architecture arch);  // "deepseek_v3", ...

struct RopeScaling {
  std::string type;  // "yarn", "linear", "dynamic", ...
  double factor = 1.0;
  std::int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
};

struct ModelConfig {
  Architecture arch = Architecture::deepseek_v3;
  std::string model_type;
  std::string source;  // file the config came from, or "preset NAME"

  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;      // dense MLP width (Mixtral: the expert width)
  std::int64_t moe_intermediate_size = 0;  // routed expert width
  int num_hidden_layers = 0;               // placed layers; MTP layers are not among them
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // GQA head width

  // Multi-head latent attention (DeepSeek).
  std::optional<std::int64_t> q_lora_rank;  // absent: q_proj instead of q_a/q_b
  std::int64_t kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;

  // Mixture of experts.
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int first_k_dense_replace = 0;  // DeepSeek: layers [0, k) are dense
  int moe_layer_freq = 1;
  int decoder_sparse_step = 1;      // Qwen3-MoE
  std::vector<int> mlp_only_layers; // Qwen3-MoE: dense layers
  int n_group = 1;
  int topk_group = 1;
  std::string topk_method = "greedy";  // greedy | group_limited_greedy | noaux_tc
  std::string scoring_func = "softmax";
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;

  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  std::int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  int num_nextn_predict_layers = 0;  // DeepSeek-V3 MTP layers, stored after the placed layers
  std::string torch_dtype = "bfloat16";

  bool is_deepseek() const { return arch == Architecture::deepseek_v3 || arch == Architecture::deepseek_v2; }
  bool is_moe_layer(int layer) const;
  // Bytes of KV cache one token takes in one layer, for cache elements of `element_bytes`.
  std::uint64_t kv_cache_bytes_per_token_per_layer(int element_bytes) const;
};

// Throws InputError (exit 1) naming `source` and the field at fault: a value of the wrong type or
// outside its range (every float finite, in a range stated in the message), a default head_dim
// that hidden_size / num_attention_heads does not give whole, a rope scaling other than YaRN, or a
// config the engine cannot run (validate_model_config). Whatever `run` would refuse in a config is
// refused here, so `check` refuses it first.
ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source);
// Reads `config_json` as a regular file of at most kMaxConfigJsonBytes (InputError exit 2 when it
// cannot be read, exit 1 when it is not valid JSON or parse_model_config refuses it).
ModelConfig load_model_config(const std::filesystem::path& config_json);
// The rules between fields: RoPE widths even and at most 1024 (the kernels' limit), KV heads that
// divide the heads, DeepSeek routing that can pick num_experts_per_tok experts from topk_group
// groups with the scoring and top-k method the MoE gate implements, mlp_only_layers inside
// [0, num_hidden_layers), untied embeddings. Throws InputError (exit 1) naming `config.source` and
// the field. parse_model_config calls it; call it again after changing a parsed config
// (make-model's --layers).
void validate_model_config(const ModelConfig& config);
// HF-style config.json for `config`; parse_model_config(model_config_to_json(c)) == c.
nlohmann::json model_config_to_json(const ModelConfig& config);

}  // namespace switchyard
