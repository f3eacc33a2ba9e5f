#pragma once
// ModelFamily: everything particular to one architecture family (one config.json model_type), in
// one place: its module classes and module tree, its config.json fields, defaults and rules, the
// names the operators look up in a decoder layer, its router's scheme, its attention kind, the
// ktransformers model class `split` writes, and its presets. Each family is one file,
// core/models/<family>.cpp, listed by one line in core/models/registry.cpp; the rest of the code
// asks `config.family` and never switches on the model type. docs/adding-a-model.md says how to
// add one.
//
// Shared by every family, and so not described here: the decoder stack (model.embed_tokens,
// model.layers.N.{self_attn, <feed_forward_child>, input_layernorm, post_attention_layernorm},
// model.norm, lm_head), SwiGLU MLPs with gate_proj/up_proj/down_proj, and the MoE block's
// children `gate` (the router: weight [n_experts, hidden], plus e_score_correction_bias where the
// scheme adds one), `experts` (one module per routed expert) and `shared_experts`.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace switchyard {

struct ModelConfig;
class ConfigFields;
class GgufKeys;
namespace models {
class TreeBuilder;
}

// How a layer attends, and so which operators run it and what its KV cache holds.
enum class AttentionKind {
  mla,  // multi-head latent attention (q_a/q_b or q_proj, kv_a_proj_with_mqa, kv_b_proj): caches the latent
  gqa,  // grouped-query attention (q/k/v/o_proj): caches keys and values per KV head
};

// A MoE router's algorithm as data. The family fills it from the config (gate_scheme); the
// operators turn it into operators/cpu/kernels/moe_gate.h's MoeGateConfig, whose comment gives each step.
enum class RouterScoring { softmax, sigmoid };
enum class GroupScoring { none, max, sum_of_top2 };  // a group's score when routing is group-limited
struct GateScheme {
  RouterScoring scoring = RouterScoring::softmax;
  bool correction_bias = false;  // choices add the router's e_score_correction_bias [n_experts] f32
  GroupScoring group_scoring = GroupScoring::none;
  int n_group = 1;
  int topk_group = 1;
  bool weights_from_scores = false;  // weights: the scores at the chosen experts, without bias or mask
  bool normalize = false;            // weights /= (their sum + normalize_epsilon)
  float normalize_epsilon = 0.0f;
  bool scale_when_normalized = true;  // weights *= routed_scaling_factor also when normalised
  float routed_scaling_factor = 1.0f;
};

// The projections of a SwiGLU block: down(silu(gate(x)) * up(x)).
struct ProjectionNames {
  const char* gate;
  const char* up;
  const char* down;
};

// A module class of the family: its native name, the family-neutral or family class it derives
// from (core/module_class.h), and the name its Python modules give it when that differs
// (DeepSeek's router is `MoEGate` there).
struct FamilyClass {
  const char* name;
  const char* base;
  const char* python_name = nullptr;  // nullptr: `name`
};
// Classes that live under the same Python modules ("transformers.models.glm4_moe.modeling_glm4_moe"):
// a rule's match.class may name any of those paths.
struct FamilyClasses {
  std::vector<std::string> python_modules;
  std::vector<FamilyClass> classes;
};

// One more Python path that names a class of the family (after the class's own paths, so its
// display name stays the first of those).
struct ClassAlias {
  std::string python_path;
  std::string name;  // the family's class
};

// A built-in architecture for --arch and make-model --preset: a published config.json's
// hyper-parameters (no weights), or a tiny variant of the family for tests.
struct ArchPreset {
  std::string name;         // "glm-4.5-air"
  std::string description;  // "GLM-4.5-Air, 106B, 46 layers, 128 experts"
  std::string config_json;  // parsed by parse_model_config
  bool test_size = false;   // listed after the published models
};

// Token ids of the family's released tokenizer, which make-model writes into config.json when the
// vocabulary holds them.
struct SpecialTokens {
  std::optional<std::int64_t> bos;
  std::vector<std::int64_t> eos;  // one, or several (written as a list)
  std::optional<std::int64_t> pad;
};

// The family in GGUF files, as llama.cpp names it (core/gguf_model.h does the shared part: the
// tensor names of the decoder stack, MLPs and MoE blocks, and the keys every architecture has).
// Metadata passes through JSON objects: the keys of "<architecture>.*" without that prefix
// ("expert_count", "attention.kv_lora_rank") with their values; integers are written as u32,
// floats as f32, as llama.cpp reads them.
struct GgufSpec {
  std::string architecture;  // general.architecture: "deepseek2"; empty: the family has no GGUF form
  // The family's config.json fields from the architecture's keys, into `config`, which already
  // holds the shared ones (core/gguf_model.cpp); sets model_type. Throws InputError naming the key.
  void (*read)(const GgufKeys& keys, nlohmann::json& config) = nullptr;
  // The reverse: the family's keys for `config`, beside the shared ones.
  void (*write)(const ModelConfig& config, nlohmann::json& keys) = nullptr;
  // llama.cpp's converter reorders each head's q_proj and k_proj rows for its interleaved RoPE
  // (llama, Mixtral): row 2 j + t of a GGUF head is row t * head_dim / 2 + j of the checkpoint's.
  bool interleaved_rope_rows = false;
  // A decoder layer's post_attention_layernorm in the file: "ffn_norm", or GLM's "post_attention_norm".
  std::string post_attention_norm = "ffn_norm";
};

struct ModelFamily {
  std::string model_type;       // config.json's model_type: "glm4_moe"
  std::string causal_lm_class;  // transformers' class for AutoModelForCausalLM: "Glm4MoeForCausalLM"
  std::vector<FamilyClasses> classes;
  std::vector<ClassAlias> class_aliases;

  // config.json. parse reads the family's fields into `config` once the shared ones are read
  // (sizes, norms, rope_theta): attention (core/models/config_parts.h), MoE sizes and routing,
  // its defaults and other spellings of a field. validate holds the family's rules between fields
  // and runs after the shared ones (validate_model_config). write puts the family's fields into
  // a config.json, so that parse(write(c)) == c. All throw InputError naming the field.
  void (*parse)(const ConfigFields& fields, ModelConfig& config);
  void (*validate)(const ModelConfig& config);
  void (*write)(const ModelConfig& config, nlohmann::json& out);
  bool (*is_moe_layer)(const ModelConfig& config, int layer);
  std::string routed_experts_field;  // the field messages name for the expert count: "n_routed_experts"
  SpecialTokens tokens;

  // The module tree, with the checkpoint's names, in the registration order of its modeling code.
  void (*build_tree)(models::TreeBuilder& builder);

  // What the operators look up. q/k norms, attention biases and the rotary width are config
  // values the family's parse sets (ModelConfig::qk_norm, attention_bias, partial_rotary_factor).
  AttentionKind attention = AttentionKind::gqa;
  std::string feed_forward_child;       // a decoder layer's MLP or MoE block: "mlp", "block_sparse_moe"
  ProjectionNames expert_projections;  // of each routed expert: gate_proj/up_proj/down_proj, w1/w3/w2
  GateScheme (*gate_scheme)(const ModelConfig& config);

  // The ktransformers replacement class `split` writes for the `model` module ("Model": ours).
  std::string ktransformers_model_class;

  std::vector<ArchPreset> presets;
  GgufSpec gguf;
};

// Every family, in the order core/models/registry.cpp lists them.
const std::vector<const ModelFamily*>& model_families();
// The family with this config.json model_type, or nullptr.
const ModelFamily* find_model_family(std::string_view model_type);
// The first family whose GGUF architecture is `architecture` (both DeepSeek families are
// "deepseek2"; its reader tells them apart), or nullptr.
const ModelFamily* find_gguf_family(std::string_view architecture);
// Their model types, in registry order (for messages).
std::vector<std::string> model_family_names();

}  // namespace switchyard
