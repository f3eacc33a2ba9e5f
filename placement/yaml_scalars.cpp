#include "placement/yaml_scalars.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace switchyard {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// `[0-5]?[0-9]` at text[i], the digits after each ':' of a sexagesimal number; advances `i`.
bool sexagesimal_digits(std::string_view text, std::size_t& i) {
  if (i >= text.size() || !is_digit(text[i])) return false;
  if (i + 1 < text.size() && is_digit(text[i + 1]) && text[i] <= '5') i += 2;
  else i += 1;
  return true;
}

}  // namespace

// PyYAML's YAML 1.1 float pattern:
//   [-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)? | \.[0-9][0-9_]*([eE][-+][0-9]+)?
//   | [-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]* | [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN)
bool is_yaml_float(std::string_view text) {
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return true;
  std::string_view t = text;
  const bool signed_ = !t.empty() && (t[0] == '-' || t[0] == '+');
  if (signed_) t.remove_prefix(1);
  if (t == ".inf" || t == ".Inf" || t == ".INF") return true;
  std::size_t i = 0;
  const auto digits_and_underscores = [&] {
    while (i < t.size() && (is_digit(t[i]) || t[i] == '_')) ++i;
  };
  const auto exponent_then_end = [&] {
    if (i == t.size()) return true;
    if (t[i] != 'e' && t[i] != 'E') return false;
    if (++i == t.size() || (t[i] != '-' && t[i] != '+')) return false;
    const std::size_t first = ++i;
    while (i < t.size() && is_digit(t[i])) ++i;
    return i > first && i == t.size();
  };
  if (!t.empty() && t[0] == '.') {
    if (signed_ || t.size() < 2 || !is_digit(t[1])) return false;
    i = 2;
    digits_and_underscores();
    return exponent_then_end();
  }
  if (t.empty() || !is_digit(t[0])) return false;
  i = 1;
  digits_and_underscores();
  if (i < t.size() && t[i] == '.') {
    ++i;
    digits_and_underscores();
    return exponent_then_end();
  }
  bool sexagesimal = false;
  while (i < t.size() && t[i] == ':') {
    ++i;
    if (!sexagesimal_digits(t, i)) return false;
    sexagesimal = true;
  }
  if (!sexagesimal || i >= t.size() || t[i] != '.') return false;
  ++i;
  digits_and_underscores();
  return i == t.size();
}

std::optional<double> yaml_float_value(std::string_view text) {
  std::string clean;
  for (const char c : text)
    if (c != '_') clean += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (clean.find("inf") != std::string::npos || clean.find("nan") != std::string::npos) return std::nullopt;
  std::string_view s = clean;
  double sign = 1;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    if (s[0] == '-') sign = -1;
    s.remove_prefix(1);
  }
  double value = 0;
  for (std::size_t start = 0;;) {  // sexagesimal parts, most significant first; plain numbers have one
    const std::size_t colon = s.find(':', start);
    const std::string_view part = s.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start);
    double digit = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), digit);
    if (ec != std::errc() || end != part.data() + part.size()) return std::nullopt;
    value = value * 60 + digit;
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (!std::isfinite(value)) return std::nullopt;
  return sign * value;
}

std::optional<YamlInteger> parse_yaml_integer(std::string_view text) {
  // PyYAML's pattern: [-+]?0b[0-1_]+ | [-+]?0[0-7_]+ | [-+]?(0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+
  //                   | [-+]?[1-9][0-9_]*(:[0-5]?[0-9])+
  std::string_view s = text;
  const bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  if (s.empty() || !is_digit(s[0])) return std::nullopt;
  const auto digit_value = [](char c) -> unsigned {
    if (is_digit(c)) return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
    return 99;
  };
  unsigned base = 10;
  std::string_view digits = s;
  bool sexagesimal = false;
  if (s.size() > 1 && s[0] == '0' && (s[1] == 'b' || s[1] == 'x')) {
    base = s[1] == 'b' ? 2 : 16;
    digits = s.substr(2);
  } else if (s[0] == '0' && s.size() > 1) {
    base = 8;
    digits = s.substr(1);
  } else if (s[0] != '0' && s.find(':') != std::string_view::npos) {
    sexagesimal = true;
    std::size_t i = 1;
    while (i < s.size() && (is_digit(s[i]) || s[i] == '_')) ++i;
    while (i < s.size() && s[i] == ':') {
      ++i;
      if (!sexagesimal_digits(s, i)) return std::nullopt;
    }
    if (i != s.size()) return std::nullopt;
  }
  if (!sexagesimal) {
    if (digits.empty()) return std::nullopt;
    for (const char c : digits)
      if (c != '_' && digit_value(c) >= base) return std::nullopt;
  }

  // The value, in 64 bits; PyYAML drops the underscores first (so "0b_" has no digits: refused).
  std::uint64_t magnitude = 0;
  std::uint64_t part = 0;  // sexagesimal: the part after the last ':'
  bool any_digit = false;
  bool overflow = false;
  std::size_t significant = 0;  // digits after the leading zeros
  const auto push = [&](std::uint64_t& into, unsigned digit, unsigned radix) {
    if (into > (std::numeric_limits<std::uint64_t>::max() - digit) / radix) overflow = true;
    else into = into * radix + digit;
  };
  for (const char c : digits) {
    if (c == '_') continue;
    if (c == ':') {
      push(magnitude, 0, 60);
      if (!overflow && magnitude > std::numeric_limits<std::uint64_t>::max() - part) overflow = true;
      else magnitude += part;
      part = 0;
      continue;
    }
    any_digit = true;
    if (significant > 0 || c != '0') ++significant;
    push(sexagesimal ? part : magnitude, digit_value(c), sexagesimal ? 10 : base);
  }
  if (!any_digit) return std::nullopt;
  if (sexagesimal) {
    push(magnitude, 0, 60);
    if (!overflow && magnitude > std::numeric_limits<std::uint64_t>::max() - part) overflow = true;
    else magnitude += part;
  }

  YamlInteger result;
  result.octal = base == 8 && significant >= 2;
  constexpr std::uint64_t kMaxPositive = static_cast<std::uint64_t>(std::numeric_limits<long long>::max());
  if (overflow || magnitude > kMaxPositive + (negative ? 1 : 0)) {
    result.out_of_range = true;
  } else if (negative) {
    result.value = magnitude == kMaxPositive + 1 ? std::numeric_limits<long long>::min()
                                                 : -static_cast<long long>(magnitude);
  } else {
    result.value = static_cast<long long>(magnitude);
  }
  return result;
}

std::optional<bool> parse_yaml_bool(std::string_view text, bool any_case) {
  static constexpr std::string_view kTrue[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static constexpr std::string_view kFalse[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  std::string word(text);
  if (any_case)
    for (char& c : word) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (std::find(std::begin(kTrue), std::end(kTrue), word) != std::end(kTrue)) return true;
  if (std::find(std::begin(kFalse), std::end(kFalse), word) != std::end(kFalse)) return false;
  return std::nullopt;
}

std::string yaml_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace switchyard
