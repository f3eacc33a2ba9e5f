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
// Compact ranges: {0,1,2,5,7,8} -> "0-2,5,7-8".
std::string format_ranges(std::span<const int> sorted_values);

}  // namespace switchyard
