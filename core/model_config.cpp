#include "core/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/config_fields.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_input.h"
#include "core/text.h"

namespace switchyard {
namespace {

using nlohmann::json;

// Ranges far wider than any released model's values, narrow enough that none of them makes the
// engine compute NaN or infinity (an eps of 0 divides a zero row by zero; a theta of 1 takes the
// log of 1 as a divisor in YaRN).
constexpr NumberRange kRmsNormEps{1e-30, 1.0, true};  // stays a normal number as f32
constexpr NumberRange kRopeTheta{1.0, 1e12, false};
constexpr NumberRange kYarnFactor{1.0, 1e6, true};
constexpr NumberRange kYarnBeta{0.0, 1e4, false};
constexpr NumberRange kYarnMscale{0.0, 1000.0, true};

// The rope scaling object of config.json (`key`: rope_scaling, or transformers v5's rope_parameters).
// Only YaRN changes the frequencies here; any other scaling type is refused, since the attention
// operators implement none other.
std::optional<RopeScaling> parse_rope(const json& rope, const std::string& source, const std::string& key,
                                      std::int64_t max_position_embeddings) {
  if (rope.is_null()) return std::nullopt;
  if (!rope.is_object()) fail_field(source, key, "must be an object");
  const ConfigFields f(rope, source + ": " + key);
  const std::string type_key = f.has("rope_type") ? "rope_type" : "type";
  std::string type = f.string_or(type_key, "default");
  if (type == "default") return std::nullopt;
  if (type != "yarn")
    f.fail(type_key, "is '" + type + "', which is not supported; supported: default (no scaling), yarn");
  RopeScaling r;
  r.type = type;
  r.factor = f.number_or("factor", 1.0, kYarnFactor);
  // transformers falls back to max_position_embeddings when the original length is not given.
  r.original_max_position_embeddings =
      f.integer_or("original_max_position_embeddings", max_position_embeddings, 1, 1LL << 32);
  r.beta_fast = f.number_or("beta_fast", 32.0, kYarnBeta);
  r.beta_slow = f.number_or("beta_slow", 1.0, kYarnBeta);
  r.mscale = f.number_or("mscale", 1.0, kYarnMscale);
  r.mscale_all_dim = f.number_or("mscale_all_dim", 0.0, kYarnMscale);
  return r;
}

// Reads the field values every family has, then the family's own.
void parse_fields(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = f.integer("hidden_size", 1, kMaxWidth);
  c.intermediate_size = f.integer("intermediate_size", 1, kMaxWidth);
  c.num_hidden_layers = static_cast<int>(f.integer("num_hidden_layers", 1, kMaxLayers));
  c.max_position_embeddings = f.integer_or("max_position_embeddings", 4096, 1, 1LL << 32);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6, kRmsNormEps);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
  c.torch_dtype = f.string_or("torch_dtype", f.string_or("dtype", "bfloat16"));
  c.num_attention_heads = static_cast<int>(f.integer("num_attention_heads", 1, 4096));
  c.num_key_value_heads =
      static_cast<int>(f.integer_or("num_key_value_heads", c.num_attention_heads, 1, c.num_attention_heads));
  c.attention_bias = f.boolean_or("attention_bias", false);
  c.family->parse(f, c);
  c.num_experts_per_tok = static_cast<int>(f.integer("num_experts_per_tok", 1, c.n_routed_experts));
}

void validate_attention(const ModelConfig& c) {
  const auto fail = [&](const std::string& key, const std::string& what) { fail_field(c.source, key, what); };
  if (c.attention() == AttentionKind::mla) {
    if (c.qk_rope_head_dim < 2 || c.qk_rope_head_dim > kMaxRopeDim || c.qk_rope_head_dim % 2)
      fail("qk_rope_head_dim", "is " + std::to_string(c.qk_rope_head_dim) +
                                   "; RoPE rotates pairs of dimensions, so it must be even, in [2, " +
                                   std::to_string(kMaxRopeDim) + "]");
    return;
  }
  if (c.head_dim < 2 || c.head_dim > kMaxRopeDim || c.head_dim % 2)
    fail("head_dim", "is " + std::to_string(c.head_dim) +
                         " (when absent: hidden_size / num_attention_heads); RoPE rotates pairs of dimensions, so "
                         "it must be even, in [2, " + std::to_string(kMaxRopeDim) + "]");
  if (c.partial_rotary_factor != 1.0) {
    const int dim = c.rope_dim();
    if (dim < 2 || dim % 2)
      fail("partial_rotary_factor", "is " + json_excerpt(c.partial_rotary_factor) + ", which turns " +
                                        std::to_string(dim) + " of head_dim = " + std::to_string(c.head_dim) +
                                        " dimensions; RoPE rotates pairs, so head_dim * partial_rotary_factor "
                                        "must be an even number of at least 2");
  }
  if (c.num_attention_heads % c.num_key_value_heads)
    fail("num_key_value_heads", "is " + std::to_string(c.num_key_value_heads) +
                                    ", which must divide num_attention_heads (" +
                                    std::to_string(c.num_attention_heads) + ")");
}

// A config.json's token ids: one as a number, several as a list.
json token_ids(const std::vector<std::int64_t>& ids) { return ids.size() == 1 ? json(ids.front()) : json(ids); }

}  // namespace

int ModelConfig::rope_dim() const {
  if (attention() == AttentionKind::mla) return qk_rope_head_dim;
  // transformers: int(head_dim * partial_rotary_factor), the same double product truncated.
  return static_cast<int>(head_dim * partial_rotary_factor);
}

std::uint64_t ModelConfig::kv_cache_bytes_per_token_per_layer(int element_bytes) const {
  // MLA caches the compressed latent and the shared rope key; GQA caches K and V per KV head.
  const std::uint64_t elements = attention() == AttentionKind::mla
                                     ? static_cast<std::uint64_t>(kv_lora_rank + qk_rope_head_dim)
                                     : 2ULL * static_cast<std::uint64_t>(num_key_value_heads) * head_dim;
  return elements * static_cast<std::uint64_t>(element_bytes);
}

void validate_model_config(const ModelConfig& c) {
  const auto fail = [&](const std::string& key, const std::string& what) { fail_field(c.source, key, what); };
  validate_attention(c);
  c.family->validate(c);
  std::int64_t layer_experts = 0;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer)
    if (c.is_moe_layer(layer)) layer_experts += c.n_routed_experts;
  if (layer_experts > kMaxLayerExperts)
    fail(c.family->routed_experts_field,
         "gives " + std::to_string(layer_experts) + " routed experts over the MoE layers, more than " +
             std::to_string(kMaxLayerExperts) + " (" + std::to_string(c.n_routed_experts) +
             " experts in each of the MoE layers among num_hidden_layers = " + std::to_string(c.num_hidden_layers) +
             ")");
  if (c.tie_word_embeddings)
    fail("tie_word_embeddings", "is true, which is not supported yet: lm_head.weight must be a tensor of its own");
}

ModelConfig parse_model_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source + ": expected a JSON object", kExitBadContent);
  const ConfigFields f(j, source);
  ModelConfig c;
  c.source = source;
  c.model_type = f.string_or("model_type", "");
  c.family = find_model_family(c.model_type);
  if (c.model_type.empty()) f.fail("model_type", "is missing");
  const std::vector<std::string> families = model_family_names();
  if (!c.family)
    f.fail("model_type", "is '" + c.model_type + "', which is not supported; supported: " + join(families, ", "));
  parse_fields(f, c);

  c.rope_theta = f.number_or("rope_theta", 10000.0, kRopeTheta);
  if (f.has("rope_parameters")) {
    // transformers v5 keeps rope_theta among the rope parameters.
    const json& params = f.at("rope_parameters");
    if (!params.is_object()) f.fail("rope_parameters", "must be an object");
    c.rope_theta = ConfigFields(params, source + ": rope_parameters").number_or("rope_theta", c.rope_theta, kRopeTheta);
    c.rope_scaling = parse_rope(params, source, "rope_parameters", c.max_position_embeddings);
  } else if (f.has("rope_scaling")) {
    c.rope_scaling = parse_rope(f.at("rope_scaling"), source, "rope_scaling", c.max_position_embeddings);
  }
  validate_model_config(c);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  const std::string text = read_input_file(path, "config.json", kMaxConfigJsonBytes);
  const json j = parse_json<json>(text, path.string());
  return parse_model_config(j, path.string());
}

json model_config_to_json(const ModelConfig& c) {
  json j;
  j["architectures"] = json::array({c.family->causal_lm_class});
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["torch_dtype"] = c.torch_dtype;
  // Fields transformers' config classes define with these values as defaults for every family
  // here; written out so that readers other than transformers need not know the defaults.
  j["hidden_act"] = "silu";
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  const SpecialTokens& tokens = c.family->tokens;
  bool in_vocabulary = !tokens.eos.empty();  // tiny presets' vocabularies may be too small
  for (const std::int64_t id : tokens.eos) in_vocabulary = in_vocabulary && id < c.vocab_size;
  if (tokens.bos) in_vocabulary = in_vocabulary && *tokens.bos < c.vocab_size;
  if (tokens.pad) in_vocabulary = in_vocabulary && *tokens.pad < c.vocab_size;
  if (in_vocabulary) {
    if (tokens.bos) j["bos_token_id"] = *tokens.bos;
    j["eos_token_id"] = token_ids(tokens.eos);
    if (tokens.pad) j["pad_token_id"] = *tokens.pad;
  }
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["norm_topk_prob"] = c.norm_topk_prob;
  c.family->write(c, j);
  if (c.rope_scaling) {
    const RopeScaling& r = *c.rope_scaling;
    j["rope_scaling"] = {{"type", r.type},
                         {"rope_type", r.type},
                         {"factor", r.factor},
                         {"original_max_position_embeddings", r.original_max_position_embeddings},
                         {"beta_fast", r.beta_fast},
                         {"beta_slow", r.beta_slow},
                         {"mscale", r.mscale},
                         {"mscale_all_dim", r.mscale_all_dim}};
  }
  return j;
}

}  // namespace switchyard
