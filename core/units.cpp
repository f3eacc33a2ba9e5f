#include "core/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/text.h"

namespace switchyard {

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  std::size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) ++digits;
  if (digits == 0) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc() || end != text.data() + digits) return std::nullopt;
  std::string unit = to_lower(text.substr(digits));
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kb" || unit == "k") scale = 1e3;
  else if (unit == "mb" || unit == "m") scale = 1e6;
  else if (unit == "gb" || unit == "g") scale = 1e9;
  else if (unit == "tb" || unit == "t") scale = 1e12;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else return std::nullopt;
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 1.8e19) return std::nullopt;
  // std::round, not std::llround: sizes up to 1.8e19 do not fit the long long llround returns.
  return static_cast<std::uint64_t>(std::round(bytes));
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buffer, sizeof buffer, "%.1f %s", value, units[unit]);
  return buffer;
}

}  // namespace switchyard
