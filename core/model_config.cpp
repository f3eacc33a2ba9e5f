#include "core/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"
#include "core/input_file.h"

namespace switchyard {
namespace {

using nlohmann::json;

// Limits far above any real model, so a hostile config.json cannot make us build a huge tree.
constexpr std::int64_t kMaxWidth = 1 << 22;
constexpr std::int64_t kMaxVocab = 1 << 24;
constexpr int kMaxLayers = 1024;
constexpr int kMaxExperts = 4096;
// Routed experts over all MoE layers: 15 k for DeepSeek-V3, 23 k for Kimi-K2's 61 x 384. The
// module tree holds four modules an expert; past this it would take seconds and gigabytes to
// build before anything else is checked.
constexpr std::int64_t kMaxLayerExperts = 1 << 18;
// The RoPE kernels (CPU and CUDA) rotate at most this many dimensions of a head.
constexpr int kMaxRopeDim = 1024;

// A closed or half-open interval of a floating-point field; its text is part of the error.
struct NumberRange {
  double low;
  double high;
  bool low_inclusive;
  bool contains(double v) const { return std::isfinite(v) && (low_inclusive ? v >= low : v > low) && v <= high; }
  std::string text() const {
    char out[64];
    std::snprintf(out, sizeof out, "%c%g, %g]", low_inclusive ? '[' : '(', low, high);
    return out;
  }
};

// Ranges far wider than any released model's values, narrow enough that none of them makes the
// engine compute NaN or infinity (an eps of 0 divides a zero row by zero; a theta of 1 takes the
// log of 1 as a divisor in YaRN; a scaling factor of 0 gives 1/0 frequencies).
constexpr NumberRange kRmsNormEps{1e-30, 1.0, true};  // stays a normal number as f32
constexpr NumberRange kRopeTheta{1.0, 1e12, false};
constexpr NumberRange kRoutedScalingFactor{0.0, 1000.0, false};
constexpr NumberRange kYarnFactor{1.0, 1e6, true};
constexpr NumberRange kYarnBeta{0.0, 1e4, false};
constexpr NumberRange kYarnMscale{0.0, 1000.0, true};

[[noreturn]] void fail_field(const std::string& source, const std::string& key, const std::string& what) {
  throw InputError(source + ": field '" + key + "' " + what, kExitBadContent);
}

class Fields {
 public:
  Fields(const json& object, std::string source) : object_(object), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const { fail_field(source_, key, what); }
  bool has(const std::string& key) const { return object_.contains(key) && !object_.at(key).is_null(); }
  const json& at(const std::string& key) const { return object_.at(key); }

  std::int64_t integer(const std::string& key, std::int64_t low, std::int64_t high) const {
    if (!has(key)) fail(key, "is missing");
    const json& value = at(key);
    if (!value.is_number_integer()) fail(key, "must be an integer, got " + json_excerpt(value));
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(high))
      fail(key, "is " + json_excerpt(value) + ", outside [" + std::to_string(low) + ", " + std::to_string(high) + "]");
    const std::int64_t v = value.get<std::int64_t>();
    if (v < low || v > high)
      fail(key, "is " + std::to_string(v) + ", outside [" + std::to_string(low) + ", " + std::to_string(high) + "]");
    return v;
  }
  std::int64_t integer_or(const std::string& key, std::int64_t fallback, std::int64_t low, std::int64_t high) const {
    return has(key) ? integer(key, low, high) : fallback;
  }
  // A JSON number (integer or not) in `range`, or `fallback` when the field is absent or null.
  double number_or(const std::string& key, double fallback, const NumberRange& range) const {
    if (!has(key)) return fallback;
    if (!at(key).is_number()) fail(key, "must be a number, got " + json_excerpt(at(key)));
    const double v = at(key).get<double>();
    if (!range.contains(v)) fail(key, "is " + json_excerpt(at(key)) + ", outside " + range.text());
    return v;
  }
  bool boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_boolean()) fail(key, "must be true or false, got " + json_excerpt(at(key)));
    return at(key).get<bool>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_string()) fail(key, "must be a string, got " + json_excerpt(at(key)));
    return at(key).get<std::string>();
  }

 private:
  const json& object_;
  std::string source_;
};

// The rope scaling object of config.json (`key`: rope_scaling, or transformers v5's rope_parameters).
// Only YaRN changes the frequencies here; any other scaling type is refused, since the attention
// operators implement none other.
std::optional<RopeScaling> parse_rope(const json& rope, const std::string& source, const std::string& key,
                                      std::int64_t max_position_embeddings) {
  if (rope.is_null()) return std::nullopt;
  if (!rope.is_object()) fail_field(source, key, "must be an object");
  const Fields f(rope, source + ": " + key);
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

void parse_attention(const Fields& f, ModelConfig& c) {
  c.num_attention_heads = static_cast<int>(f.integer("num_attention_heads", 1, 4096));
  c.num_key_value_heads =
      static_cast<int>(f.integer_or("num_key_value_heads", c.num_attention_heads, 1, c.num_attention_heads));
  c.attention_bias = f.boolean_or("attention_bias", false);
  if (c.is_deepseek()) {
    if (f.has("q_lora_rank")) c.q_lora_rank = f.integer("q_lora_rank", 1, kMaxWidth);
    c.kv_lora_rank = f.integer("kv_lora_rank", 1, kMaxWidth);
    c.qk_nope_head_dim = static_cast<int>(f.integer("qk_nope_head_dim", 1, 4096));
    c.qk_rope_head_dim = static_cast<int>(f.integer("qk_rope_head_dim", 2, kMaxRopeDim));
    c.v_head_dim = static_cast<int>(f.integer("v_head_dim", 1, 4096));
  } else if (f.has("head_dim")) {
    c.head_dim = static_cast<int>(f.integer("head_dim", 2, kMaxRopeDim));
  } else {
    // transformers' default; validate_model_config checks the result like a given head_dim.
    if (c.hidden_size % c.num_attention_heads)
      f.fail("head_dim", "is absent, and its default hidden_size / num_attention_heads = " +
                             std::to_string(c.hidden_size) + " / " + std::to_string(c.num_attention_heads) +
                             " is not a whole number; give head_dim, or a hidden_size that num_attention_heads divides");
    c.head_dim = static_cast<int>(c.hidden_size / c.num_attention_heads);
  }
}

// The layer numbers of Qwen3-MoE's mlp_only_layers, each an integer in [0, num_hidden_layers).
std::vector<int> parse_layer_list(const Fields& f, const std::string& key, int num_layers) {
  const json& layers = f.at(key);
  if (!layers.is_array()) f.fail(key, "must be a list of layer numbers");
  std::vector<int> out;
  for (const json& layer : layers) {
    if (!layer.is_number_integer()) f.fail(key, "must hold integers, got " + json_excerpt(layer));
    // JSON keeps non-negative integers unsigned, and they may pass int64's range.
    const bool in_range = layer.is_number_unsigned()
                              ? layer.get<std::uint64_t>() < static_cast<std::uint64_t>(num_layers)
                              : layer.get<std::int64_t>() >= 0 && layer.get<std::int64_t>() < num_layers;
    if (!in_range)
      f.fail(key, "holds " + json_excerpt(layer) + "; layer numbers are in [0, num_hidden_layers = " +
                      std::to_string(num_layers) + ")");
    out.push_back(static_cast<int>(layer.get<std::int64_t>()));
  }
  return out;
}

void parse_moe(const Fields& f, ModelConfig& c) {
  switch (c.arch) {
    case Architecture::deepseek_v3:
    case Architecture::deepseek_v2:
      c.n_routed_experts = static_cast<int>(f.integer("n_routed_experts", 1, kMaxExperts));
      c.n_shared_experts = static_cast<int>(f.integer_or("n_shared_experts", 0, 0, kMaxExperts));
      c.moe_intermediate_size = f.integer("moe_intermediate_size", 1, kMaxWidth);
      c.first_k_dense_replace = static_cast<int>(f.integer_or("first_k_dense_replace", 0, 0, kMaxLayers));
      c.moe_layer_freq = static_cast<int>(f.integer_or("moe_layer_freq", 1, 1, kMaxLayers));
      c.n_group = static_cast<int>(f.integer_or("n_group", 1, 1, kMaxExperts));
      c.topk_group = static_cast<int>(f.integer_or("topk_group", 1, 1, c.n_group));
      c.topk_method = f.string_or("topk_method", c.arch == Architecture::deepseek_v3 ? "noaux_tc" : "greedy");
      c.scoring_func = f.string_or("scoring_func", c.arch == Architecture::deepseek_v3 ? "sigmoid" : "softmax");
      c.routed_scaling_factor = f.number_or("routed_scaling_factor", 1.0, kRoutedScalingFactor);
      c.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
      c.num_nextn_predict_layers = static_cast<int>(f.integer_or("num_nextn_predict_layers", 0, 0, 16));
      break;
    case Architecture::qwen3_moe:
      // Qwen's releases say num_experts; transformers >= 5 saves it as num_local_experts.
      c.n_routed_experts = static_cast<int>(
          f.integer(f.has("num_experts") || !f.has("num_local_experts") ? "num_experts" : "num_local_experts", 1, kMaxExperts));
      c.moe_intermediate_size = f.integer("moe_intermediate_size", 1, kMaxWidth);
      c.decoder_sparse_step = static_cast<int>(f.integer_or("decoder_sparse_step", 1, 1, kMaxLayers));
      c.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
      if (f.has("mlp_only_layers")) c.mlp_only_layers = parse_layer_list(f, "mlp_only_layers", c.num_hidden_layers);
      break;
    case Architecture::mixtral:
      c.n_routed_experts = static_cast<int>(f.integer("num_local_experts", 1, kMaxExperts));
      c.moe_intermediate_size = c.intermediate_size;
      c.norm_topk_prob = true;  // Mixtral renormalises its top-k softmax weights
      break;
  }
  c.num_experts_per_tok = static_cast<int>(f.integer("num_experts_per_tok", 1, c.n_routed_experts));
}

// DeepSeek's routing as the MoE gate runs it (operators/cpu/moe_gate.h): V3 scores with a sigmoid
// and always routes within groups (noaux_tc, a group scored by its two best experts); V2 scores
// with a softmax, greedily or within groups (group_limited_greedy, a group scored by its best).
void validate_deepseek_routing(const ModelConfig& c) {
  const auto fail = [&](const std::string& key, const std::string& what) { fail_field(c.source, key, what); };
  const bool v3 = c.arch == Architecture::deepseek_v3;
  const char* scoring = v3 ? "sigmoid" : "softmax";
  if (c.scoring_func != scoring)
    fail("scoring_func", "is '" + c.scoring_func + "', but " + c.model_type + " routes with " + scoring +
                             " scores, the only scoring this engine implements for it");
  if (v3 && c.topk_method != "noaux_tc")
    fail("topk_method", "is '" + c.topk_method + "', but deepseek_v3 routes with noaux_tc only");
  if (!v3 && c.topk_method != "greedy" && c.topk_method != "group_limited_greedy")
    fail("topk_method", "is '" + c.topk_method + "'; deepseek_v2 routes with greedy or group_limited_greedy");
  if (!v3 && c.topk_method != "group_limited_greedy") return;  // greedy: n_group and topk_group unused
  if (c.n_routed_experts % c.n_group)
    fail("n_group", "is " + std::to_string(c.n_group) + ", which must divide n_routed_experts (" +
                        std::to_string(c.n_routed_experts) + ") into equal groups");
  const int per_group = c.n_routed_experts / c.n_group;
  if (v3 && per_group < 2)
    fail("n_group", "is " + std::to_string(c.n_group) + ": groups of " + std::to_string(per_group) +
                        " expert, but noaux_tc scores a group by its two best experts; n_group must be at most "
                        "n_routed_experts / 2 = " + std::to_string(c.n_routed_experts / 2));
  if (static_cast<std::int64_t>(c.topk_group) * per_group < c.num_experts_per_tok) {
    const int needed = (c.num_experts_per_tok + per_group - 1) / per_group;
    fail("topk_group", "is " + std::to_string(c.topk_group) + ": the kept groups of " + std::to_string(per_group) +
                           " experts each hold fewer than num_experts_per_tok = " +
                           std::to_string(c.num_experts_per_tok) + " experts; topk_group must be at least " +
                           std::to_string(needed));
  }
}

// Beginning- and end-of-text token ids of each family's released tokenizer.
struct SpecialTokens {
  std::int64_t bos;
  std::int64_t eos;
};
SpecialTokens release_special_tokens(Architecture arch) {
  switch (arch) {
    case Architecture::deepseek_v3: return {0, 1};
    case Architecture::deepseek_v2: return {100000, 100001};
    case Architecture::qwen3_moe: return {151643, 151645};
    case Architecture::mixtral: return {1, 2};
  }
  return {0, 1};
}

// transformers' class for AutoModelForCausalLM, listed under "architectures" in config.json.
const char* architecture_causal_lm_class(Architecture arch) {
  switch (arch) {
    case Architecture::deepseek_v3: return "DeepseekV3ForCausalLM";
    case Architecture::deepseek_v2: return "DeepseekV2ForCausalLM";
    case Architecture::qwen3_moe: return "Qwen3MoeForCausalLM";
    case Architecture::mixtral: return "MixtralForCausalLM";
  }
  return "?";
}

}  // namespace

const char* architecture_model_type(Architecture arch) {
  switch (arch) {
    case Architecture::deepseek_v3: return "deepseek_v3";
    case Architecture::deepseek_v2: return "deepseek_v2";
    case Architecture::qwen3_moe: return "qwen3_moe";
    case Architecture::mixtral: return "mixtral";
  }
  return "?";
}

bool ModelConfig::is_moe_layer(int layer) const {
  switch (arch) {
    case Architecture::deepseek_v3:
    case Architecture::deepseek_v2:
      return layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
    case Architecture::qwen3_moe:
      return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end() &&
             (layer + 1) % decoder_sparse_step == 0;
    case Architecture::mixtral: return true;
  }
  return true;
}

std::uint64_t ModelConfig::kv_cache_bytes_per_token_per_layer(int element_bytes) const {
  // MLA caches the compressed latent and the shared rope key; GQA caches K and V per KV head.
  const std::uint64_t elements = is_deepseek()
                                     ? static_cast<std::uint64_t>(kv_lora_rank + qk_rope_head_dim)
                                     : 2ULL * static_cast<std::uint64_t>(num_key_value_heads) * head_dim;
  return elements * static_cast<std::uint64_t>(element_bytes);
}

void validate_model_config(const ModelConfig& c) {
  const auto fail = [&](const std::string& key, const std::string& what) { fail_field(c.source, key, what); };
  if (c.is_deepseek()) {
    if (c.qk_rope_head_dim < 2 || c.qk_rope_head_dim > kMaxRopeDim || c.qk_rope_head_dim % 2)
      fail("qk_rope_head_dim", "is " + std::to_string(c.qk_rope_head_dim) +
                                   "; RoPE rotates pairs of dimensions, so it must be even, in [2, " +
                                   std::to_string(kMaxRopeDim) + "]");
    validate_deepseek_routing(c);
  } else {
    // RoPE rotates the whole head (half-split pairs).
    if (c.head_dim < 2 || c.head_dim > kMaxRopeDim || c.head_dim % 2)
      fail("head_dim", "is " + std::to_string(c.head_dim) +
                           " (when absent: hidden_size / num_attention_heads); RoPE rotates pairs of dimensions, so "
                           "it must be even, in [2, " + std::to_string(kMaxRopeDim) + "]");
    if (c.num_attention_heads % c.num_key_value_heads)
      fail("num_key_value_heads", "is " + std::to_string(c.num_key_value_heads) +
                                      ", which must divide num_attention_heads (" +
                                      std::to_string(c.num_attention_heads) + ")");
  }
  for (const int layer : c.mlp_only_layers)
    if (layer < 0 || layer >= c.num_hidden_layers)
      fail("mlp_only_layers", "holds " + std::to_string(layer) + "; layer numbers are in [0, num_hidden_layers = " +
                                  std::to_string(c.num_hidden_layers) + ")");
  std::int64_t layer_experts = 0;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer)
    if (c.is_moe_layer(layer)) layer_experts += c.n_routed_experts;
  if (layer_experts > kMaxLayerExperts)
    fail(c.is_deepseek() ? "n_routed_experts" : c.arch == Architecture::mixtral ? "num_local_experts" : "num_experts", "gives " + std::to_string(layer_experts) + " routed experts over the MoE layers, more than " +
                                 std::to_string(kMaxLayerExperts) + " (" + std::to_string(c.n_routed_experts) +
                                 " experts in each of the MoE layers among num_hidden_layers = " +
                                 std::to_string(c.num_hidden_layers) + ")");
  if (c.tie_word_embeddings)
    fail("tie_word_embeddings", "is true, which is not supported yet: lm_head.weight must be a tensor of its own");
}

ModelConfig parse_model_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source + ": expected a JSON object", kExitBadContent);
  const Fields f(j, source);
  ModelConfig c;
  c.source = source;
  c.model_type = f.string_or("model_type", "");
  if (c.model_type == "deepseek_v3") c.arch = Architecture::deepseek_v3;
  else if (c.model_type == "deepseek_v2") c.arch = Architecture::deepseek_v2;
  else if (c.model_type == "qwen3_moe") c.arch = Architecture::qwen3_moe;
  else if (c.model_type == "mixtral") c.arch = Architecture::mixtral;
  else if (c.model_type.empty()) f.fail("model_type", "is missing");
  else f.fail("model_type", "is '" + c.model_type + "', which is not supported; supported: deepseek_v3, deepseek_v2, qwen3_moe, mixtral");

  c.vocab_size = f.integer("vocab_size", 1, kMaxVocab);
  c.hidden_size = f.integer("hidden_size", 1, kMaxWidth);
  c.intermediate_size = f.integer("intermediate_size", 1, kMaxWidth);
  c.num_hidden_layers = static_cast<int>(f.integer("num_hidden_layers", 1, kMaxLayers));
  c.max_position_embeddings = f.integer_or("max_position_embeddings", 4096, 1, 1LL << 32);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6, kRmsNormEps);
  c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
  c.torch_dtype = f.string_or("torch_dtype", f.string_or("dtype", "bfloat16"));
  parse_attention(f, c);
  parse_moe(f, c);

  c.rope_theta = f.number_or("rope_theta", 10000.0, kRopeTheta);
  if (f.has("rope_parameters")) {
    // transformers v5 keeps rope_theta among the rope parameters.
    const json& params = f.at("rope_parameters");
    if (!params.is_object()) f.fail("rope_parameters", "must be an object");
    c.rope_theta = Fields(params, source + ": rope_parameters").number_or("rope_theta", c.rope_theta, kRopeTheta);
    c.rope_scaling = parse_rope(params, source, "rope_parameters", c.max_position_embeddings);
  } else if (f.has("rope_scaling")) {
    c.rope_scaling = parse_rope(f.at("rope_scaling"), source, "rope_scaling", c.max_position_embeddings);
  }
  validate_model_config(c);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  const std::string text = read_input_file(path, "config.json", kMaxConfigJsonBytes);
  check_json_nesting(text, path.string());
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number past a double's range
    // e.what(): "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    const std::string detail = e.what();
    const auto at = detail.find("] ");
    throw InputError(
        path.string() + ": not valid JSON (" + (at == std::string::npos ? detail : detail.substr(at + 2)) + ")",
        kExitBadContent);
  }
  return parse_model_config(j, path.string());
}

json model_config_to_json(const ModelConfig& c) {
  json j;
  j["architectures"] = json::array({architecture_causal_lm_class(c.arch)});
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
  // Fields transformers' config classes define with these values as defaults for all four
  // families; written out so that readers other than transformers need not know the defaults.
  j["hidden_act"] = "silu";
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  const SpecialTokens tokens = release_special_tokens(c.arch);
  if (tokens.bos < c.vocab_size && tokens.eos < c.vocab_size) {  // tiny presets' vocabularies may be too small
    j["bos_token_id"] = tokens.bos;
    j["eos_token_id"] = tokens.eos;
  }
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["norm_topk_prob"] = c.norm_topk_prob;
  if (c.is_deepseek()) {
    j["q_lora_rank"] = c.q_lora_rank ? json(*c.q_lora_rank) : json(nullptr);
    j["kv_lora_rank"] = c.kv_lora_rank;
    j["qk_nope_head_dim"] = c.qk_nope_head_dim;
    j["qk_rope_head_dim"] = c.qk_rope_head_dim;
    j["v_head_dim"] = c.v_head_dim;
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
  } else {
    j["head_dim"] = c.head_dim;
    if (c.arch == Architecture::qwen3_moe) {
      j["num_experts"] = c.n_routed_experts;
      j["moe_intermediate_size"] = c.moe_intermediate_size;
      j["decoder_sparse_step"] = c.decoder_sparse_step;
      j["mlp_only_layers"] = c.mlp_only_layers;
    } else {
      j["num_local_experts"] = c.n_routed_experts;
    }
  }
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
