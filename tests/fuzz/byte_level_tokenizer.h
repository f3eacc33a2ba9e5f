#pragma once
// The fixed tokenizer the fuzz targets encode arbitrary text with: byte-level BPE (the 256 byte
// symbols, a few merges, one special token) whose pre-tokenizer runs PCRE2 in UTF mode, a Split
// with Unicode classes then ByteLevel's GPT-2 pattern, as DeepSeek-V3's and Qwen3's do.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/tokenizer.h"

namespace switchyard::fuzz {

inline const text::Tokenizer& byte_level_tokenizer() {
  static const text::Tokenizer t = [] {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[std::string(text::byte_symbol(static_cast<std::uint8_t>(b)))] = b;
    const std::vector<std::string> merges = {"Ġ t", "h e", "Ġt he", "i n", "e r"};
    int next = 256;
    for (const std::string& m : merges) vocab[m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1)] = next++;
    const nlohmann::json spec = {
        {"version", "1.0"},
        {"added_tokens", {{{"id", next}, {"content", "<eos>"}, {"special", true}}}},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}{1,3}|[\\p{Han}\\p{Hiragana}]+"}}}, {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}}},
        {"post_processor", {{"type", "ByteLevel"}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    return text::Tokenizer::from_json(spec.dump(), "fuzz-byte-level.json");
  }();
  return t;
}

}  // namespace switchyard::fuzz
