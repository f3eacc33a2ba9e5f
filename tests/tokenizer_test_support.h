#pragma once
// What the tokenizer tests share: the real tokenizers that scripts/fetch-tokenizers.sh installs,
// and the fixtures HF tokenizers wrote for them (tests/fixtures/tokenizers).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/test_support.h"

namespace switchyard::testing {

// A real tokenizer installed by scripts/fetch-tokenizers.sh (part of scripts/install-deps.sh).
inline std::filesystem::path real_tokenizer(const std::string& package) {
  const std::filesystem::path dir = source_path(".tokenizers/" + package);
  if (!std::filesystem::exists(dir / "tokenizer.json"))
    FAIL("the real tokenizer " << package << " is not installed in " << dir.string()
                               << ": run scripts/fetch-tokenizers.sh (scripts/install-deps.sh runs it)");
  return dir;
}

inline nlohmann::json tokenizer_fixture(const std::string& name) {
  std::ifstream file(source_path("tests/fixtures/tokenizers/" + name + ".json"));
  REQUIRE(file.good());
  return nlohmann::json::parse(file);
}

}  // namespace switchyard::testing
