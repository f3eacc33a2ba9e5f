#pragma once
// Pieces of config.json that several families share, for their parse, validate and write
// (core/model_family.h): the fields of each attention kind, and the rules of group-limited routing.
#include <nlohmann/json_fwd.hpp>

#include "core/config_fields.h"
#include "core/model_family.h"
#include "core/model_config.h"

namespace switchyard::models {

// routed_scaling_factor: wide, but never 0 (the weights would all vanish) or negative.
constexpr NumberRange kRoutedScalingFactor{0.0, 1000.0, false};

// MLA (DeepSeek): q_lora_rank (absent or null: q_proj), kv_lora_rank, qk_nope_head_dim,
// qk_rope_head_dim, v_head_dim.
void parse_mla_attention(const ConfigFields& fields, ModelConfig& config);
void write_mla_attention(const ModelConfig& config, nlohmann::json& out);

// GQA: head_dim, or transformers' default hidden_size / num_attention_heads when it divides.
// Reads num_attention_heads and num_key_value_heads, which every family has, beforehand.
void parse_gqa_attention(const ConfigFields& fields, ModelConfig& config);

// Group-limited routing (DeepSeek-V2's group_limited_greedy, DeepSeek-V3's and GLM-4.5's noaux_tc):
// n_group divides the routed experts into equal groups, of at least two experts when a group is
// scored by its two best, and the topk_group kept groups hold num_experts_per_tok experts.
void validate_group_limited_routing(const ModelConfig& config, GroupScoring group_scoring);

// DeepSeek-V3's noaux_tc router, which GLM-4.5 shares: sigmoid scores, the correction bias for
// selection only, groups scored by their two best, weights from the scores, normalised when
// norm_topk_prob, times routed_scaling_factor.
GateScheme noaux_tc_gate_scheme(const ModelConfig& config);

}  // namespace switchyard::models
