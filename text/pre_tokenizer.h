#pragma once
// A tokenizer.json's "normalizer" and "pre_tokenizer": text -> the pieces the BPE model encodes.
// Pre-tokenizers: Split (a regex, PCRE2 in UTF and Unicode-property mode, so \p{L}, \p{N} and
// \s mean what the Rust regex crate means by them, and a script, \p{Han}, its Script property;
// behavior Isolated or Removed, inverted or not), ByteLevel
// (each piece's bytes spelled in the byte-level alphabet, optionally after GPT-2's own split),
// and Sequence of those. Normalizers: NFC, NFD, NFKC, NFKD (through ICU), Prepend, Replace of a
// String (sentencepiece-style tokenizers: Prepend "▁", then spaces to "▁") and Sequence. Anything
// else is an InputError naming the type, so a tokenizer never silently encodes differently.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace switchyard::text {

class Normalizer {
 public:
  // `spec`: the "normalizer" value (null: none).
  Normalizer(const nlohmann::json& spec, const std::string& source);
  // The text normalized (unchanged without a normalizer). Invalid UTF-8 is an InputError.
  std::string apply(std::string_view text) const;
  bool identity() const { return steps_.empty(); }

 private:
  struct Step {
    std::string type;      // "NFC", "NFD", "NFKC", "NFKD", "Prepend", "Replace"
    std::string from, to;  // Prepend: to; Replace: from -> to
  };
  std::vector<Step> steps_;  // in order
};

class PreTokenizer {
 public:
  // `spec`: the "pre_tokenizer" value (null: the whole text is one piece).
  PreTokenizer(const nlohmann::json& spec, const std::string& source);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  // Calls `piece` for each piece in order. With byte_level(), the pieces are raw bytes that the
  // ByteLevel step spells in the byte-level alphabet (BpeModel::encode_bytes reads them so,
  // without the spelling); otherwise they are the text's own code points.
  void split(std::string_view text, const std::function<void(std::string_view)>& piece) const;
  bool byte_level() const;

  struct Step;  // one Split or ByteLevel (defined in the .cpp)

 private:
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace switchyard::text
