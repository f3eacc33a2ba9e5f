#include "cli/cpu_kernel_flags.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

#include "cli/model_options.h"
#include "core/error.h"

namespace switchyard::cli {
namespace {

const std::string kPrefetchRange = "0 (none) or " + std::to_string(cpu::kMinPrefetchBytes) + " to " +
                                   std::to_string(cpu::kMaxPrefetchBytes) + " bytes";
const std::string kTileRowsRange = "0 (off) to " + std::to_string(cpu::kMaxTileBlockRows) + " rows";

// `text` as a whole number, or none.
std::optional<std::int64_t> whole(const std::string& text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || text.empty()) return std::nullopt;
  return value;
}

// Sets the setting `name` (a flag's name without its dashes, is_option) of `options` to `value`;
// returns what is wrong with the value, or "".
std::string assign(cpu::KernelOptions& options, std::string_view name, const std::string& value) {
  if (name == "cpu_prefetch_bytes") {
    const std::optional<std::int64_t> bytes = whole(value);
    if (!bytes || (*bytes != 0 && (*bytes < cpu::kMinPrefetchBytes || *bytes > cpu::kMaxPrefetchBytes)))
      return quoted_argument(value) + " is not " + kPrefetchRange;
    options.prefetch_bytes = static_cast<int>(*bytes);
    return "";
  }
  if (name == "cpu_tile_block_rows") {
    const std::optional<std::int64_t> rows = whole(value);
    if (!rows || *rows < 0 || *rows > cpu::kMaxTileBlockRows) return quoted_argument(value) + " is not " + kTileRowsRange;
    options.tile_block_rows = *rows;
    return "";
  }
  if (name == "cpu_panels_by_row") {
    if (value == "auto") options.panels_by_row.reset();
    else if (value == "true" || value == "false") options.panels_by_row = value == "true";
    else return quoted_argument(value) + " is not auto, true or false";
    return "";
  }
  return "";
}

bool is_option(std::string_view name) {
  return name == "cpu_prefetch_bytes" || name == "cpu_tile_block_rows" || name == "cpu_panels_by_row";
}

// A flag's validator: the value as `assign` takes it.
CLI::Validator setting(std::string name, std::string description) {
  return CLI::Validator(
      [name](std::string& value) {
        cpu::KernelOptions scratch;
        return assign(scratch, name, value);
      },
      std::move(description));
}

}  // namespace

void CpuKernelFlags::add_to(CLI::App& command) {
  command
      .add_option("--cpu_prefetch_bytes", prefetch_bytes,
                  "how far ahead the CPU's quantised decode prefetches its weights, in bytes (0: no prefetch)")
      ->capture_default_str()
      ->check(setting("cpu_prefetch_bytes", "INT 0 or " + std::to_string(cpu::kMinPrefetchBytes) + " to " +
                                                std::to_string(cpu::kMaxPrefetchBytes)));
  command
      .add_option("--cpu_tile_block_rows", tile_block_rows,
                  "the CPU's tiles prefill (AMX, AVX512-BF16) cuts a batch's calls into blocks of at least this many "
                  "weight rows, while there are enough blocks for every thread (0: no floor)")
      ->capture_default_str()
      ->check(setting("cpu_tile_block_rows", "INT in 0 to " + std::to_string(cpu::kMaxTileBlockRows)));
  command
      .add_option("--cpu_panels_by_row", panels_by_row,
                  "how the CPU's tiles prefill writes its bf16 panels of block-type weights: a row at a time (true), "
                  "8 chunks of every row at a time (false), or auto (by row where AMX is)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "true", "false"}));
  set_group(command, {"--cpu_prefetch_bytes", "--cpu_tile_block_rows", "--cpu_panels_by_row"}, kPerformanceGroup);
}

cpu::KernelOptions CpuKernelFlags::options() const {
  cpu::KernelOptions options;
  options.prefetch_bytes = prefetch_bytes;
  options.tile_block_rows = tile_block_rows;
  if (panels_by_row != "auto") options.panels_by_row = panels_by_row == "true";
  return options;
}

namespace {

// `options` with `assignments` applied (none where empty); returns what is wrong with them, or "".
std::string apply_assignments(cpu::KernelOptions& options, const std::string& assignments) {
  if (assignments.empty()) return "";
  for (std::size_t start = 0; start <= assignments.size();) {
    const std::size_t comma = std::min(assignments.find(',', start), assignments.size());
    const std::string item = assignments.substr(start, comma - start);
    start = comma + 1;
    const std::size_t equals = item.find('=');
    if (equals == std::string::npos)
      return quoted_argument(item) +
             " is not NAME=VALUE (e.g. cpu_prefetch_bytes=0; the names: cpu_prefetch_bytes, cpu_tile_block_rows, "
             "cpu_panels_by_row)";
    if (!is_option(item.substr(0, equals)))
      return quoted_argument(item.substr(0, equals)) +
             " is not a CPU kernel option (cpu_prefetch_bytes, cpu_tile_block_rows, cpu_panels_by_row)";
    const std::string problem = assign(options, item.substr(0, equals), item.substr(equals + 1));
    if (!problem.empty()) return item.substr(0, equals) + ": " + problem;
  }
  return "";
}

}  // namespace

cpu::KernelOptions with_assignments(const cpu::KernelOptions& base, const std::string& assignments) {
  cpu::KernelOptions options = base;
  const std::string problem = apply_assignments(options, assignments);
  if (!problem.empty()) throw InputError("--ab_option: " + problem);
  return options;
}

CLI::Option* add_ab_option(CLI::App& command, std::string& assignments, const std::string& what) {
  return command
      .add_option("--ab_option", assignments,
                  "an A/B inside this process for the CPU kernel options (NAME=VALUE, comma-separated; the names are "
                  "the flags cpu_prefetch_bytes, cpu_tile_block_rows, cpu_panels_by_row): " +
                      what + " timed with the options the flags give (A) and with these changed (B), alternating")
      ->check(CLI::Validator(
          [](std::string& value) {
            cpu::KernelOptions scratch;
            return apply_assignments(scratch, value);
          },
          "NAME=VALUE[,NAME=VALUE...]"));
}

}  // namespace switchyard::cli
