#include "text/chat_format.h"

#include "core/error.h"
#include "core/json_input.h"
#include "core/gguf.h"
#include "core/input_file.h"
#include "text/tokenizer.h"

namespace switchyard::text {
namespace {

using Json = nlohmann::ordered_json;

// tokenizer_config.json spells a special token as "<s>" or {"content": "<s>", ...}.
std::string config_token(const Json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

std::string ChatFormat::render(const Json& messages, bool add_generation_prompt, const Json& extra) const {
  if (!messages.is_array()) throw InputError("messages: not a list of {\"role\": ..., \"content\": ...} objects", kExitBadContent);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw InputError(where + ": not an object with a string \"role\"", kExitBadContent);
    if (m.contains("content") && !m["content"].is_string() && !m["content"].is_null())
      throw InputError(where + ".content: not a string (parts of other kinds are not supported)", kExitBadContent);
  }
  Json context = extra.is_object() ? extra : Json::object();
  context["messages"] = messages;
  context["add_generation_prompt"] = add_generation_prompt;
  if (!bos_token.empty()) context["bos_token"] = bos_token;
  if (!eos_token.empty()) context["eos_token"] = eos_token;
  return chat_template.render(context);
}

std::optional<ChatFormat> load_chat_format(const GgufFile& gguf) {
  const std::optional<std::string> source = gguf.string("tokenizer.chat_template");
  if (!source) return std::nullopt;
  const std::string name = gguf.files().front().string() + ": tokenizer.chat_template";
  ChatFormat f{ChatTemplate::parse(*source, name), "", "", name};
  const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
  auto token = [&](const char* key) -> std::string {
    const std::optional<std::int64_t> id = gguf.integer(key);
    if (!id || tokens == nullptr || *id < 0 || static_cast<std::size_t>(*id) >= tokens->string_elements().size()) return "";
    return std::string(tokens->string_elements()[static_cast<std::size_t>(*id)]);
  };
  f.bos_token = token("tokenizer.ggml.bos_token_id");
  f.eos_token = token("tokenizer.ggml.eos_token_id");
  return f;
}

std::optional<ChatFormat> load_chat_format(const std::filesystem::path& tokenizer_path) {
  if (is_gguf_tokenizer_path(tokenizer_path)) return load_chat_format(GgufFile::open(tokenizer_path));
  std::error_code error;
  const std::filesystem::path dir = std::filesystem::is_directory(tokenizer_path, error) ? tokenizer_path : tokenizer_path.parent_path();
  const std::filesystem::path config_file = dir / "tokenizer_config.json";
  if (!std::filesystem::is_regular_file(config_file, error)) return std::nullopt;
  return chat_format_from_config(read_input_file(config_file, "tokenizer_config.json", kMaxTokenizerJsonBytes),
                                 config_file.string());
}

std::optional<ChatFormat> chat_format_from_config(std::string_view config_text, const std::string& source) {
  const Json config = parse_json<Json>(config_text, source);
  if (!config.is_object()) throw InputError(source + ": not a JSON object", kExitBadContent);
  const auto t = config.find("chat_template");
  if (t == config.end() || !t->is_string()) return std::nullopt;
  const std::string name = source + ": chat_template";
  return ChatFormat{ChatTemplate::parse(t->get<std::string>(), name), config_token(config, "bos_token"),
                    config_token(config, "eos_token"), name};
}

}  // namespace switchyard::text
