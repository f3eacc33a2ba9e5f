#pragma once
// A tokenizer from a Hugging Face tokenizer.json (the `tokenizers` library's format): added and
// special tokens matched first in the raw text (leftmost, longest), then the normalizer, the
// pre-tokenizer (text/pre_tokenizer.h) and the BPE model (text/bpe.h) on the text between them,
// then the post-processor's special tokens. Decoding reverses the byte-level spelling; a
// StreamDecoder hands out text only in whole UTF-8 characters, whatever the tokens split.
// Reads the byte-level BPE tokenizers of DeepSeek-V3, Qwen3 and GLM-4.5, and the sentencepiece-style
// BPE with byte fallback of Llama and Mixtral (Prepend/Replace normalizers, no pre-tokenizer, the
// Replace/ByteFallback/Fuse/Strip decoder); anything the file asks for that this does not
// implement is an InputError naming it, never a silently different encoding.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace switchyard {
class GgufFile;
}

namespace switchyard::text {

class BpeModel;
class Normalizer;
class PreTokenizer;

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
};

// The largest tokenizer.json (or tokenizer_config.json) read: real ones are 7-11 MB.
constexpr std::uint64_t kMaxTokenizerJsonBytes = 512ULL << 20;

class Tokenizer {
 public:
  // `path`: a tokenizer.json, or a directory holding one; or a .gguf (or a directory holding one
  // and no tokenizer.json), read from its tokenizer.ggml.* keys (text/gguf_vocabulary.h). Throws
  // InputError: exit 2 for a file that cannot be read, 1 (kExitBadContent) for one that is not a
  // tokenizer this reads.
  static Tokenizer from_file(const std::filesystem::path& path);
  // From a GGUF's tokenizer.ggml.* keys.
  static Tokenizer from_gguf(const GgufFile& file);
  // From the file's text; `source` names it in errors.
  static Tokenizer from_json(std::string_view json, const std::string& source);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // `text` (UTF-8; invalid UTF-8 is an InputError) to ids; with `add_special`, the
  // post-processor's special tokens too (`tokenizers`' encode(text, add_special_tokens)).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special = true) const;
  // ids back to text; special tokens left out with `skip_special`. An id outside the vocabulary
  // is an InputError naming it. With `token_ends`, also the text's length in bytes after each id:
  // decoding ids[0..k] alone gives the text's first (*token_ends)[k] bytes (one pass, not k).
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false,
                     std::vector<std::size_t>* token_ends = nullptr) const;
  // The token's string as the vocabulary spells it (`tokenizers`' Encoding.tokens): "Ġhello".
  std::string_view token(std::int32_t id) const;
  // The raw bytes one token stands for (special tokens: their content), which may be part of a
  // UTF-8 character.
  std::string token_bytes(std::int32_t id) const;
  // One more than the largest id of the vocabulary and the added tokens.
  std::int32_t vocab_size() const { return vocab_size_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  bool is_special(std::int32_t id) const;

 private:
  Tokenizer();
  void add_added_token_ids(std::string_view text, std::vector<std::int32_t>& out) const;
  void read_decoder(const nlohmann::json& decoder, const std::string& source);
  void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::vector<AddedToken> added_;
  std::vector<std::int32_t> added_index_;                // id -> index in added_, or -1
  std::vector<std::vector<std::int32_t>> added_by_byte_;  // first byte -> added_ indices, longest first
  std::vector<std::int32_t> prefix_ids_, suffix_ids_;     // the post-processor's single-sequence template
  std::int32_t vocab_size_ = 0;
  // The decoder: ByteLevel, or sentencepiece's steps (string replacements, byte tokens, and how
  // many leading spaces of the whole text Strip removes).
  bool byte_level_decoder_ = false;
  std::vector<std::pair<std::string, std::string>> decode_replaces_;
  bool decode_byte_fallback_ = false;
  int strip_leading_ = 0;
  friend class StreamDecoder;
};

// Whether the tokenizer readers (Tokenizer::from_file, load_chat_format) read `path` as a GGUF: a
// .gguf file, or a directory holding one and no tokenizer.json.
bool is_gguf_tokenizer_path(const std::filesystem::path& path);

// Text out of a stream of ids, in whole UTF-8 characters: push() returns what has become
// complete (possibly ""), finish() the rest (an incomplete tail as U+FFFD).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = true)
      : tokenizer_(tokenizer), skip_special_(skip_special), strip_left_(tokenizer.strip_leading_) {}
  std::string push(std::int32_t id);
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  int strip_left_;       // leading spaces still to strip (the decoder's Strip)
  std::string pending_;  // bytes of a character not yet whole
};

// The length of the longest prefix of `bytes` that does not end inside a UTF-8 character
// (invalid bytes count as whole).
std::size_t complete_utf8_prefix(std::string_view bytes);

}  // namespace switchyard::text
