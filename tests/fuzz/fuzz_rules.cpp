// libFuzzer target for the rule parser and the whole dry run behind `switchyard check`: the input
// is a profile's text. It is parsed (parse_rules), then checked against a few presets exactly as
// `check --arch P --optimize_config_path FILE` does (run_check), and check's reports are rendered
// (the table for each, the JSON document for the small ones). Diagnostics and InputError are the
// expected answers to bad input; any other exception, a crash, a sanitizer report, a broken
// promise (below), or an input that takes longer than libFuzzer's -timeout is a bug.
// Build and run: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "placement/check.h"
#include "placement/report.h"
#include "placement/rule_set.h"

namespace {

using namespace switchyard;

constexpr std::uint64_t kGiB = 1ULL << 30;

struct Target {
  const char* arch;
  std::vector<std::uint64_t> gpu_bytes;  // --gpu_memory: one value for every GPU, or one per GPU
  std::optional<std::uint64_t> cpu_bytes;
  const char* explained_module;          // --explain
  bool json;                             // --format json too (megabytes for a big model's plan)
  unsigned one_input_in;                 // checked for every input (1), or for one in N (by its hash)
};

// The tiny presets are cheap and cover every family's names. The two real sizes run under budgets
// a profile can break: DeepSeek-V2-Lite (27 layers, 7 k modules) on two GPUs for every input,
// DeepSeek-V3 (61 layers, 256 experts, 60 k modules, ~0.1 s a check instrumented) on the GPUs the
// profile names, for one input in 16.
const Target kTargets[] = {
    {"tiny-deepseek-v3", {}, std::nullopt, "model.layers.1.mlp.experts", true, 1},
    {"tiny-qwen3-moe", {}, std::nullopt, "model.layers.0.self_attn.q_proj", true, 1},
    {"tiny-mixtral", {}, std::nullopt, "model.layers.1.block_sparse_moe", true, 1},
    {"deepseek-v2-lite", {16 * kGiB, 16 * kGiB}, 64 * kGiB, "model.layers.26.mlp.experts.63", false, 1},
    {"deepseek-v3", {24 * kGiB}, 512 * kGiB, "model.layers.3.mlp.experts.255.down_proj", false, 16},
};

// FNV-1a: which inputs the sampled targets see, the same on every replay.
std::uint32_t input_hash(const std::string& text) {
  std::uint32_t hash = 2166136261u;
  for (char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  return hash;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_rules: %s\n", what.c_str());
  __builtin_trap();
}

// What every diagnostic promises: a code, a message, and a position inside the profile when it
// names the profile.
void check_diagnostics(const Diagnostics& diagnostics, const std::string& file, std::size_t lines) {
  for (const Diagnostic& d : diagnostics.items()) {
    if (d.code.empty() || d.message.empty()) fail("a diagnostic without a code or a message: " + format_diagnostic(d));
    if (d.location.file == file && (d.location.line < 0 || static_cast<std::size_t>(d.location.line) > lines + 1))
      fail("a diagnostic outside the profile's " + std::to_string(lines) + " lines: " + format_diagnostic(d));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string file = "fuzz.yaml";
  std::size_t lines = 1;
  for (char c : text) lines += c == '\n';
  try {
    Diagnostics diagnostics;
    const RuleSet rules = parse_rules(text, file, diagnostics);
    check_diagnostics(diagnostics, file, lines);
    for (const Rule& rule : rules.rules)
      if (rule.index < 0 || static_cast<std::size_t>(rule.index) >= rules.rules.size()) fail("a rule out of its own order");

    const std::uint32_t hash = input_hash(text);
    for (const Target& target : kTargets) {
      if (hash % target.one_input_in != 0) continue;
      CheckOptions options;
      options.model.arch = target.arch;
      options.profile = file;
      options.profile_text = text;
      options.budget.gpu_bytes = target.gpu_bytes;
      options.budget.cpu_bytes = target.cpu_bytes;
      const CheckResult result = run_check(options);
      check_diagnostics(result.diagnostics, file, lines);
      if (result.plan.visited.empty()) fail(std::string("no module placed on ") + target.arch);
      // What `check` prints, in both formats; dump() throws on text that is not UTF-8.
      (void)format_check_table(result, options.budget);
      if (target.json) (void)check_to_json(result, options.budget).dump(2);
      bool found = false;
      (void)explain_module(result, target.explained_module, found);
      if (!found) fail(std::string("explain does not know ") + target.explained_module);
    }
  } catch (const InputError&) {
  }
  return 0;
}
