#include "core/text.h"

#include <cstdint>
#include <algorithm>
#include <cctype>

namespace switchyard {
namespace {

// std::tolower takes an unsigned char's value; a plain char above 0x7f (UTF-8) is negative.
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t substitute = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_match(std::string_view word, std::span<const std::string> candidates) {
  std::string best;
  std::size_t best_distance = SIZE_MAX;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // A typo changes a few characters; beyond a third of the word it is a different word.
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best_distance <= limit ? best : std::string();
}

std::string did_you_mean(std::string_view word, std::span<const std::string> candidates) {
  const std::string best = closest_match(word, candidates);
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

std::string join(std::span<const std::string> parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::string to_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string format_ranges(std::span<const int> values) {
  std::string out;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(values[i]);
    if (j > i) out += "-" + std::to_string(values[j]);
    i = j + 1;
  }
  return out;
}

std::size_t decode_utf8(std::string_view text, std::size_t offset, char32_t& code_point) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(offset);
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  }
  std::size_t length = 0;
  char32_t smallest = 0;
  if ((lead & 0xE0) == 0xC0) length = 2, code_point = lead & 0x1F, smallest = 0x80;
  else if ((lead & 0xF0) == 0xE0) length = 3, code_point = lead & 0x0F, smallest = 0x800;
  else if ((lead & 0xF8) == 0xF0) length = 4, code_point = lead & 0x07, smallest = 0x10000;
  else return 0;
  if (offset + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(offset + k) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(offset + k) & 0x3F);
  }
  if (code_point < smallest || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) return 0;
  return length;
}

bool valid_utf8(std::string_view text, std::size_t* bad_at) {
  char32_t ignored = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = decode_utf8(text, i, ignored);
    if (length == 0) {
      if (bad_at) *bad_at = i;
      return false;
    }
    i += length;
  }
  return true;
}

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char32_t ignored = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = decode_utf8(text, i, ignored);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      i += 1;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

namespace {

// Appends at most `max_characters` characters of `text` to `out`, control characters and bytes
// that are not UTF-8 as \xNN; returns how many bytes of `text` it took.
std::size_t append_printable(std::string& out, std::string_view text, std::size_t max_characters) {
  static const char* kHex = "0123456789ABCDEF";
  const auto escape = [&](unsigned value) {
    out += "\\x";
    out += kHex[(value >> 4) & 0xF];
    out += kHex[value & 0xF];
  };
  std::size_t i = 0;
  for (std::size_t characters = 0; i < text.size() && characters < max_characters; ++characters) {
    char32_t c = 0;
    const std::size_t length = decode_utf8(text, i, c);
    if (length == 0) {
      escape(static_cast<unsigned char>(text[i]));
      i += 1;
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0)) {
      escape(static_cast<unsigned>(c));
      i += length;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return i;
}

// Characters in `text`, a byte that is not UTF-8 counting as one.
std::size_t count_characters(std::string_view text) {
  std::size_t characters = 0;
  for (std::size_t i = 0; i < text.size(); ++characters) {
    char32_t ignored = 0;
    i += std::max<std::size_t>(1, decode_utf8(text, i, ignored));
  }
  return characters;
}

}  // namespace

std::string quoted_excerpt(std::string_view text) {
  std::string out = "'";
  const std::size_t taken = append_printable(out, text, kExcerptCharacters);
  if (taken == text.size()) return out + "'";
  return out + "\u2026' (" + std::to_string(count_characters(text)) + " characters)";
}

std::string printable_excerpt(std::string_view text, std::size_t max_characters) {
  std::string out;
  const std::size_t taken = append_printable(out, text, max_characters);
  if (taken == text.size()) return out;
  return out + "\u2026 (" + std::to_string(count_characters(text)) + " characters)";
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0;;) {
    const std::size_t found = text.find(from, at);
    out.append(text.substr(at, found == std::string_view::npos ? std::string_view::npos : found - at));
    if (found == std::string_view::npos) return out;
    out.append(to);
    at = found + from.size();
  }
}

}  // namespace switchyard
