#pragma once
// The built-in model's tokenizer: DeepSeek-V3's tokenizer.json and tokenizer_config.json, built
// into the binary when scripts/fetch-tokenizers.sh had fetched them before cmake ran (they are
// 7.8 MB; the pages are read only when `run` uses the built-in model).
#include <optional>
#include <string_view>

namespace switchyard::cli {

struct EmbeddedTokenizer {
  std::string_view tokenizer_json;
  std::string_view tokenizer_config_json;
};

// nullopt in a build made without them.
std::optional<EmbeddedTokenizer> embedded_tokenizer();

}  // namespace switchyard::cli
