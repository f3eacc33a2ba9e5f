#pragma once
// JSON from files a user names (config.json, safetensors headers, index files). Nesting is bounded
// before nlohmann parses the text, since its dump() and comparisons recurse, and a value is quoted
// briefly in messages: a field holding a megabyte list must not become a megabyte error line.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace switchyard {

// Far deeper than any real config.json or header (3-4 levels).
constexpr int kMaxJsonNesting = 64;

// Throws InputError (kExitBadContent) "SOURCE: JSON nesting deeper than 64" when lists and objects
// in `text` nest deeper than `max_depth`; strings are skipped with their escapes. Linear, no recursion.
void check_json_nesting(std::string_view text, const std::string& source, int max_depth = kMaxJsonNesting);

// `value` for a message: scalars as JSON (invalid UTF-8 replaced), cut after `max_chars`
// characters as printable_excerpt cuts (core/text.h); lists and objects by their size only
// ("a list of 3 values").
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 60);

}  // namespace switchyard
