#include "core/device_map.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "core/error.h"
#include "core/text.h"

namespace switchyard {
namespace {

constexpr int kMaxOrdinal = 1023;  // as parse_device's cuda:N

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

std::optional<int> ordinal(std::string_view digits) {
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  int value = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value < 0 || value > kMaxOrdinal) return std::nullopt;
  return value;
}

// "cuda:3" or "3" (either side of an item).
std::optional<int> gpu_ordinal(std::string_view text) {
  text = trimmed(text);
  const std::string lower = to_lower(text);
  return ordinal(starts_with(lower, "cuda:") ? std::string_view(lower).substr(5) : std::string_view(lower));
}

[[noreturn]] void bad(std::string_view item, const std::string& why) {
  throw InputError("--device_map: '" + std::string(item.substr(0, 40)) + (item.size() > 40 ? "..." : "") + "' " + why +
                       " (write cuda:1=0, cuda:4-7=1 or all=0: logical GPU = this machine's GPU)",
                   2);
}

}  // namespace

DeviceMap DeviceMap::parse(std::string_view text) {
  DeviceMap map;
  if (trimmed(text).empty()) bad(text, "is empty");
  for (std::size_t begin = 0; begin <= text.size();) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view item = trimmed(text.substr(begin, comma - begin));
    begin = comma + 1;
    if (item.empty()) bad(text, "has an empty item");
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) {  // a bare ordinal: every logical GPU there
      const std::optional<int> physical = gpu_ordinal(item);
      if (!physical) bad(item, "is not a GPU number");
      if (map.all_ >= 0) bad(item, "names a second GPU for every logical GPU");
      map.all_ = *physical;
      continue;
    }
    const std::string_view left = trimmed(item.substr(0, equals));
    const std::optional<int> physical = gpu_ordinal(item.substr(equals + 1));
    if (!physical) bad(item, "has no GPU number after '='");
    if (to_lower(left) == "all" || left == "*") {
      if (map.all_ >= 0) bad(item, "names a second GPU for every logical GPU");
      map.all_ = *physical;
      continue;
    }
    std::string lower = to_lower(left);
    if (starts_with(lower, "cuda:")) lower = lower.substr(5);
    const std::size_t dash = lower.find('-');
    const std::optional<int> first = ordinal(lower.substr(0, dash));
    const std::optional<int> last = dash == std::string::npos ? first : ordinal(lower.substr(dash + 1));
    if (!first || !last) bad(item, "has no logical GPU (cuda:N or cuda:N-M) before '='");
    if (*last < *first) bad(item, "has a range that ends before it begins");
    for (int logical = *first; logical <= *last; ++logical)
      if (!map.entries_.emplace(logical, *physical).second)
        bad(item, "maps cuda:" + std::to_string(logical) + " a second time");
  }
  return map;
}

int DeviceMap::physical(int logical) const {
  const auto found = entries_.find(logical);
  if (found != entries_.end()) return found->second;
  return all_ >= 0 ? all_ : logical;
}

std::map<int, std::vector<int>> DeviceMap::folded(int logical_gpus) const {
  std::map<int, std::vector<int>> out;
  for (int logical = 0; logical < logical_gpus; ++logical) out[physical(logical)].push_back(logical);
  return out;
}

std::string DeviceMap::str() const {
  std::string out = all_ >= 0 ? "all=" + std::to_string(all_) : std::string();
  for (const auto& [logical, physical] : entries_)
    out += (out.empty() ? "" : ",") + ("cuda:" + std::to_string(logical) + "=" + std::to_string(physical));
  return out;
}

}  // namespace switchyard
