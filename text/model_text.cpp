#include "text/model_text.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"
#include "core/gguf.h"
#include "core/input_file.h"

namespace switchyard::text {
namespace {

void add_end_id(ModelText& m, std::int64_t id, const std::string& where) {
  if (id < 0 || id >= m.tokenizer.vocab_size())
    throw InputError(where + ": eos token id " + std::to_string(id) + " is outside the tokenizer's vocabulary of " +
                         std::to_string(m.tokenizer.vocab_size()),
                     kExitBadContent);
  if (std::find(m.end_ids.begin(), m.end_ids.end(), id) == m.end_ids.end())
    m.end_ids.push_back(static_cast<std::int32_t>(id));
}

// config.json and generation_config.json write eos_token_id as one id or a list of them.
void add_end_ids_from(ModelText& m, const std::filesystem::path& file) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) return;
  const std::string text = read_input_file(file, file.filename().string(), std::uint64_t{64} << 20);
  const nlohmann::json j = parse_json<nlohmann::json>(text, file.string());
  if (!j.is_object()) return;
  const auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return;
  const auto add = [&](const nlohmann::json& v) {
    if (!v.is_number_integer()) throw InputError(file.string() + ": eos_token_id holds " + v.dump() + ", not a token id", kExitBadContent);
    add_end_id(m, v.get<std::int64_t>(), file.string());
  };
  if (it->is_array()) for (const nlohmann::json& v : *it) add(v);
  else add(*it);
}

// The chat format's eos_token (tokenizer_config.json) by its spelling among the added tokens.
void add_chat_eos(ModelText& m) {
  if (m.chat && !m.chat->eos_token.empty())
    for (const AddedToken& t : m.tokenizer.added_tokens())
      if (t.content == m.chat->eos_token) add_end_id(m, t.id, m.chat->source);
}

// tokenizer_config.json spells a special token as "<s>" or {"content": "<s>", ...}.
std::string config_token(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

// added_bos from a tokenizer_config.json's text: add_bos_token true and a bos_token among the
// tokenizer's added tokens; a bos_token the tokenizer lacks is an InputError naming `source`.
void read_added_bos(ModelText& m, std::string_view config_text, const std::string& source) {
  if (config_text.empty()) return;
  const nlohmann::json config = parse_json<nlohmann::json>(config_text, source);
  if (!config.is_object()) return;
  const auto add = config.find("add_bos_token");
  if (add == config.end() || !add->is_boolean() || !add->get<bool>()) return;
  const std::string bos = config_token(config, "bos_token");
  if (bos.empty()) return;
  for (const AddedToken& t : m.tokenizer.added_tokens())
    if (t.content == bos) {
      m.added_bos = t.id;
      return;
    }
  throw InputError(source + ": add_bos_token asks for bos_token " + bos + ", which the tokenizer does not have",
                   kExitBadContent);
}

}  // namespace

std::vector<std::int32_t> ModelText::encode_prompt(std::string_view text) const {
  std::vector<std::int32_t> ids = tokenizer.encode(text, /*add_special=*/true);
  if (added_bos && (ids.empty() || ids.front() != *added_bos)) ids.insert(ids.begin(), *added_bos);
  return ids;
}

ModelText ModelText::from_texts(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                                const std::string& source) {
  ModelText m{Tokenizer::from_json(tokenizer_json, source + " tokenizer.json"),
              tokenizer_config_json.empty() ? std::nullopt
                                            : chat_format_from_config(tokenizer_config_json, source + " tokenizer_config.json"),
              {}, source, std::nullopt};
  add_chat_eos(m);
  read_added_bos(m, tokenizer_config_json, source + " tokenizer_config.json");
  return m;
}

ModelText ModelText::from_gguf(const GgufFile& gguf) {
  ModelText m{Tokenizer::from_gguf(gguf), load_chat_format(gguf), {}, gguf.files().front().string(), std::nullopt};
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (const std::optional<std::int64_t> id = gguf.integer(key)) add_end_id(m, *id, m.source + ": " + key);
  return m;
}

ModelText ModelText::load(const std::filesystem::path& path) {
  if (is_gguf_tokenizer_path(path)) return from_gguf(GgufFile::open(path));
  std::error_code error;
  const bool directory = std::filesystem::is_directory(path, error);
  const std::filesystem::path file = directory ? path / "tokenizer.json" : path;
  ModelText m{Tokenizer::from_file(path), load_chat_format(path), {}, file.string(), std::nullopt};
  add_chat_eos(m);
  const std::filesystem::path dir = file.parent_path();
  const std::filesystem::path config = dir / "tokenizer_config.json";
  if (std::filesystem::is_regular_file(config, error))
    read_added_bos(m, read_input_file(config, "tokenizer_config.json", kMaxTokenizerJsonBytes), config.string());
  add_end_ids_from(m, dir / "generation_config.json");
  add_end_ids_from(m, dir / "config.json");
  return m;
}

}  // namespace switchyard::text
