#include "core/models/config_parts.h"

#include <nlohmann/json.hpp>

namespace switchyard::models {

void parse_mla_attention(const ConfigFields& f, ModelConfig& c) {
  if (f.has("q_lora_rank")) c.q_lora_rank = f.integer("q_lora_rank", 1, kMaxWidth);
  c.kv_lora_rank = f.integer("kv_lora_rank", 1, kMaxWidth);
  c.qk_nope_head_dim = static_cast<int>(f.integer("qk_nope_head_dim", 1, 4096));
  c.qk_rope_head_dim = static_cast<int>(f.integer("qk_rope_head_dim", 2, kMaxRopeDim));
  c.v_head_dim = static_cast<int>(f.integer("v_head_dim", 1, 4096));
}

void write_mla_attention(const ModelConfig& c, nlohmann::json& j) {
  j["q_lora_rank"] = c.q_lora_rank ? nlohmann::json(*c.q_lora_rank) : nlohmann::json(nullptr);
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
}

void parse_gqa_attention(const ConfigFields& f, ModelConfig& c) {
  if (f.has("head_dim")) {
    c.head_dim = static_cast<int>(f.integer("head_dim", 2, kMaxRopeDim));
    return;
  }
  // transformers' default; validate_model_config checks the result like a given head_dim.
  if (c.hidden_size % c.num_attention_heads)
    f.fail("head_dim", "is absent, and its default hidden_size / num_attention_heads = " +
                           std::to_string(c.hidden_size) + " / " + std::to_string(c.num_attention_heads) +
                           " is not a whole number; give head_dim, or a hidden_size that num_attention_heads divides");
  c.head_dim = static_cast<int>(c.hidden_size / c.num_attention_heads);
}

void validate_group_limited_routing(const ModelConfig& c, GroupScoring group_scoring) {
  const auto fail = [&](const std::string& key, const std::string& what) { fail_field(c.source, key, what); };
  if (c.n_routed_experts % c.n_group)
    fail("n_group", "is " + std::to_string(c.n_group) + ", which must divide " + c.family->routed_experts_field +
                        " (" + std::to_string(c.n_routed_experts) + ") into equal groups");
  const int per_group = c.n_routed_experts / c.n_group;
  if (group_scoring == GroupScoring::sum_of_top2 && per_group < 2)
    fail("n_group", "is " + std::to_string(c.n_group) + ": groups of " + std::to_string(per_group) +
                        " expert, but " + c.model_type +
                        " scores a group by its two best experts; n_group must be at most " +
                        c.family->routed_experts_field + " / 2 = " + std::to_string(c.n_routed_experts / 2));
  if (static_cast<std::int64_t>(c.topk_group) * per_group < c.num_experts_per_tok) {
    const int needed = (c.num_experts_per_tok + per_group - 1) / per_group;
    fail("topk_group", "is " + std::to_string(c.topk_group) + ": the kept groups of " + std::to_string(per_group) +
                           " experts each hold fewer than num_experts_per_tok = " +
                           std::to_string(c.num_experts_per_tok) + " experts; topk_group must be at least " +
                           std::to_string(needed));
  }
}

GateScheme noaux_tc_gate_scheme(const ModelConfig& c) {
  GateScheme g;
  g.scoring = RouterScoring::sigmoid;
  g.correction_bias = true;
  g.group_scoring = GroupScoring::sum_of_top2;
  g.n_group = c.n_group;
  g.topk_group = c.topk_group;
  g.weights_from_scores = true;
  g.normalize = c.norm_topk_prob;
  g.normalize_epsilon = 1e-20f;
  g.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  return g;
}

}  // namespace switchyard::models
