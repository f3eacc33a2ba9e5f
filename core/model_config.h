#pragma once
// ModelConfig: the architecture hyper-parameters of a HF config.json. Its model_type picks the
// family (core/model_family.h), which reads its own fields and keeps its own rules; parsing accepts
// both the classic `rope_scaling` and transformers v5 `rope_parameters`.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model_family.h"

namespace switchyard {

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
  const ModelFamily* family = nullptr;  // never null in a parsed config
  std::string model_type;               // family->model_type
  std::string source;  // file the config came from, or "preset NAME"

  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;      // dense MLP width (Mixtral: the expert width)
  std::int64_t moe_intermediate_size = 0;  // routed expert width
  int num_hidden_layers = 0;               // placed layers; MTP layers are not among them
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // GQA head width
  // GQA: RoPE turns the first rope_dim() = head_dim * partial_rotary_factor dimensions of each
  // head (GLM-4.5: half), the rest pass through.
  double partial_rotary_factor = 1.0;
  bool qk_norm = false;  // GQA: per-head RMSNorm of queries and keys before RoPE (q_norm, k_norm)

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
  int first_k_dense_replace = 0;  // DeepSeek, GLM-4.5: layers [0, k) are dense
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
  bool attention_bias = false;  // GQA: q_proj, k_proj, v_proj (and the family's o_proj) have biases
  int num_nextn_predict_layers = 0;  // MTP layers (DeepSeek-V3, GLM-4.5), stored after the placed layers
  std::string torch_dtype = "bfloat16";

  AttentionKind attention() const { return family->attention; }
  bool is_moe_layer(int layer) const { return family->is_moe_layer(*this, layer); }
  // The dimensions of a head that RoPE turns: qk_rope_head_dim (MLA), else as partial_rotary_factor says.
  int rope_dim() const;
  // Bytes of KV cache one token takes in one layer, for cache elements of `element_bytes`.
  std::uint64_t kv_cache_bytes_per_token_per_layer(int element_bytes) const;
};

// Throws InputError (exit 1) naming `source` and the field at fault: a value of the wrong type or
// outside its range (every float finite, in a range stated in the message), a default head_dim
// that hidden_size / num_attention_heads does not give whole, a rope scaling other than YaRN, or a
// config the engine cannot run (validate_model_config). An unknown model_type names the families
// there are. Whatever `run` would refuse in a config is refused here, so `check` refuses it first.
ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source);
// Reads `config_json` as a regular file of at most kMaxConfigJsonBytes (InputError exit 2 when it
// cannot be read, exit 1 when it is not valid JSON or parse_model_config refuses it).
ModelConfig load_model_config(const std::filesystem::path& config_json);
// The rules between fields: RoPE widths even and at most 1024 (the kernels' limit), KV heads that
// divide the heads, routed experts over all layers within bounds, untied embeddings; then the
// family's own (routing the MoE gate implements, layer lists in range). Throws InputError (exit 1)
// naming `config.source` and the field. parse_model_config calls it; call it again after changing a parsed config
// (make-model's --layers).
void validate_model_config(const ModelConfig& config);
// HF-style config.json for `config`; parse_model_config(model_config_to_json(c)) == c.
nlohmann::json model_config_to_json(const ModelConfig& config);

}  // namespace switchyard
