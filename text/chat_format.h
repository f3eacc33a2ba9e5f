#pragma once
// A model's chat format: its chat template (text/chat_template.h) and the special tokens the
// template refers to (bos_token, eos_token), from where a model keeps them: tokenizer_config.json
// beside a tokenizer.json, or a GGUF's tokenizer.chat_template and tokenizer.ggml.bos/eos ids.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"

namespace switchyard {
class GgufFile;
}

namespace switchyard::text {

struct ChatFormat {
  ChatTemplate chat_template;
  std::string bos_token, eos_token;  // "" where the model names none
  std::string source;                // where the template came from, for messages

  // `messages`: an OpenAI-style list of {"role", "content", ...}; `extra`: further template
  // variables (enable_thinking, tools). Throws InputError for messages that are not such a list,
  // or a template that fails.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
};

// The chat format of the tokenizer at `tokenizer_path` (as Tokenizer::from_file takes it);
// nullopt where the model has no chat template. Throws InputError for a template that does not
// parse or a config that is not JSON.
std::optional<ChatFormat> load_chat_format(const std::filesystem::path& tokenizer_path);
// The same from a tokenizer_config.json's text; `source` names it in messages.
std::optional<ChatFormat> chat_format_from_config(std::string_view config_text, const std::string& source);
// The same from a GGUF's tokenizer.chat_template and tokenizer.ggml.bos/eos ids.
std::optional<ChatFormat> load_chat_format(const GgufFile& gguf);

}  // namespace switchyard::text
