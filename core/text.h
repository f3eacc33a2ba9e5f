#pragma once
// Small string helpers shared by the parsers and the reports.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard {

// Levenshtein distance, for did-you-mean suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string closest_match(std::string_view word, std::span<const std::string> candidates);
// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view word, std::span<const std::string> candidates);

std::string join(std::span<const std::string> parts, std::string_view separator);
bool starts_with(std::string_view text, std::string_view prefix);
std::string to_lower(std::string_view text);
// `text` with every occurrence of `from` (not empty) replaced by `to`, left to right.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);
// Compact ranges: {0,1,2,5,7,8} -> "0-2,5,7-8".
std::string format_ranges(std::span<const int> sorted_values);

// Decodes the UTF-8 sequence at text[offset] into `code_point`; returns its length in bytes, or 0
// when the bytes there are not UTF-8 (a stray continuation byte; a truncated, overlong or
// surrogate sequence; a code point past U+10FFFF).
std::size_t decode_utf8(std::string_view text, std::size_t offset, char32_t& code_point);
// Whether all of `text` is UTF-8 by decode_utf8's strict reading (scalar values up to U+10FFFF,
// no surrogates, no overlong forms); when not, `bad_at` (if given) is the first bad byte's offset.
// Every path that hands text to PCRE2 with PCRE2_NO_UTF_CHECK goes through this.
bool valid_utf8(std::string_view text, std::size_t* bad_at = nullptr);
// `text` with each byte that is not part of strict UTF-8 replaced by U+FFFD, as a decoder with
// errors="replace" does: for text made elsewhere (a model's raw bytes) that must become a message.
std::string replace_invalid_utf8(std::string_view text);

// User text for a message: quoted, at most kExcerptCharacters characters and then
// "…' (N characters)", with control characters and bytes that are not UTF-8 written as \xNN,
// so that a message stays one short line of valid UTF-8 (JSON needs that) whatever the user wrote.
constexpr std::size_t kExcerptCharacters = 120;
std::string quoted_excerpt(std::string_view text);
// The same without quotes, for a message made of others' words (a library's error text).
std::string printable_excerpt(std::string_view text, std::size_t max_characters = kExcerptCharacters);

}  // namespace switchyard
