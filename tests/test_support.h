#pragma once
// Helpers shared by the placement and command-line tests.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "placement/check.h"

namespace switchyard::testing {

// How much slower this build runs than a plain optimised one. The hang guards' time bounds (a
// parse that must stay linear must not take seconds) scale by it, so that ASan's slowdown on a
// loaded 2-core CI machine does not fail them while a quadratic parse still would.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr double kBuildSlowdown = 3.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr double kBuildSlowdown = 3.0;
#else
inline constexpr double kBuildSlowdown = 1.0;
#endif
#else
inline constexpr double kBuildSlowdown = 1.0;
#endif

// Whether this build runs under AddressSanitizer (scripts/ci-sanitizers.sh): its runtime reserves
// terabytes of address space and writes its own files, so a child under `ulimit -v` or a small
// RLIMIT_FSIZE fails for the sanitizer's sake, not ours. Tests leave such limits out there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

struct CheckSetup {
  std::string arch = "tiny-deepseek-v3";
  std::optional<int> gpus;
  std::vector<std::uint64_t> gpu_bytes;
  std::optional<std::uint64_t> cpu_bytes;
  std::optional<Device> default_device;
  std::string weight_dtype = "bf16";
};

inline CheckResult check_yaml(const std::string& yaml, const CheckSetup& setup = {}) {
  CheckOptions options;
  options.model.arch = setup.arch;
  options.model.weight_dtype = setup.weight_dtype;
  options.profile = "test.yaml";
  options.profile_text = yaml;
  options.gpus = setup.gpus;
  options.default_device = setup.default_device;
  options.budget.gpu_bytes = setup.gpu_bytes;
  options.budget.cpu_bytes = setup.cpu_bytes;
  return run_check(options);
}

inline std::vector<Diagnostic> with_code(const CheckResult& result, const std::string& code) {
  std::vector<Diagnostic> out;
  for (const Diagnostic& d : result.diagnostics.sorted())
    if (d.code == code) out.push_back(d);
  return out;
}

// The one diagnostic with `code`; fails the test when there is not exactly one.
inline Diagnostic only(const CheckResult& result, const std::string& code) {
  const auto found = with_code(result, code);
  INFO("diagnostics with code " << code);
  for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
  REQUIRE(found.size() == 1);
  return found.front();
}

inline const ModulePlacement& placement(const CheckResult& result, const std::string& module) {
  const int index = result.tree->find(module);
  REQUIRE_MESSAGE(index >= 0, "no module " << module);
  const ModulePlacement* p = result.plan.placement_of(index);
  REQUIRE_MESSAGE(p != nullptr, module << " was not visited");
  return *p;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout only (and stderr, when asked for)
};

// Runs `command` (a shell command line, its own redirections included) and reads what it writes
// to stdout until it exits.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Runs the built switchyard binary with `arguments` (a shell-quoted string) and environment
// assignments `env` ("A=1 B=2"), stderr discarded or, with with_stderr, in the output.
inline CommandResult run_switchyard_with_env(const std::string& env, const std::string& arguments,
                                             bool with_stderr = false) {
  return run_command(env + " " + std::string(SWITCHYARD_BINARY) + " " + arguments + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

inline CommandResult run_switchyard(const std::string& arguments) { return run_switchyard_with_env("", arguments); }

inline std::string source_path(const std::string& relative) { return std::string(SWITCHYARD_SOURCE_DIR) + "/" + relative; }

// The object that `switchyard run --format json` prints as its last line of stdout (a failed check
// when there is none).
inline nlohmann::json run_json(const std::string& output) {
  const auto end = output.find_last_not_of('\n');
  const auto begin = end == std::string::npos ? std::string::npos : output.rfind('\n', end);
  const std::string line = end == std::string::npos ? "" : output.substr(begin == std::string::npos ? 0 : begin + 1, end - begin);
  const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
  REQUIRE_MESSAGE((doc.is_object() && doc.contains("generated_ids")), "no run --format json object in: " << output);
  return doc;
}

// Its generated ids, "1 2 3" (compared between runs).
inline std::string generated_ids(const std::string& output) {
  const nlohmann::json doc = run_json(output);  // kept: a loop over a temporary's member would dangle
  std::string ids;
  for (const auto& id : doc["generated_ids"]) ids += (ids.empty() ? "" : " ") + std::to_string(id.get<int>());
  return ids;
}

}  // namespace switchyard::testing
