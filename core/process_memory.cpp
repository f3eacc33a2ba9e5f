#include "core/process_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace switchyard {
namespace {

// The value in bytes of the line "<key>:   <n> kB", or nullopt.
std::optional<std::uint64_t> kilobytes_field(std::string_view status, std::string_view key) {
  std::size_t at = 0;
  while (at < status.size()) {
    const std::size_t end = std::min(status.find('\n', at), status.size());
    std::string_view line = status.substr(at, end - at);
    at = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') continue;
    line.remove_prefix(key.size() + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    std::uint64_t kib = 0;
    const auto [rest, error] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (error != std::errc() || rest == line.data()) return std::nullopt;
    line.remove_prefix(static_cast<std::size_t>(rest - line.data()));
    if (line != " kB" || kib > (~std::uint64_t{0} >> 10)) return std::nullopt;
    return kib << 10;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ProcessMemory> parse_process_memory(std::string_view status) {
  const auto peak = kilobytes_field(status, "VmHWM"), file = kilobytes_field(status, "RssFile"),
             anon = kilobytes_field(status, "RssAnon"), shmem = kilobytes_field(status, "RssShmem");
  if (!peak || !file || !anon || !shmem) return std::nullopt;
  return ProcessMemory{*peak, *file, *anon, *shmem};
}

std::optional<ProcessMemory> process_memory() {
  std::ifstream in("/proc/self/status");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_process_memory(text.str());
}

}  // namespace switchyard
