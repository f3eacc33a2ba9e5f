#pragma once
// What the tokenizer tests share: the real tokenizers that scripts/fetch-tokenizers.sh installs,
// and the fixtures HF tokenizers wrote for them (tests/fixtures/tokenizers).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_support.h"
#include "text/byte_level.h"

namespace switchyard::testing {

// A real tokenizer installed by scripts/fetch-tokenizers.sh (part of scripts/install-deps.sh).
inline std::filesystem::path real_tokenizer(const std::string& package) {
  const std::filesystem::path dir = source_path(".tokenizers/" + package);
  if (!std::filesystem::exists(dir / "tokenizer.json"))
    FAIL("the real tokenizer " << package << " is not installed in " << dir.string()
                               << ": run scripts/fetch-tokenizers.sh (scripts/install-deps.sh runs it)");
  return dir;
}

// A byte-level tokenizer.json of the 256 byte symbols, these extra tokens and merges.
inline std::string small_tokenizer(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                            const nlohmann::json& pre_tokenizer = nlohmann::json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[std::string(text::byte_symbol(static_cast<std::uint8_t>(b)))] = id++;
  for (const std::string& token : extra) vocab[token] = id++;
  nlohmann::json root = {{"version", "1.0"},
                         {"added_tokens", nlohmann::json::array({{{"id", id}, {"content", "<eos>"}, {"special", true}}})},
                         {"normalizer", nullptr},
                         {"pre_tokenizer", pre_tokenizer},
                         {"post_processor", {{"type", "ByteLevel"}}},
                         {"decoder", {{"type", "ByteLevel"}}},
                         {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  return root.dump();
}

inline nlohmann::json tokenizer_fixture(const std::string& name) {
  std::ifstream file(source_path("tests/fixtures/tokenizers/" + name + ".json"));
  REQUIRE(file.good());
  return nlohmann::json::parse(file);
}

}  // namespace switchyard::testing
