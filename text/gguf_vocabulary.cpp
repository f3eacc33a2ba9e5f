#include "text/gguf_vocabulary.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <unordered_map>

#include "core/error.h"
#include "core/json_input.h"
#include "core/gguf.h"
#include "core/gguf_writer.h"
#include "core/input_file.h"
#include "core/text.h"
#include "text/tokenizer.h"

namespace switchyard::text {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw InputError(source + ": " + what, kExitBadContent);
}

// What a GGUF's tokenizer.ggml.pre name stands for: the tokenizer.json parts of a pre-tokenizer
// family, which the name implies (llama.cpp's converter picks the name by what the model's own
// tokenizer makes of a test text, so every name below means one split of the text). Each family
// is spelled as its models' tokenizer.json spells it, as `tokenizers` 0.23 reads them: DeepSeek-V3's,
// Qwen3's, Llama 3's and GPT-4o's files as published; Qwen3.5's, GLM-4's, Kimi-K2's and
// DeepSeek-LLM's (V2) split regexes as their files and tokenization_kimi.py have them, Kimi's
// class intersections ([...&&[^\p{Han}]]) written as PCRE2 lookaheads. The post-processor is the
// one without special tokens; add_bos_token adds them. tests/fixtures/tokenizers/pre_tokenizers.json
// holds what `tokenizers` makes of the test corpus with each family's own spelling.
using KnownPre = GgufPreTokenizer;

const std::array<KnownPre, 8>& known_pre_tokenizers() {
  static const std::array<KnownPre, 8> table = {{
      {"deepseek-v3", R"json({"type":"Sequence","normalizers":[]})json",
       R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json", false},
      {"qwen2", R"json({"type":"NFC"})json",
       R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]})json",
       R"json({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})json",
       R"json({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})json", false},
      {"qwen35", R"json({"type":"NFC"})json",
       R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]})json",
       R"json({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})json",
       R"json({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false})json", false},
      {"llama-bpe", R"json(null)json",
       R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json", true},
      {"glm4", R"json(null)json",
       R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json", false},
      {"gpt-4o", R"json(null)json",
       R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Removed","invert":true},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json",
       R"json(null)json", false},
      {"kimi-k2", R"json(null)json",
       R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])*(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])+(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json", false},
      {"deepseek-llm", R"json({"type":"Sequence","normalizers":[]})json",
       R"json({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"[\r\n]"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\ud801\udc00-\ud801\udc4f\ud801\udcb0-\ud801\udcd3\ud801\udcd8-\ud801\udcfb\ud803\udc80-\ud803\udcb2\ud803\udcc0-\ud803\udcf2\ud806\udca0-\ud806\udcdf\ud83a\udd00-\ud83a\udd43]+"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"\\s+$"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"},"behavior":"Isolated","invert":false},{"type":"Split","pattern":{"Regex":"\\p{N}+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true})json",
       R"json({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true})json", false},
  }};
  return table;
}

// Every tokenizer.ggml.pre name read, with its family's name in known_pre_tokenizers(): the
// family's own, and the names llama.cpp gives to other models that split text the same way.
struct PreName {
  const char* name;
  const char* family;
};
constexpr PreName kPreNames[] = {
    {"deepseek-v3", "deepseek-v3"}, {"joyai-llm", "deepseek-v3"},  {"hunyuan-dense", "deepseek-v3"},
    {"deepseek-llm", "deepseek-llm"}, {"qwen2", "qwen2"},           {"deepseek-r1-qwen", "qwen2"},
    {"qwen35", "qwen35"},             {"llama-bpe", "llama-bpe"},   {"llama3", "llama-bpe"},
    {"llama-v3", "llama-bpe"},        {"glm4", "glm4"},             {"chatglm-bpe", "glm4"},
    {"gpt-4o", "gpt-4o"},             {"minimax-m2", "gpt-4o"},     {"kimi-k2", "kimi-k2"},
};

const KnownPre* find_pre(std::string_view name) {
  for (const PreName& n : kPreNames)
    if (name == n.name)
      for (const KnownPre& k : known_pre_tokenizers())
        if (std::string_view(n.family) == k.family) return &k;
  return nullptr;
}

std::string known_names() {
  std::string names;
  for (const PreName& n : kPreNames) names += (names.empty() ? "" : ", ") + std::string(n.name);
  return names;
}

// An empty normalizer sequence and none are the same normalizer.
json canonical_normalizer(const json& n) {
  if (n.is_null()) return json::parse(R"({"type":"Sequence","normalizers":[]})");
  return n;
}

// A special token of tokenizer_config.json: "<s>", {"content": "<s>", ...}, or null.
std::optional<std::string> config_token(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

std::optional<GgufPreTokenizer> gguf_pre_tokenizer(std::string_view name) {
  if (const KnownPre* k = find_pre(name)) return *k;
  return std::nullopt;
}

std::vector<std::string> gguf_pre_tokenizer_names() {
  std::vector<std::string> names;
  for (const PreName& n : kPreNames) names.emplace_back(n.name);
  return names;
}

GgufVocabulary gguf_vocabulary_from_json(std::string_view tokenizer_json, std::string_view config_json,
                                         std::int64_t vocab_size, const std::string& source) {
  const json root = parse_json<json>(tokenizer_json, source);
  const json config = config_json.empty() ? json::object()
                                          : parse_json<json>(config_json, source);
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) bad(source, "not a tokenizer.json (no model)");
  if (!config.is_object()) bad(source, "tokenizer_config.json is not an object");
  const json& model = root["model"];
  if (model.value("type", std::string()) != "BPE") bad(source, "a GGUF holds byte-level BPE tokenizers only (model type BPE)");
  if (model.value("byte_fallback", false))
    bad(source, "model: byte_fallback has no GGUF spelling for a byte-level BPE (\"gpt2\") tokenizer");
  const bool ignore_merges = model.value("ignore_merges", false);

  GgufVocabulary v;
  const json normalizer = canonical_normalizer(root.value("normalizer", json()));
  const json pre = root.value("pre_tokenizer", json()), post = root.value("post_processor", json());
  for (const KnownPre& k : known_pre_tokenizers())
    if (normalizer == canonical_normalizer(json::parse(k.normalizer)) && pre == json::parse(k.pre_tokenizer) &&
        post == json::parse(k.post_processor) && ignore_merges == k.ignore_merges)
      v.pre = k.family;
  if (v.pre.empty())
    bad(source, "its normalizer, pre-tokenizer, post-processor and ignore_merges are not those of a pre-tokenizer a GGUF "
                "names (known: " + known_names() + ")");

  // Tokens by id: the vocabulary, then the added tokens (which may repeat vocabulary entries).
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  auto place = [&](std::int64_t id, const std::string& token, GgufTokenType type) {
    if (id < 0 || id >= vocab_size)
      bad(source, "token id " + std::to_string(id) + " does not fit the model's vocabulary of " + std::to_string(vocab_size));
    const auto i = static_cast<std::size_t>(id);
    if (tokens.size() <= i) {
      tokens.resize(i + 1);
      types.resize(i + 1, 0);
    }
    tokens[i] = token;
    types[i] = static_cast<std::int32_t>(type);
  };
  const json& vocab = model.value("vocab", json::object());
  if (!model.contains("vocab") || !vocab.is_object()) bad(source, "model: no vocab object");
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer()) bad(source, "model.vocab: the id of " + quoted_excerpt(token) + " is not an integer");
    place(id.get<std::int64_t>(), token, GgufTokenType::normal);
  }
  std::unordered_map<std::string, std::int32_t> id_of;
  for (const auto& entry : root.value("added_tokens", json::array())) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() || !entry.contains("content") ||
        !entry["content"].is_string())
      bad(source, "added_tokens: an entry needs an integer id and a content");
    const bool special = entry.value("special", false);
    place(entry["id"].get<std::int64_t>(), entry["content"].get<std::string>(),
          special ? GgufTokenType::control : GgufTokenType::user_defined);
  }
  tokens.resize(static_cast<std::size_t>(vocab_size));
  types.resize(static_cast<std::size_t>(vocab_size), 0);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == 0) {  // an id the tokenizer does not use (the embedding is wider)
      tokens[i] = "[PAD" + std::to_string(i) + "]";
      types[i] = static_cast<std::int32_t>(GgufTokenType::unused);
    }
    if (const auto [it, added_now] = id_of.emplace(tokens[i], static_cast<std::int32_t>(i)); !added_now)
      bad(source, "tokens " + std::to_string(it->second) + " and " + std::to_string(i) + " are both spelled " +
                      quoted_excerpt(tokens[i]) + "; a GGUF vocabulary names each spelling once");
  }
  v.tokens = std::move(tokens);
  v.token_types = std::move(types);

  const json& merges = model.value("merges", json::array());
  if (!merges.is_array()) bad(source, "model: merges is not a list");
  v.merges.reserve(merges.size());
  for (const auto& m : merges) {
    if (m.is_string()) v.merges.push_back(m.get<std::string>());
    else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
      v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    else bad(source, "model.merges: an entry is neither \"a b\" nor [\"a\", \"b\"]");
  }

  auto special_id = [&](const char* key) -> std::optional<std::int32_t> {
    const std::optional<std::string> token = config_token(config, key);
    if (!token) return std::nullopt;
    const auto it = id_of.find(*token);
    if (it == id_of.end()) bad(source, std::string("tokenizer_config.json: ") + key + " " + quoted_excerpt(*token) + " is not a token");
    return it->second;
  };
  v.bos = special_id("bos_token");
  v.eos = special_id("eos_token");
  v.pad = special_id("pad_token");
  auto flag = [&](const char* key) {
    const auto it = config.find(key);
    return it != config.end() && it->is_boolean() && it->get<bool>();
  };
  v.add_bos = flag("add_bos_token") && v.bos.has_value();
  v.add_eos = flag("add_eos_token") && v.eos.has_value();
  if (const auto t = config.find("chat_template"); t != config.end() && t->is_string()) v.chat_template = t->get<std::string>();
  return v;
}

GgufVocabulary gguf_vocabulary_from_files(const std::filesystem::path& tokenizer_json, const std::filesystem::path& config,
                                          std::int64_t vocab_size) {
  const std::string text = read_input_file(tokenizer_json, "tokenizer", kMaxTokenizerJsonBytes);
  const std::string config_text = config.empty() ? std::string() : read_input_file(config, "tokenizer_config.json", kMaxTokenizerJsonBytes);
  return gguf_vocabulary_from_json(text, config_text, vocab_size, tokenizer_json.string());
}

void write_gguf_vocabulary(const GgufVocabulary& v, GgufWriter& writer) {
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", v.pre);
  writer.set_strings("tokenizer.ggml.tokens", v.tokens);
  writer.set_i32s("tokenizer.ggml.token_type", v.token_types);
  writer.set_strings("tokenizer.ggml.merges", v.merges);
  if (v.bos) writer.set_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(*v.bos));
  if (v.eos) writer.set_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(*v.eos));
  if (v.pad) writer.set_u32("tokenizer.ggml.padding_token_id", static_cast<std::uint32_t>(*v.pad));
  writer.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  writer.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (!v.chat_template.empty()) writer.set_string("tokenizer.chat_template", v.chat_template);
}

bool gguf_has_vocabulary(const GgufFile& file) {
  const std::optional<std::string> model = file.string("tokenizer.ggml.model");
  return model && *model != "none" && file.find("tokenizer.ggml.tokens") != nullptr;
}

namespace {

std::string tokenizer_json_of(const GgufFile& file, const std::string& source) {
  auto key_error = [&](const std::string& key, const std::string& what) { bad(source, key + ": " + what); };
  const std::optional<std::string> model = file.string("tokenizer.ggml.model");
  if (!model || *model == "none") key_error("tokenizer.ggml.model", "the file carries no tokenizer");
  if (*model != "gpt2")
    key_error("tokenizer.ggml.model", quoted_excerpt(*model) + " is not supported ('gpt2': byte-level BPE)");
  const std::string pre_name = file.string("tokenizer.ggml.pre").value_or("default");
  const KnownPre* pre = find_pre(pre_name);
  if (pre == nullptr)
    key_error("tokenizer.ggml.pre",
              quoted_excerpt(pre_name) + " is not a pre-tokenizer this reads (known: " + known_names() +
                  "); name one that splits text as the model's tokenizer does with --override-kv "
                  "tokenizer.ggml.pre=str:NAME, or give the model's tokenizer.json with --tokenizer PATH");

  const GgufValue* tokens_value = file.find("tokenizer.ggml.tokens");
  if (tokens_value == nullptr) key_error("tokenizer.ggml.tokens", "missing");
  const std::vector<std::string_view> tokens = tokens_value->strings();
  if (tokens.empty() || tokens.size() > (std::size_t{1} << 24)) key_error("tokenizer.ggml.tokens", std::to_string(tokens.size()) + " tokens");
  std::vector<std::int64_t> types(tokens.size(), static_cast<std::int64_t>(GgufTokenType::normal));
  if (const GgufValue* t = file.find("tokenizer.ggml.token_type")) {
    types = t->ints();
    if (types.size() != tokens.size())
      key_error("tokenizer.ggml.token_type", std::to_string(types.size()) + " types for " + std::to_string(tokens.size()) + " tokens");
  }
  std::vector<std::string_view> merges;
  if (const GgufValue* m = file.find("tokenizer.ggml.merges")) merges = m->strings();

  json vocab = json::object(), added = json::array();
  // A spelling names one id: encoding could not choose between two (llama.cpp refuses them too).
  std::unordered_map<std::string_view, std::size_t> first_id;
  first_id.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].empty()) key_error("tokenizer.ggml.tokens", "token " + std::to_string(i) + " is empty");
    if (const auto [it, added_now] = first_id.emplace(tokens[i], i); !added_now)
      key_error("tokenizer.ggml.tokens", "tokens " + std::to_string(it->second) + " and " + std::to_string(i) +
                                             " are both spelled " + quoted_excerpt(tokens[i]));
    const std::string token(tokens[i]);
    vocab[token] = i;
    const auto type = static_cast<GgufTokenType>(types[i]);
    if (type == GgufTokenType::control || type == GgufTokenType::user_defined)
      added.push_back({{"id", i},
                       {"content", token},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", type == GgufTokenType::user_defined},
                       {"special", type == GgufTokenType::control}});
  }
  json merge_list = json::array();
  for (std::string_view m : merges) {
    if (m.find(' ') == std::string_view::npos) key_error("tokenizer.ggml.merges", quoted_excerpt(m) + " is not \"left right\"");
    merge_list.push_back(std::string(m));
  }
  json root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", std::move(added)}};
  root["normalizer"] = json::parse(pre->normalizer);
  root["pre_tokenizer"] = json::parse(pre->pre_tokenizer);
  root["decoder"] = json::parse(pre->decoder);
  // The special tokens llama.cpp adds on encoding (add_bos_token / add_eos_token), as a template.
  auto special = [&](const char* add_key, const char* id_key) -> std::optional<std::int64_t> {
    if (!file.flag(add_key).value_or(false)) return std::nullopt;
    const std::optional<std::int64_t> id = file.integer(id_key);
    if (!id || *id < 0 || *id >= static_cast<std::int64_t>(tokens.size()))
      key_error(id_key, std::string("missing or out of range, though ") + add_key + " is set");
    return id;
  };
  const std::optional<std::int64_t> bos = special("tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id");
  const std::optional<std::int64_t> eos = special("tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id");
  if (!bos && !eos) {
    root["post_processor"] = json::parse(pre->post_processor);
  } else {
    json single = json::array(), specials = json::object();
    auto add = [&](std::int64_t id) {
      const std::string token(tokens[static_cast<std::size_t>(id)]);
      single.push_back({{"SpecialToken", {{"id", token}, {"type_id", 0}}}});
      specials[token] = {{"id", token}, {"ids", {id}}, {"tokens", {token}}};
    };
    if (bos) add(*bos);
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (eos) add(*eos);
    root["post_processor"] = {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
  }
  root["model"] = {{"type", "BPE"},          {"dropout", nullptr},      {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                   {"byte_fallback", false}, {"ignore_merges", pre->ignore_merges}, {"vocab", std::move(vocab)},
                   {"merges", std::move(merge_list)}};
  return root.dump();
}

}  // namespace

std::string tokenizer_json_from_gguf(const GgufFile& file) {
  const std::string source = file.files().front().string();
  try {
    return tokenizer_json_of(file, source);
  } catch (const json::exception& e) {  // a token that is not UTF-8, say
    bad(source, "its tokenizer keys do not make a tokenizer.json: " + printable_excerpt(e.what()));
  }
}

}  // namespace switchyard::text
