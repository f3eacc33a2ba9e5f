#pragma once
// A tokenizer as a GGUF file carries it: llama.cpp's tokenizer.ggml.* keys (model "gpt2" for
// byte-level BPE, the pre-tokenizer by name, tokens by id with their types, merges by rank, the
// special ids) and tokenizer.chat_template. Both ways:
//   - make-model --format gguf --tokenizer DIR writes the keys from tokenizer.json and
//     tokenizer_config.json (gguf_vocabulary_from_json, write_gguf_vocabulary);
//   - Tokenizer::from_file on a .gguf reads them back as the tokenizer.json they stand for
//     (tokenizer_json_from_gguf), so one loader and one encoder serve both.
// A GGUF names its pre-tokenizer and implies its normalizer; the names read here are those
// llama.cpp writes for the families this project runs, and the names it gives other models whose
// text splits the same way (gguf_pre_tokenizer_names). Each stands for one family's tokenizer.json
// parts: deepseek-v3, deepseek-llm (DeepSeek-V2), qwen2 (Qwen2.5, Qwen3; with NFC), qwen35,
// llama-bpe (Llama 3, whose BPE ignores merges for whole-vocabulary pieces), glm4, gpt-4o (gpt-oss,
// MiniMax-M2) and kimi-k2. Any other name, in either direction, is an InputError that lists them.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard {
class GgufFile;
class GgufWriter;
}  // namespace switchyard

namespace switchyard::text {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class GgufTokenType : std::int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

struct GgufVocabulary {
  std::string pre;                        // tokenizer.ggml.pre
  std::vector<std::string> tokens;        // by id
  std::vector<std::int32_t> token_types;  // GgufTokenType, by id
  std::vector<std::string> merges;        // "left right", by rank
  std::optional<std::int32_t> bos, eos, pad;
  bool add_bos = false, add_eos = false;
  std::string chat_template;  // "" for none
};

// From a tokenizer.json's text and its tokenizer_config.json's (may be empty), with the token ids
// up to `vocab_size` that the tokenizer lacks as unused "[PAD<id>]" tokens (a model's embedding
// may be wider than its tokenizer). `source` names the files in errors. Throws InputError (exit 1)
// for a tokenizer a GGUF cannot name, a vocabulary wider than `vocab_size`, or a broken file.
GgufVocabulary gguf_vocabulary_from_json(std::string_view tokenizer_json, std::string_view config_json,
                                         std::int64_t vocab_size, const std::string& source);

// The same read from the files (`config`: "" for none), within the tokenizer's size limits.
GgufVocabulary gguf_vocabulary_from_files(const std::filesystem::path& tokenizer_json, const std::filesystem::path& config,
                                          std::int64_t vocab_size);

// What a tokenizer.ggml.pre name stands for: its family's name (the one a written GGUF gets) and
// tokenizer.json parts, as JSON text.
struct GgufPreTokenizer {
  const char* family;
  const char* normalizer;
  const char* pre_tokenizer;
  const char* decoder;
  const char* post_processor;  // without special tokens
  bool ignore_merges;          // the BPE model's flag
};
// nullopt for a name this does not read.
std::optional<GgufPreTokenizer> gguf_pre_tokenizer(std::string_view name);
// Every name read, as an unknown name's error lists them.
std::vector<std::string> gguf_pre_tokenizer_names();

// Sets the keys on `writer` (tokenizer.ggml.model "gpt2" and the rest).
void write_gguf_vocabulary(const GgufVocabulary& vocabulary, GgufWriter& writer);

// Whether the file carries a vocabulary (tokenizer.ggml.model other than "none" with tokens).
bool gguf_has_vocabulary(const GgufFile& file);

// The tokenizer.json document the file's keys stand for. Throws InputError (exit 1) naming the
// file and the key for a missing or malformed key, a model other than "gpt2", an unknown
// pre-tokenizer, or token types and tokens of different lengths.
std::string tokenizer_json_from_gguf(const GgufFile& file);

}  // namespace switchyard::text
