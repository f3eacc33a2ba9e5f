#include "core/gguf_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/config_fields.h"
#include "core/error.h"
#include "core/gguf_keys.h"
#include "core/text.h"

namespace switchyard {
namespace {

using nlohmann::json;

// "model.layers.12.rest" -> (12, "rest").
std::optional<std::pair<int, std::string_view>> layer_and_rest(std::string_view name) {
  constexpr std::string_view prefix = "model.layers.";
  if (!starts_with(name, prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  int layer = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc() || end == name.data() + name.size() || *end != '.') return std::nullopt;
  return std::make_pair(layer, name.substr(static_cast<std::size_t>(end - name.data()) + 1));
}

// "weight" or "bias" after `stem.`; empty otherwise.
std::string_view suffix_after(std::string_view rest, std::string_view stem) {
  if (!starts_with(rest, stem) || rest.size() <= stem.size() || rest[stem.size()] != '.') return {};
  const std::string_view suffix = rest.substr(stem.size() + 1);
  return suffix == "weight" || suffix == "bias" ? suffix : std::string_view{};
}

// The attention projections and norms every family names the same way in llama.cpp.
struct NamePair {
  const char* checkpoint;
  const char* gguf;
};
constexpr NamePair kAttention[] = {
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"self_attn.q_a_proj", "attn_q_a"},
    {"self_attn.q_a_layernorm", "attn_q_a_norm"},
    {"self_attn.q_b_proj", "attn_q_b"},
    {"self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"},
    {"self_attn.kv_a_layernorm", "attn_kv_a_norm"},
    {"self_attn.kv_b_proj", "attn_kv_b"},
    {"input_layernorm", "attn_norm"},
};

std::string blk(int layer, std::string_view stem, std::string_view suffix) {
  return "blk." + std::to_string(layer) + "." + std::string(stem) + "." + std::string(suffix);
}

std::optional<GgufLocation> layer_location(const ModelConfig& c, int layer, std::string_view rest) {
  const ModelFamily& family = *c.family;
  using Transform = GgufLocation::Transform;
  for (const NamePair& pair : kAttention) {
    const std::string_view suffix = suffix_after(rest, pair.checkpoint);
    if (suffix.empty()) continue;
    GgufLocation location{blk(layer, pair.gguf, suffix)};
    const std::string_view stem = pair.checkpoint;
    if (family.gguf.interleaved_rope_rows && suffix == "weight" && (stem == "self_attn.q_proj" || stem == "self_attn.k_proj"))
      location.transform = Transform::interleaved_rope_rows;
    if (stem == "self_attn.kv_b_proj") location.transform = Transform::kv_b_from_split;
    return location;
  }
  if (const std::string_view suffix = suffix_after(rest, "post_attention_layernorm"); !suffix.empty())
    return GgufLocation{blk(layer, family.gguf.post_attention_norm, suffix)};

  const std::string ff = family.feed_forward_child;
  if (!starts_with(rest, ff + ".")) return std::nullopt;
  rest.remove_prefix(ff.size() + 1);
  const ProjectionNames& p = family.expert_projections;
  const NamePair projections[] = {{p.gate, "gate"}, {p.up, "up"}, {p.down, "down"}};
  // Dense MLP: mlp.gate_proj.weight -> ffn_gate.weight.
  for (const NamePair& pair : {NamePair{"gate_proj", "ffn_gate"}, NamePair{"up_proj", "ffn_up"}, NamePair{"down_proj", "ffn_down"}})
    if (suffix_after(rest, pair.checkpoint) == "weight") return GgufLocation{blk(layer, pair.gguf, "weight")};
  if (suffix_after(rest, "gate") == "weight") return GgufLocation{blk(layer, "ffn_gate_inp", "weight")};
  if (rest == "gate.e_score_correction_bias") return GgufLocation{blk(layer, "exp_probs_b", "bias")};
  for (const NamePair& pair : {NamePair{"gate_proj", "ffn_gate_shexp"}, NamePair{"up_proj", "ffn_up_shexp"},
                               NamePair{"down_proj", "ffn_down_shexp"}})
    if (suffix_after(rest, std::string("shared_experts.") + pair.checkpoint) == "weight")
      return GgufLocation{blk(layer, pair.gguf, "weight")};
  // Routed experts: experts.E.<projection>.weight -> ffn_<gate|up|down>_exps.weight, slice E.
  constexpr std::string_view experts = "experts.";
  if (!starts_with(rest, experts)) return std::nullopt;
  rest.remove_prefix(experts.size());
  int expert = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), expert);
  if (ec != std::errc() || end == rest.data() + rest.size() || *end != '.' || expert < 0) return std::nullopt;
  rest.remove_prefix(static_cast<std::size_t>(end - rest.data()) + 1);
  for (const NamePair& pair : projections)
    if (suffix_after(rest, pair.checkpoint) == "weight")
      return GgufLocation{blk(layer, std::string("ffn_") + pair.gguf + "_exps", "weight"), expert};
  return std::nullopt;
}

// llama.cpp's rope scaling types by name; Switchyard runs YaRN (model_config.h).
void read_rope_scaling(const GgufKeys& keys, json& config) {
  const std::optional<std::string> type = keys.string("rope.scaling.type");
  if (!type || *type == "none") return;
  if (*type != "yarn")
    keys.fail("rope.scaling.type", "is " + quoted_excerpt(*type) + ", not a scaling Switchyard runs; valid: 'none', 'yarn'");
  json scaling = {{"type", *type},
                  {"factor", keys.number("rope.scaling.factor")},
                  {"original_max_position_embeddings", keys.integer("rope.scaling.original_context_length")},
                  {"beta_fast", keys.number_or("rope.scaling.yarn_beta_fast", 32.0)},
                  {"beta_slow", keys.number_or("rope.scaling.yarn_beta_slow", 1.0)}};
  config["rope_scaling"] = scaling;
}

}  // namespace

std::string gguf_k_b_name(int layer) { return blk(layer, "attn_k_b", "weight"); }
std::string gguf_v_b_name(int layer) { return blk(layer, "attn_v_b", "weight"); }

std::vector<std::int64_t> gguf_stored_shape(const ModelConfig& config, const GgufLocation& location,
                                            const std::vector<std::int64_t>& shape) {
  if (location.expert < 0) return shape;
  std::vector<std::int64_t> fused{config.n_routed_experts};
  fused.insert(fused.end(), shape.begin(), shape.end());
  return fused;
}

std::vector<std::int64_t> gguf_k_b_shape(const ModelConfig& c) {
  return {c.num_attention_heads, c.kv_lora_rank, c.qk_nope_head_dim};
}
std::vector<std::int64_t> gguf_v_b_shape(const ModelConfig& c) { return {c.num_attention_heads, c.v_head_dim, c.kv_lora_rank}; }

std::string gguf_shape_origin(const ModelConfig& config, const GgufLocation& location) {
  if (location.expert < 0) return "";
  return " (" + std::to_string(config.n_routed_experts) + " experts: " + config.family->gguf.architecture + ".expert_count)";
}

std::optional<GgufLocation> gguf_location(const ModelConfig& config, std::string_view name) {
  if (name == "model.embed_tokens.weight") return GgufLocation{"token_embd.weight"};
  if (name == "model.norm.weight") return GgufLocation{"output_norm.weight"};
  if (name == "lm_head.weight") return GgufLocation{"output.weight"};
  const auto layer = layer_and_rest(name);
  if (!layer) return std::nullopt;
  return layer_location(config, layer->first, layer->second);
}

ModelConfig gguf_model_config(const json& metadata, const GgufTensorFacts& facts, const std::string& source) {
  const auto arch_it = metadata.find("general.architecture");
  if (arch_it == metadata.end())
    throw InputError(source + ": GGUF key general.architecture is missing", kExitBadContent);
  if (!arch_it->is_string())
    throw InputError(source + ": GGUF key general.architecture is " + gguf_value_text(*arch_it) + ", but a string is expected",
                     kExitBadContent);
  const std::string architecture = arch_it->get<std::string>();
  const ModelFamily* family = find_gguf_family(architecture);
  if (!family) {
    std::vector<std::string> known;
    for (const ModelFamily* f : model_families())
      if (!f->gguf.architecture.empty() && std::find(known.begin(), known.end(), f->gguf.architecture) == known.end())
        known.push_back(f->gguf.architecture);
    throw InputError(source + ": GGUF architecture " + quoted_excerpt(architecture) + " is not one Switchyard runs (" +
                         join(known, ", ") + ")",
                     kExitBadContent);
  }
  json keys = json::object();
  const std::string prefix = architecture + ".";
  for (const auto& [key, value] : metadata.items())
    if (starts_with(key, prefix)) keys[key.substr(prefix.size())] = value;
  const GgufKeys k(keys, architecture, source, facts.has_tensor);

  json config = json::object();
  // block_count counts the MTP layers too: the decoder has block_count - nextn_predict_layers.
  const std::int64_t blocks = k.integer("block_count", 1, 2 * kMaxLayers);
  const std::int64_t nextn = k.integer_or("nextn_predict_layers", 0, 0, blocks - 1);
  config["num_hidden_layers"] = blocks - nextn;
  if (nextn > 0) config["num_nextn_predict_layers"] = nextn;
  config["hidden_size"] = k.integer("embedding_length", 1, kMaxWidth);
  config["intermediate_size"] = k.integer_or("feed_forward_length", 0, 0, kMaxWidth);
  const std::int64_t heads = k.integer("attention.head_count", 1, kMaxWidth);
  config["num_attention_heads"] = heads;
  config["num_key_value_heads"] = k.integer_or("attention.head_count_kv", heads, 1, heads);
  config["max_position_embeddings"] = k.integer_or("context_length", 4096, 1, std::int64_t{1} << 32);
  config["rms_norm_eps"] = k.number("attention.layer_norm_rms_epsilon");
  config["rope_theta"] = k.number_or("rope.freq_base", 10000.0);
  if (k.has("expert_used_count")) config["num_experts_per_tok"] = k.integer("expert_used_count", 1, kMaxExperts);
  if (k.has("vocab_size")) config["vocab_size"] = k.integer("vocab_size", 1, kMaxVocab);
  else if (facts.token_count) config["vocab_size"] = *facts.token_count;
  else if (facts.embedding_rows) config["vocab_size"] = *facts.embedding_rows;
  else throw InputError(source + ": the GGUF file says nothing of its vocabulary (no " + prefix +
                        "vocab_size, tokenizer.ggml.tokens or token_embd.weight)", kExitBadContent);
  if (!facts.has_output)
    throw InputError(source + ": the GGUF file has no output.weight (the head is tied to token_embd); "
                              "Switchyard runs untied heads only", kExitBadContent);
  config["tie_word_embeddings"] = false;
  // The activations' dtype, which sets the KV cache's default: f32 for an all-f32 file, bf16 (as
  // llama.cpp's f16 cache is 16-bit) for any other.
  config["torch_dtype"] = facts.embedding_f32 ? "float32" : "bfloat16";
  read_rope_scaling(k, config);
  family->gguf.read(k, config);
  return parse_model_config(config, source);
}

json gguf_metadata(const ModelConfig& c) {
  const GgufSpec& spec = c.family->gguf;
  if (spec.architecture.empty() || !spec.write)
    throw InputError(c.model_type + " has no GGUF form in Switchyard");
  json keys = json::object();
  keys["context_length"] = c.max_position_embeddings;
  keys["embedding_length"] = c.hidden_size;
  keys["block_count"] = c.num_hidden_layers;
  keys["feed_forward_length"] = c.intermediate_size;
  keys["attention.head_count"] = c.num_attention_heads;
  keys["attention.head_count_kv"] = c.num_key_value_heads;
  keys["attention.layer_norm_rms_epsilon"] = c.rms_norm_eps;
  keys["rope.freq_base"] = c.rope_theta;
  keys["vocab_size"] = c.vocab_size;
  if (c.n_routed_experts > 0) {
    keys["expert_count"] = c.n_routed_experts;
    keys["expert_used_count"] = c.num_experts_per_tok;
  }
  if (c.rope_scaling) {
    keys["rope.scaling.type"] = c.rope_scaling->type;
    keys["rope.scaling.factor"] = c.rope_scaling->factor;
    keys["rope.scaling.original_context_length"] = c.rope_scaling->original_max_position_embeddings;
    keys["rope.scaling.yarn_beta_fast"] = c.rope_scaling->beta_fast;
    keys["rope.scaling.yarn_beta_slow"] = c.rope_scaling->beta_slow;
  }
  spec.write(c, keys);
  json metadata = json::object();
  metadata["general.architecture"] = spec.architecture;
  metadata["general.name"] = c.source;
  for (const auto& [key, value] : keys.items()) metadata[spec.architecture + "." + key] = value;
  return metadata;
}

DType gguf_storage_type(DType wanted, std::int64_t row_elements) {
  const auto fits = [row_elements](DType t) { return row_elements % dtype_info(t).block_elements == 0; };
  if (fits(wanted)) return wanted;
  DType fallback = DType::f32;
  switch (wanted) {
    case DType::q2_k:
    case DType::q3_k: fallback = DType::q4_0; break;
    case DType::q4_k: fallback = DType::q5_0; break;
    case DType::q5_k: fallback = DType::q5_1; break;
    case DType::q6_k: fallback = DType::q8_0; break;
    case DType::iq4_xs: fallback = DType::iq4_nl; break;
    default: break;
  }
  return fits(fallback) ? fallback : DType::f32;
}

}  // namespace switchyard
