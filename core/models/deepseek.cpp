// DeepSeek-V2 and DeepSeek-V3 (deepseek_v2, deepseek_v3): multi-head latent attention, routed and
// shared experts after `first_k_dense_replace` dense layers, group-limited routing. The module
// tree follows the registration order of DeepSeek's modeling code (the classes ktransformers'
// modeling_deepseek{,_v3}.py define).
#include <nlohmann/json.hpp>

#include "core/gguf_keys.h"
#include "core/models/config_parts.h"
#include "core/models/tree_builder.h"

namespace switchyard::models {
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

bool is_v3(const ModelConfig& c) { return c.model_type == "deepseek_v3"; }

// The class names of each version's modeling code.
struct Names {
  const char* causal_lm;
  const char* model;
  const char* layer;
  const char* attention;
  const char* moe;
  const char* gate;
  const char* mlp;
  const char* norm;
  const char* rotary;
  const char* yarn_rotary;
};

constexpr Names kV3 = {"DeepseekV3ForCausalLM", "DeepseekV3Model", "DeepseekV3DecoderLayer", "DeepseekV3Attention",
                       "DeepseekV3MoE", "DeepseekV3MoEGate", "DeepseekV3MLP", "DeepseekV3RMSNorm",
                       "DeepseekV3RotaryEmbedding", "DeepseekV3YarnRotaryEmbedding"};
constexpr Names kV2 = {"DeepseekV2ForCausalLM", "DeepseekV2Model", "DeepseekV2DecoderLayer", "DeepseekV2Attention",
                       "DeepseekV2MoE", "DeepseekV2MoEGate", "DeepseekV2MLP", "DeepseekV2RMSNorm",
                       "DeepseekV2RotaryEmbedding", "DeepseekV2YarnRotaryEmbedding"};

// The module classes under DeepSeek's modeling code (ktransformers' copy and transformers') and,
// for the YaRN rotary embedding, ktransformers' copy alone.
std::vector<FamilyClasses> classes(const Names& n, const char* kt_module, const char* hf_module) {
  return {{{kt_module, hf_module},
           {{n.causal_lm, "CausalLM"}, {n.model, "Model"}, {n.layer, "DecoderLayer"}, {n.attention, "Attention"},
            {n.moe, "MoE"}, {n.gate, "MoEGate", "MoEGate"}, {n.mlp, "MLP"}, {n.norm, "RMSNorm"},
            {n.rotary, "RotaryEmbedding"}}},
          {{kt_module}, {{n.yarn_rotary, n.rotary}}}};
}

void parse(const ConfigFields& f, ModelConfig& c) {
  const bool v3 = is_v3(c);
  parse_mla_attention(f, c);
  c.n_routed_experts = static_cast<int>(f.integer("n_routed_experts", 1, kMaxExperts));
  c.n_shared_experts = static_cast<int>(f.integer_or("n_shared_experts", 0, 0, kMaxExperts));
  c.moe_intermediate_size = f.integer("moe_intermediate_size", 1, kMaxWidth);
  c.first_k_dense_replace = static_cast<int>(f.integer_or("first_k_dense_replace", 0, 0, kMaxLayers));
  c.moe_layer_freq = static_cast<int>(f.integer_or("moe_layer_freq", 1, 1, kMaxLayers));
  c.n_group = static_cast<int>(f.integer_or("n_group", 1, 1, kMaxExperts));
  c.topk_group = static_cast<int>(f.integer_or("topk_group", 1, 1, c.n_group));
  c.topk_method = f.string_or("topk_method", v3 ? "noaux_tc" : "greedy");
  c.scoring_func = f.string_or("scoring_func", v3 ? "sigmoid" : "softmax");
  c.routed_scaling_factor = f.number_or("routed_scaling_factor", 1.0, kRoutedScalingFactor);
  c.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
  c.num_nextn_predict_layers = static_cast<int>(f.integer_or("num_nextn_predict_layers", 0, 0, 16));
}

// The routing the MoE gate runs (operators/cpu/kernels/moe_gate.h): V3 scores with a sigmoid and always
// routes within groups (noaux_tc, a group scored by its two best experts); V2 scores with a
// softmax, greedily or within groups (group_limited_greedy, a group scored by its best).
void validate(const ModelConfig& c) {
  const auto fail = [&](const std::string& key, const std::string& what) { fail_field(c.source, key, what); };
  const bool v3 = is_v3(c);
  const char* scoring = v3 ? "sigmoid" : "softmax";
  if (c.scoring_func != scoring)
    fail("scoring_func", "is '" + c.scoring_func + "', but " + c.model_type + " routes with " + scoring +
                             " scores, the only scoring this engine implements for it");
  if (v3 && c.topk_method != "noaux_tc")
    fail("topk_method", "is '" + c.topk_method + "', but deepseek_v3 routes with noaux_tc only");
  if (!v3 && c.topk_method != "greedy" && c.topk_method != "group_limited_greedy")
    fail("topk_method", "is '" + c.topk_method + "'; deepseek_v2 routes with greedy or group_limited_greedy");
  if (!v3 && c.topk_method != "group_limited_greedy") return;  // greedy: n_group and topk_group unused
  validate_group_limited_routing(c, v3 ? GroupScoring::sum_of_top2 : GroupScoring::max);
}

void write(const ModelConfig& c, nlohmann::json& j) {
  write_mla_attention(c, j);
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["first_k_dense_replace"] = c.first_k_dense_replace;
  j["moe_layer_freq"] = c.moe_layer_freq;
  j["n_group"] = c.n_group;
  j["topk_group"] = c.topk_group;
  j["topk_method"] = c.topk_method;
  j["scoring_func"] = c.scoring_func;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
}

bool is_moe_layer(const ModelConfig& c, int layer) {
  return layer >= c.first_k_dense_replace && layer % c.moe_layer_freq == 0;
}

// As transformers routes (operators/cpu/kernels/moe_gate.h gives the sources). V2's native router ignores
// norm_topk_prob, and so does this scheme; DeepSeek's remote code normalises instead of scaling
// when top_k > 1 and norm_topk_prob. Every released V2 checkpoint has norm_topk_prob false, where
// the two agree.
GateScheme gate_scheme(const ModelConfig& c) {
  if (is_v3(c)) return noaux_tc_gate_scheme(c);
  GateScheme g;
  g.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  if (c.topk_method == "group_limited_greedy") {
    g.group_scoring = GroupScoring::max;
    g.n_group = c.n_group;
    g.topk_group = c.topk_group;
  }
  return g;
}

// llama.cpp's deepseek2 (both versions): MLA written as MQA with heads of kv_lora_rank +
// qk_rope_head_dim (key_length) and kv_lora_rank (value_length); the real widths in the _mla keys
// (older files: key_length and value_length are them). V3 is the one that gates with a sigmoid.
// YaRN's mscale_all_dim is stored times 0.1 as yarn_log_multiplier; every DeepSeek release has
// mscale equal to it.
void read_gguf(const GgufKeys& k, nlohmann::json& c) {
  const bool v3 = k.choice_or("expert_gating_func", 1, {{1, "softmax"}, {2, "sigmoid"}}) == 2;
  c["model_type"] = v3 ? "deepseek_v3" : "deepseek_v2";
  const std::int64_t q_lora = k.integer_or("attention.q_lora_rank", 0);
  c["q_lora_rank"] = q_lora > 0 ? nlohmann::json(q_lora) : nlohmann::json(nullptr);
  c["kv_lora_rank"] = k.integer("attention.kv_lora_rank");
  const std::int64_t rope = k.integer("rope.dimension_count");
  c["qk_rope_head_dim"] = rope;
  const bool mla = k.has("attention.key_length_mla");
  c["qk_nope_head_dim"] = k.integer(mla ? "attention.key_length_mla" : "attention.key_length") - rope;
  c["v_head_dim"] = k.integer(mla ? "attention.value_length_mla" : "attention.value_length");
  c["num_key_value_heads"] = c["num_attention_heads"];  // the file's 1 is the MQA form's
  c["n_routed_experts"] = k.integer("expert_count", 1, kMaxExperts);
  c["n_shared_experts"] = k.integer_or("expert_shared_count", 0);
  c["moe_intermediate_size"] = k.integer("expert_feed_forward_length");
  c["first_k_dense_replace"] = k.integer_or("leading_dense_block_count", 0);
  c["routed_scaling_factor"] = k.number_or("expert_weights_scale", 1.0);
  c["norm_topk_prob"] = k.flag_or("expert_weights_norm", false);
  const std::int64_t groups = k.integer_or("expert_group_count", 1);
  c["n_group"] = groups;
  c["topk_group"] = k.integer_or("expert_group_used_count", 1);
  c["scoring_func"] = v3 ? "sigmoid" : "softmax";
  c["topk_method"] = v3 ? "noaux_tc" : groups > 1 ? "group_limited_greedy" : "greedy";
  if (c.contains("rope_scaling") && k.has("rope.scaling.yarn_log_multiplier")) {
    const double mscale_all_dim = k.number("rope.scaling.yarn_log_multiplier") / 0.1;
    c["rope_scaling"]["mscale"] = mscale_all_dim;
    c["rope_scaling"]["mscale_all_dim"] = mscale_all_dim;
  }
}

void write_gguf(const ModelConfig& c, nlohmann::json& k) {
  k["expert_gating_func"] = is_v3(c) ? 2 : 1;
  // 0: no q_a/q_b (llama.cpp reads the key unless it recognises a V2-Lite by its layer count).
  k["attention.q_lora_rank"] = c.q_lora_rank.value_or(0);
  k["attention.kv_lora_rank"] = c.kv_lora_rank;
  k["attention.head_count_kv"] = 1;
  k["attention.key_length"] = c.kv_lora_rank + c.qk_rope_head_dim;
  k["attention.value_length"] = c.kv_lora_rank;
  k["attention.key_length_mla"] = c.qk_nope_head_dim + c.qk_rope_head_dim;
  k["attention.value_length_mla"] = c.v_head_dim;
  k["rope.dimension_count"] = c.qk_rope_head_dim;
  k["expert_shared_count"] = c.n_shared_experts;
  k["expert_feed_forward_length"] = c.moe_intermediate_size;
  k["leading_dense_block_count"] = c.first_k_dense_replace;
  k["expert_weights_scale"] = c.routed_scaling_factor;
  k["expert_weights_norm"] = c.norm_topk_prob;
  if (c.topk_method != "greedy") {
    k["expert_group_count"] = c.n_group;
    k["expert_group_used_count"] = c.topk_group;
  }
  if (c.rope_scaling) k["rope.scaling.yarn_log_multiplier"] = 0.1 * c.rope_scaling->mscale_all_dim;
}

void attention(TreeBuilder& b, const Names& n, int layer) {
  const ModelConfig& c = b.tree().config();
  const std::int64_t heads = c.num_attention_heads;
  const std::int64_t qk_head = c.qk_nope_head_dim + c.qk_rope_head_dim;
  const int attn = b.module(layer, "self_attn", n.attention);
  if (c.q_lora_rank) {
    b.linear(attn, "q_a_proj", *c.q_lora_rank, c.hidden_size, TensorKind::attention);
    b.norm(attn, "q_a_layernorm", *c.q_lora_rank, n.norm);
    b.linear(attn, "q_b_proj", heads * qk_head, *c.q_lora_rank, TensorKind::attention);
  } else {
    b.linear(attn, "q_proj", heads * qk_head, c.hidden_size, TensorKind::attention);
  }
  b.linear(attn, "kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, c.hidden_size, TensorKind::attention);
  b.norm(attn, "kv_a_layernorm", c.kv_lora_rank, n.norm);
  b.linear(attn, "kv_b_proj", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, TensorKind::attention);
  b.linear(attn, "o_proj", c.hidden_size, heads * c.v_head_dim, TensorKind::attention);
  const bool yarn = c.rope_scaling && c.rope_scaling->type == "yarn";
  b.module(attn, "rotary_emb", yarn ? n.yarn_rotary : n.rotary);
}

void moe(TreeBuilder& b, const Names& n, int layer) {
  const ModelConfig& c = b.tree().config();
  const int mlp = b.module(layer, "mlp", n.moe);
  const int experts = b.module(mlp, "experts", "ModuleList");
  for (int e = 0; e < c.n_routed_experts; ++e) {
    const int expert = b.expert(experts, e, n.mlp);
    b.swiglu(expert, c.hidden_size, c.moe_intermediate_size, TensorKind::expert_gate_up, TensorKind::expert_down);
  }
  const int gate = b.module(mlp, "gate", n.gate);
  b.param(gate, "weight", shape2(c.n_routed_experts, c.hidden_size), TensorKind::router);
  if (c.topk_method == "noaux_tc") b.param(gate, "e_score_correction_bias", shape1(c.n_routed_experts), TensorKind::router_bias);
  if (c.n_shared_experts > 0) {
    const int shared = b.module(mlp, "shared_experts", n.mlp);
    b.swiglu(shared, c.hidden_size, c.moe_intermediate_size * c.n_shared_experts, TensorKind::shared_expert,
             TensorKind::shared_expert);
  }
}

void build_tree(TreeBuilder& b, const Names& n) {
  const ModelConfig& c = b.tree().config();
  const int root = b.root(n.causal_lm);
  const int model = b.module(root, "model", n.model);
  const int embed = b.module(model, "embed_tokens", "Embedding");
  b.param(embed, "weight", shape2(c.vocab_size, c.hidden_size), TensorKind::embedding);
  const int layers = b.module(model, "layers", "ModuleList");
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const int layer = b.layer(layers, i, n.layer);
    attention(b, n, layer);
    if (c.is_moe_layer(i)) {
      moe(b, n, layer);
    } else {
      const int mlp = b.module(layer, "mlp", n.mlp);
      b.swiglu(mlp, c.hidden_size, c.intermediate_size, TensorKind::dense_mlp, TensorKind::dense_mlp);
    }
    b.norm(layer, "input_layernorm", c.hidden_size, n.norm);
    b.norm(layer, "post_attention_layernorm", c.hidden_size, n.norm);
  }
  b.norm(model, "norm", c.hidden_size, n.norm);
  if (c.tie_word_embeddings) b.module(root, "lm_head", "Linear");
  else b.linear(root, "lm_head", c.vocab_size, c.hidden_size, TensorKind::output);
}

// What the two versions share; each fills in its names, tokens and presets.
ModelFamily deepseek(const Names& n, const char* model_type, const char* kt_module, const char* hf_module) {
  ModelFamily f;
  f.model_type = model_type;
  f.causal_lm_class = n.causal_lm;
  f.classes = classes(n, kt_module, hf_module);
  f.parse = parse;
  f.validate = validate;
  f.write = write;
  f.is_moe_layer = is_moe_layer;
  f.routed_experts_field = "n_routed_experts";
  f.attention = AttentionKind::mla;
  f.feed_forward_child = "mlp";
  f.expert_projections = {"gate_proj", "up_proj", "down_proj"};
  f.gate_scheme = gate_scheme;
  f.ktransformers_model_class = "ktransformers.operators.models.KDeepseekV2Model";
  f.gguf.architecture = "deepseek2";
  f.gguf.read = read_gguf;
  f.gguf.write = write_gguf;
  return f;
}

}  // namespace

const ModelFamily& deepseek_v3() {
  static const ModelFamily family = [] {
    ModelFamily f = deepseek(kV3, "deepseek_v3", "ktransformers.models.modeling_deepseek_v3",
                             "transformers.models.deepseek_v3.modeling_deepseek_v3");
    f.build_tree = [](TreeBuilder& b) { build_tree(b, kV3); };
    f.tokens = {0, {1}, std::nullopt};
    f.presets = {{"deepseek-v3", "DeepSeek-V3 / R1, 671B, 61 layers, 256 experts", kDeepseekV3},
                 {"tiny-deepseek-v3", "DeepSeek-V3 structure at test size", kTinyDeepseekV3, true}};
    return f;
  }();
  return family;
}

const ModelFamily& deepseek_v2() {
  static const ModelFamily family = [] {
    ModelFamily f = deepseek(kV2, "deepseek_v2", "ktransformers.models.modeling_deepseek",
                             "transformers.models.deepseek_v2.modeling_deepseek_v2");
    f.build_tree = [](TreeBuilder& b) { build_tree(b, kV2); };
    f.tokens = {100000, {100001}, std::nullopt};
    f.presets = {{"deepseek-v2", "DeepSeek-V2, 236B, 60 layers, 160 experts", kDeepseekV2},
                 {"deepseek-v2-lite", "DeepSeek-V2-Lite, 16B, 27 layers, 64 experts", kDeepseekV2Lite},
                 {"tiny-deepseek-v2", "DeepSeek-V2 structure without q_lora, at test size", kTinyDeepseekV2, true}};
    return f;
  }();
  return family;
}

}  // namespace switchyard::models
