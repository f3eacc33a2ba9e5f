#pragma once
// A model's text interface, read once from where the model keeps it: the tokenizer, the chat
// format (absent for a base model) and the ids that end a turn. Sources, by `path` (as
// Tokenizer::from_file takes it):
//   - a tokenizer.json with tokenizer_config.json beside it (the chat template, eos_token), and
//     the model's config.json / generation_config.json in the same directory (eos_token_id, one
//     id or a list);
//   - a GGUF (opened once): tokenizer.ggml.*, tokenizer.chat_template, tokenizer.ggml.eos_token_id
//     and tokenizer.ggml.eot_token_id.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_format.h"
#include "text/tokenizer.h"

namespace switchyard::text {

struct ModelText {
  Tokenizer tokenizer;
  std::optional<ChatFormat> chat;
  std::vector<std::int32_t> end_ids;  // generation stops after one of these; distinct, in the vocabulary
  std::string source;                 // the file the tokenizer came from, for messages
  // tokenizer_config.json's add_bos_token: the bos token's id, which a plain prompt starts with
  // (transformers' tokenizer(text) puts it there; a tokenizer.json's own post-processor, as
  // DeepSeek-V3's, may not). nullopt: none, or the post-processor adds it (a GGUF's
  // tokenizer.ggml.add_bos_token becomes its post-processor).
  std::optional<std::int32_t> added_bos;

  // A plain prompt (run --prompt, /v1/completions) as the model's tokenizer encodes it for
  // generation: the post-processor's special tokens, and added_bos first unless already there.
  // Chat prompts are rendered by the template, which writes its own bos, and encoded without.
  std::vector<std::int32_t> encode_prompt(std::string_view text) const;

  // Throws InputError as Tokenizer::from_file and load_chat_format do; an eos_token_id that is not
  // an id of the vocabulary is an InputError naming the file.
  static ModelText load(const std::filesystem::path& path);
  // From a GGUF's tokenizer keys (as opened, overrides applied: GgufFile::with_overrides).
  static ModelText from_gguf(const GgufFile& gguf);
  // From a tokenizer.json's and a tokenizer_config.json's text ("" for none); `source` names them.
  static ModelText from_texts(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                              const std::string& source);
};

}  // namespace switchyard::text
