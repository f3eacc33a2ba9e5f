#pragma once
// JSON from outside: files a user names (config.json, safetensors headers, index files, --messages)
// and request bodies. Nesting is bounded before nlohmann parses the text, since its dump() and
// comparisons recurse; a parsed document's memory is bounded by a budget, since a few bytes of text
// can cost a hundred of heap ("[[],[],...]"); and memory running out while parsing is an error, not
// an abort (nlohmann's destructor allocates under noexcept: see release_json). A value is quoted
// briefly in messages: a field holding a megabyte list must not become a megabyte error line.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace switchyard {

// Far deeper than any real config.json or header (3-4 levels).
constexpr int kMaxJsonNesting = 64;

// Throws InputError (kExitBadContent) "SOURCE: JSON nesting deeper than 64" when lists and objects
// in `text` nest deeper than `max_depth`; strings are skipped with their escapes. Linear, no recursion.
void check_json_nesting(std::string_view text, const std::string& source, int max_depth = kMaxJsonNesting);

// A document parse_json would not hold: past its budget, or past the memory the process can get.
// Exit status 2: what would fix it is a smaller input or a machine with more memory.
class JsonTooLarge : public InputError {
 public:
  enum class Cause { budget, out_of_memory };
  JsonTooLarge(std::string message, Cause cause) : InputError(std::move(message), kExitUsageOrIo), cause_(cause) {}
  Cause cause() const { return cause_; }

 private:
  Cause cause_;
};

// The document budget for `text_bytes` of JSON text: 16 bytes of heap per byte of text, plus 1 MiB.
// Real inputs need 1-2 (long strings) to ~8 (many short messages); only hostile shapes need more.
std::size_t json_document_budget(std::size_t text_bytes);

// `text` parsed as nlohmann::json or nlohmann::ordered_json. The document's heap is estimated as it
// is built (per value: its slot in the parent, its string or container; glibc's chunk overheads
// included) and may not pass `max_document_bytes`. Throws InputError (kExitBadContent)
// "SOURCE: not JSON: ..." for bad syntax and check_json_nesting's error; JsonTooLarge (budget)
// past the budget; JsonTooLarge (out_of_memory) when an allocation fails, after releasing what was
// built without allocating.
template <class Json>
Json parse_json(std::string_view text, const std::string& source, std::size_t max_document_bytes);
// The same under json_document_budget(text.size()): a file a user names, read whole.
template <class Json>
Json parse_json(std::string_view text, const std::string& source) {
  return parse_json<Json>(text, source, json_document_budget(text.size()));
}

// Frees `document`'s values leaf first, allocating nothing; `document` is left null. nlohmann's
// destructor (noexcept) first moves a container's children to a new vector, so destroying a large
// document while memory is short throws std::bad_alloc through noexcept: std::terminate. A document
// released here first can be destroyed at any time.
template <class Json>
void release_json(Json& document) noexcept;

// `value` for a message: scalars as JSON (invalid UTF-8 replaced), cut after `max_chars`
// characters as printable_excerpt cuts (core/text.h); lists and objects by their size only
// ("a list of 3 values").
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 60);

}  // namespace switchyard
