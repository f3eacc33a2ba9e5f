// Profiles a hostile or careless user might write: every one gets located diagnostics (never a
// crash, a hang or unbounded memory), and values mean what PyYAML, which ktransformers uses, makes
// of them.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "core/text.h"
#include "placement/report.h"
#include "placement/rule_set.h"
#include "placement/yaml_reader.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;
using switchyard::core_testing::contains;
using switchyard::core_testing::input_error_message;
using switchyard::core_testing::SeededRng;
using switchyard::core_testing::TempDir;
using switchyard::core_testing::write_file;

namespace {

struct Parsed {
  RuleSet rules;
  Diagnostics diagnostics;
  double seconds = 0;
};

Parsed parse(const std::string& text) {
  Parsed parsed;
  const auto start = std::chrono::steady_clock::now();
  parsed.rules = parse_rules(text, "test.yaml", parsed.diagnostics);
  parsed.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return parsed;
}

std::vector<Diagnostic> with_code(const Diagnostics& diagnostics, const std::string& code) {
  std::vector<Diagnostic> found;
  for (const Diagnostic& d : diagnostics.items())
    if (d.code == code) found.push_back(d);
  return found;
}

// The one diagnostic with `code`; fails the test when there is not exactly one.
Diagnostic only(const Parsed& parsed, const std::string& code) {
  const auto found = with_code(parsed.diagnostics, code);
  INFO("diagnostics with code " << code);
  for (const Diagnostic& d : parsed.diagnostics.items()) INFO(format_diagnostic(d).substr(0, 400));
  REQUIRE(found.size() == 1);
  return found.front();
}

void require_clean(const Parsed& parsed) {
  for (const Diagnostic& d : parsed.diagnostics.items()) INFO(format_diagnostic(d).substr(0, 400));
  REQUIRE(parsed.diagnostics.items().empty());
}

// 1-based line and column of the `occurrence`-th (0-based) `needle` in `text`.
std::pair<int, int> position_of(const std::string& text, const std::string& needle, int occurrence = 0) {
  std::size_t at = text.find(needle);
  for (int i = 0; i < occurrence && at != std::string::npos; ++i) at = text.find(needle, at + 1);
  REQUIRE_MESSAGE(at != std::string::npos, "no " << needle << " in the test's own text");
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < at; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  return {line, static_cast<int>(at - line_start) + 1};
}

void check_at(const Diagnostic& d, const std::pair<int, int>& where) {
  CHECK(d.location.file == "test.yaml");
  CHECK(d.location.line == where.first);
  CHECK(d.location.column == where.second);
}

// A one-rule profile whose replace is `replace` (a flow mapping).
std::string rule_with(const std::string& replace) {
  return "- match: {name: \"^lm_head$\"}\n  replace: " + replace + "\n";
}
std::string rule_with_kwargs(const std::string& kwargs) { return rule_with("{class: default, kwargs: " + kwargs + "}"); }

// Runs `switchyard check` on `profile` (a file) in a child that may not run long or grow large, so
// that a crash, a hang or a memory blow-up is an exit status, not the end of this test binary.
CommandResult check_in_child(const std::filesystem::path& profile, const std::string& extra = "") {
  // An 8 GB address-space limit stands in for "memory does not grow without end" (not under ASan,
  // whose shadow memory needs far more address space).
  return run_switchyard_with_env(switchyard::testing::kAddressSanitizer ? "timeout 60" : "ulimit -v 8000000; timeout 60",
                                 "check --arch tiny-deepseek-v3 --optimize_config_path '" + profile.string() + "' " + extra,
                                 /*with_stderr=*/true);
}

// Nine levels of ten aliases, as in the report: each level repeats the one below ten times.
std::string alias_bomb(int levels, int fan_out) {
  std::string kwargs = "{generate_device: cpu, a0: &a0 [";
  for (int i = 0; i < fan_out; ++i) kwargs += i ? ", x" : "x";
  kwargs += "]";
  for (int level = 1; level < levels; ++level) {
    kwargs += ", a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < fan_out; ++i) kwargs += (i ? ", *a" : "*a") + std::to_string(level - 1);
    kwargs += "]";
  }
  return rule_with_kwargs(kwargs + "}");
}

// Nodes the aliases of alias_bomb(levels, fan_out) repeat: level k holds fan_out copies of level
// k-1, which has n(k-1) nodes (n(0) = fan_out + 1, n(k) = 1 + fan_out * n(k-1)).
std::uint64_t alias_bomb_nodes(int levels, int fan_out) {
  std::uint64_t below = static_cast<std::uint64_t>(fan_out) + 1, total = 0;
  for (int level = 1; level < levels; ++level) {
    total += static_cast<std::uint64_t>(fan_out) * below;
    below = 1 + static_cast<std::uint64_t>(fan_out) * below;
  }
  return total;
}

}  // namespace

// --- aliases ---

TEST_CASE("hostile profiles: an alias inside what it names is an error, not a stack overflow") {
  struct Case {
    std::string text;
    std::string alias;  // where the error points
  };
  const std::vector<Case> cases = {
      {rule_with_kwargs("{generate_device: cpu, x: &l [1, *l]}"), "*l"},
      {rule_with_kwargs("&m {generate_device: cpu, x: *m}"), "*m"},
      {rule_with_kwargs("{generate_device: cpu, x: &a {b: [{c: [*a]}]}}"), "*a"},
      {"- &r {match: {name: x}, replace: {class: default, kwargs: {generate_device: *r}}}\n", "*r"},
      {"&all [*all]\n", "*all"},
      {"- match: {name: x}\n  replace:\n    class: default\n    kwargs:\n      generate_device: cpu\n      x: &b\n"
       "        - 1\n        - *b\n",
       "*b"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const Parsed parsed = parse(c.text);
    const Diagnostic d = only(parsed, "yaml-recursive-alias");
    check_at(d, position_of(c.text, c.alias));
    CHECK(contains(d.message, "'" + c.alias + "'"));
    CHECK(contains(d.message, "recursive"));
    CHECK(check_yaml(c.text).diagnostics.has_errors());  // the whole check runs through it too
  }
  // The reported case, as a command: exit 1 (a bad profile), not a signal.
  TempDir dir;
  write_file(dir / "self.yaml", cases.front().text);
  const CommandResult run = check_in_child(dir / "self.yaml");
  INFO(run.output.substr(0, 2000));
  CHECK(run.exit_code == 1);
  CHECK(contains(run.output, "yaml-recursive-alias"));
}

TEST_CASE("hostile profiles: an alias bomb stops at 1 M expanded nodes, in bounded time") {
  const std::string bomb = alias_bomb(9, 10);
  CHECK(bomb.size() < 800);  // the reported 718-byte file, give or take the rule around it
  const Parsed parsed = parse(bomb);
  const Diagnostic d = only(parsed, "yaml-alias-expansion");
  CHECK(contains(d.message, "alias expansion past 1 M nodes"));
  CHECK(d.location.line == 2);
  CHECK(parsed.seconds < 5.0 * kBuildSlowdown);

  TempDir dir;
  write_file(dir / "bomb.yaml", bomb);
  const CommandResult run = check_in_child(dir / "bomb.yaml");
  INFO(run.output.substr(0, 2000));
  CHECK(run.exit_code == 1);
  CHECK(contains(run.output, "alias expansion past 1 M nodes"));
}

TEST_CASE("hostile profiles: alias expansion is refused exactly past its limit") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  for (int trial = 0; trial < 8; ++trial) {
    const int levels = static_cast<int>(rng.between(2, 7));
    const int fan_out = static_cast<int>(rng.between(2, 14));
    const std::uint64_t nodes = alias_bomb_nodes(levels, fan_out);
    CAPTURE(levels);
    CAPTURE(fan_out);
    CAPTURE(nodes);
    const Parsed parsed = parse(alias_bomb(levels, fan_out));
    CHECK(with_code(parsed.diagnostics, "yaml-alias-expansion").size() == (nodes > kMaxYamlAliasNodes ? 1u : 0u));
    CHECK(parsed.seconds < 10.0 * kBuildSlowdown);
  }
  // Just under and just over the limit, whatever the seed: 986,079 and 1,117,280 nodes.
  for (const auto& [levels, fan_out] : {std::pair{4, 31}, std::pair{4, 32}}) {
    const std::uint64_t nodes = alias_bomb_nodes(levels, fan_out);
    CAPTURE(nodes);
    const Parsed parsed = parse(alias_bomb(levels, fan_out));
    CHECK(with_code(parsed.diagnostics, "yaml-alias-expansion").size() == (nodes > kMaxYamlAliasNodes ? 1u : 0u));
  }
}

TEST_CASE("hostile profiles: aliases that repeat a large text are bounded by bytes too") {
  // 300 aliases of a 64 KiB value repeat 19 MiB of text in few nodes.
  std::string text = "- match: {name: &big \"" + std::string(64 * 1024, 'a') + "\"}\n  replace: {class: default}\n";
  for (int i = 0; i < 300; ++i) text += "- match: {name: *big}\n  replace: {class: default}\n";
  const Parsed parsed = parse(text);
  const Diagnostic d = only(parsed, "yaml-alias-expansion");
  CHECK(contains(d.message, "16 MiB"));
  CHECK(parsed.seconds < 10.0 * kBuildSlowdown);
}

TEST_CASE("hostile profiles: ordinary anchors and aliases still mean what they repeat") {
  const std::string text = R"(- match: {name: "^model\\.embed_tokens$"}
  replace: {class: default, kwargs: &cpu {generate_device: cpu, prefill_device: cpu}}
- match: {name: &head "^lm_head$"}
  replace: {class: default, kwargs: *cpu}
- match: {name: *head}
  replace: {class: default, kwargs: {generate_device: &gpu "cuda:0", prefill_device: *gpu}}
)";
  const Parsed parsed = parse(text);
  require_clean(parsed);
  REQUIRE(parsed.rules.rules.size() == 3);
  CHECK(parsed.rules.rules[1].kwargs == parsed.rules.rules[0].kwargs);
  CHECK(parsed.rules.rules[1].generate_device == Device::cpu());
  CHECK(parsed.rules.rules[2].name_pattern == "^lm_head$");
  CHECK(parsed.rules.rules[2].prefill_device == Device::cuda(0));
}

TEST_CASE("hostile profiles: a repeated anchor is refused, as PyYAML refuses it") {
  const std::string text = rule_with_kwargs("{generate_device: &d cpu, prefill_device: &d cpu}");
  const Diagnostic d = only(parse(text), "yaml-duplicate-anchor");
  check_at(d, position_of(text, "&d", 1));
  CHECK(contains(d.message, "first at line 2"));
}

// --- depth ---

TEST_CASE("hostile profiles: nesting deeper than 256 says so, in any style and at any depth") {
  const auto nested = [](std::size_t depth, int style) {
    std::string text;
    switch (style) {
      case 0: return std::string(depth, '[') + std::string(depth, ']');  // flow lists
      case 1:                                                             // flow mappings
        for (std::size_t i = 0; i < depth; ++i) text += "{a: ";
        return text + "b" + std::string(depth, '}');
      case 2:  // block lists, one level a line
        for (std::size_t i = 0; i < depth; ++i) text += std::string(i, ' ') + "-\n";
        return text + std::string(depth, ' ') + "x\n";
      default:  // block mappings
        for (std::size_t i = 0; i < depth; ++i) text += std::string(i, ' ') + "a:\n";
        return text + std::string(depth, ' ') + "x\n";
    }
  };
  for (int style = 0; style < 4; ++style) {
    for (const std::size_t depth : {std::size_t{10}, std::size_t{256}, std::size_t{257}, std::size_t{600},
                                    std::size_t{3000}}) {
      CAPTURE(style);
      CAPTURE(depth);
      const Parsed parsed = parse(nested(depth, style));
      const auto deep = with_code(parsed.diagnostics, "yaml-too-deep");
      CHECK(with_code(parsed.diagnostics, "yaml-syntax").empty());
      if (depth <= kMaxYamlDepth) {
        CHECK(deep.empty());
      } else {
        REQUIRE(deep.size() == 1);
        CHECK(contains(deep[0].message, "YAML nesting deeper than 256"));
        CHECK(deep[0].location.line > 0);
      }
    }
  }
}

TEST_CASE("hostile profiles: 100,000 and 2,000,000 unclosed brackets are 'too deep', quickly") {
  for (const std::size_t count : {std::size_t{100'000}, std::size_t{2'000'000}}) {
    for (const char bracket : {'[', '{'}) {
      CAPTURE(count);
      CAPTURE(bracket);
      const Parsed parsed = parse(std::string(count, bracket));
      const Diagnostic d = only(parsed, "yaml-too-deep");
      CHECK(contains(d.message, "YAML nesting deeper than 256"));
      CHECK(parsed.seconds < 10.0 * kBuildSlowdown);
    }
  }
  // Inside a rule's kwargs, as reported.
  const std::string text = rule_with_kwargs("{generate_device: cpu, x: " + std::string(100000, '[') +
                                            std::string(100000, ']') + "}");
  const auto [line, column] = position_of(text, "[");
  // The list of rules and three mappings hold it, so the 253rd '[' opens the 257th level.
  check_at(only(parse(text), "yaml-too-deep"), {line, column + 252});
}

// --- size ---

TEST_CASE("hostile profiles: a kwargs mapping of 200,000 keys is linear work") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  constexpr int kKeys = 200'000;
  std::string keys;
  for (int i = 0; i < kKeys; ++i) keys += (i ? ", k" : "k") + std::to_string(i) + ": " + std::to_string(i * 7);

  // As kwargs: each is an unknown kwarg; the first kMaxProfileProblems are listed, then parsing stops.
  const Parsed flat = parse(rule_with_kwargs("{" + keys + "}"));
  CHECK(with_code(flat.diagnostics, "unknown-kwarg").size() == kMaxProfileProblems);
  CHECK(with_code(flat.diagnostics, "too-many-problems").size() == 1);
  CHECK(flat.seconds < 10.0 * kBuildSlowdown);

  // As one kwarg's value: one error, and the value kept whole in the rule's kwargs.
  const Parsed nested = parse(rule_with_kwargs("{generate_device: {" + keys + "}}"));
  CHECK(only(nested, "bad-device").location.line == 2);
  REQUIRE(nested.rules.rules.size() == 1);
  const auto& value = nested.rules.rules[0].kwargs.at("generate_device");
  REQUIRE(value.size() == static_cast<std::size_t>(kKeys));
  const int probe = static_cast<int>(rng.below(kKeys));
  CHECK(value.at("k" + std::to_string(probe)) == probe * 7);
  CHECK(nested.seconds < 10.0 * kBuildSlowdown);
}

TEST_CASE("hostile profiles: a list of 200,000 non-rules stops after the first problems") {
  std::string text;
  for (int i = 0; i < 200'000; ++i) text += "- " + std::to_string(i) + "\n";
  const Parsed parsed = parse(text);
  CHECK(with_code(parsed.diagnostics, "rule-not-a-mapping").size() == kMaxProfileProblems);
  const Diagnostic stop = only(parsed, "too-many-problems");
  CHECK(contains(stop.message, "in rule #1000 of 200000"));
  CHECK(parsed.rules.rules.size() == kMaxProfileProblems);
  CHECK(parsed.seconds < 10.0 * kBuildSlowdown);
}

TEST_CASE("hostile profiles: more than 4 M YAML nodes are refused") {
  std::string text;
  text.reserve(4 * (kMaxYamlNodes + 2));
  for (std::size_t i = 0; i <= kMaxYamlNodes; ++i) text += "- 0\n";
  const Parsed parsed = parse(text);
  const Diagnostic d = only(parsed, "yaml-too-many-nodes");
  CHECK(contains(d.message, "more than 4 M YAML nodes"));
  CHECK(d.location.line == static_cast<int>(kMaxYamlNodes));  // the list itself is the first node
  CHECK(parsed.rules.rules.empty());
}

TEST_CASE("hostile profiles: one value past 1 MiB is refused, not read into memory whole") {
  // A scalar, and a flow list where yaml-cpp would keep every token before reporting any.
  const std::string scalar = rule_with("{class: \"" + std::string(2 << 20, 'x') + "\"}");
  std::string list = "- [";
  for (int i = 0; i < 1'500'000; ++i) list += "a,";
  list += "]\n";
  for (const std::string* text : {&scalar, static_cast<const std::string*>(&list)}) {
    const Parsed parsed = parse(*text);
    const Diagnostic d = only(parsed, "yaml-value-too-large");
    CHECK(contains(d.message, "larger than 1 MiB"));
    CHECK(d.message.size() < 400);
    CHECK(parsed.seconds < 10.0 * kBuildSlowdown);
  }
  // Under the limit, a long value is read (and echoed shortened where it is wrong).
  const Parsed long_class = parse(rule_with("{class: \"" + std::string(500'000, 'x') + "\"}"));
  CHECK(only(long_class, "unknown-class").message.size() < 400);
}

// --- what values mean ---

TEST_CASE("hostile profiles: a repeated key is an error at its second place, naming PyYAML's choice") {
  struct Case {
    std::string text;
    std::string second;  // text at the repeated key
    std::string later;   // the value PyYAML keeps, as the message shows it
  };
  const std::vector<Case> cases = {
      {"- match: {name: \"^a$\", name: \"^lm_head$\"}\n  replace: {class: default}\n", "name: \"^lm", "'^lm_head$'"},
      {"- match: {name: x}\n  replace: {class: MLP}\n  replace: {class: default}\n", "replace: {class: default",
       "a mapping"},
      {"- match: {name: x}\n  replace: {class: MLP, class: default}\n", "class: default", "'default'"},
      {rule_with_kwargs("{generate_device: cpu, prefill_device: cpu, generate_device: \"cuda:0\"}"),
       "generate_device: \"cuda", "'cuda:0'"},
      {"- match: {name: x}\n  recursive: false\n  replace: {class: default}\n  recursive: true\n", "recursive: true",
       "'true'"},
      {rule_with("{class: Model, kwargs: {transfer_map: {3: \"cuda:1\", 03: \"cuda:2\"}}}"), "03", "'cuda:2'"},
      {rule_with("{class: Model, kwargs: {transfer_map: {1: \"cuda:1\", 0x1: \"cuda:3\"}}}"), "0x1", "'cuda:3'"},
      {"match: {name: x}\nmatch: {name: y}\n", "match: {name: y", "a mapping"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const Parsed parsed = parse(c.text);
    const Diagnostic d = only(parsed, "yaml-duplicate-key");
    check_at(d, position_of(c.text, c.second));
    CHECK(contains(d.message, "PyYAML"));
    CHECK(contains(d.message, "later value, " + c.later));
  }
  // The later value is the one used, as in ktransformers.
  CHECK(parse(cases[0].text).rules.rules[0].name_pattern == "^lm_head$");
  CHECK(parse(cases[2].text).rules.rules[0].replace_text == "default");
  CHECK(parse(cases[3].text).rules.rules[0].generate_device == Device::cuda(0));
  CHECK(parse(cases[4].text).rules.rules[0].recursive);
  const Parsed map = parse(cases[5].text);
  REQUIRE(map.rules.rules[0].transfer_map.size() == 1);
  CHECK(map.rules.rules[0].transfer_map[0].device == Device::cuda(2));
}

TEST_CASE("hostile profiles: a repeated kwarg is found wherever it stands") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  std::vector<std::string> lines = {"generate_device: cpu", "prefill_device: cpu", "generate_op: KLinearTorch",
                                    "prefill_op: KLinearTorch"};
  std::shuffle(lines.begin(), lines.end(), rng.engine);
  const std::size_t repeated = rng.below(lines.size());
  const std::size_t insert_at = repeated + 1 + rng.below(lines.size() - repeated);
  lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(insert_at), lines[repeated]);
  std::string text = "- match: {name: x}\n  replace:\n    class: Linear\n    kwargs:\n";
  for (const std::string& line : lines) text += "      " + line + "\n";
  CAPTURE(text);
  const Diagnostic d = only(parse(text), "yaml-duplicate-key");
  CHECK(d.location.line == 5 + static_cast<int>(insert_at));
  CHECK(d.location.column == 7);
}

TEST_CASE("hostile profiles: a second YAML document is an error; markers around one are not") {
  const std::string rule = "- match: {name: x}\n  replace: {class: default}\n";
  for (const std::string& second : {std::string("---\n- bad\n"), std::string("...\n---\n- {}\n"), std::string("--- \n"),
                                    std::string("--- # another\n") + rule}) {
    const std::string text = rule + second;
    CAPTURE(text);
    const Diagnostic d = only(parse(text), "yaml-second-document");
    check_at(d, position_of(text, "---"));
  }
  for (const std::string& text : {"---\n" + rule, rule + "...\n", "--- \n" + rule + "...\n# done\n"}) {
    CAPTURE(text);
    require_clean(parse(text));
  }
}

TEST_CASE("hostile profiles: integers read as PyYAML reads them (YAML 1.1)") {
  struct Case {
    const char* text;
    std::optional<long long> value;  // nullopt: not an integer
    bool octal = false;
    bool out_of_range = false;
  };
  // Expected values as PyYAML 6 reads "x: <text>".
  const Case cases[] = {
      {"010", 8, true},        {"-010", -8, true},    {"0_10", 8, true},      {"07", 7},
      {"0_7", 7},              {"00", 0},             {"0", 0},               {"-0", 0},
      {"+12", 12},             {"1_000", 1000},       {"1__2", 12},           {"1_", 1},
      {"0x1f", 31},            {"+0x1F", 31},         {"0x_1", 1},            {"0b101", 5},
      {"-0b11", -3},           {"1:30", 90},          {"-1:30", -90},         {"1:5", 65},
      {"1:05", 65},            {"1:5:7", 3907},       {"190:20:30", 685230},  {"9223372036854775807", 9223372036854775807},
      {"-9223372036854775808", std::numeric_limits<long long>::min()},
      {"0x7fffffffffffffff", 9223372036854775807},
      {"9223372036854775808", 0, false, true},          {"99999999999999999999999", 0, false, true},
      {"08", std::nullopt},    {"09", std::nullopt},  {"0o10", std::nullopt}, {"0X10", std::nullopt},
      {"1e3", std::nullopt},   {"1.0", std::nullopt}, {"0x", std::nullopt},   {"0b", std::nullopt},
      {"0b_", std::nullopt},   {"1:60", std::nullopt}, {"0:30", std::nullopt}, {"1:_5", std::nullopt},
      {"_1", std::nullopt},    {"+", std::nullopt},   {"", std::nullopt},     {"1 2", std::nullopt},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const auto parsed = parse_yaml_integer(c.text);
    REQUIRE(parsed.has_value() == (c.value.has_value() || c.out_of_range));
    if (!parsed) continue;
    CHECK(parsed->out_of_range == c.out_of_range);
    if (!c.out_of_range) CHECK(parsed->value == *c.value);
    CHECK(parsed->octal == c.octal);
  }
}

TEST_CASE("hostile profiles: any integer written in any YAML 1.1 form reads back as itself") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const auto in_base = [](std::uint64_t magnitude, unsigned base) {
    std::string digits;
    do digits.insert(digits.begin(), "0123456789abcdef"[magnitude % base]);
    while ((magnitude /= base) > 0);
    return digits;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    const long long value = rng.between(-1'000'000'000'000'000LL, 1'000'000'000'000'000LL);
    const std::uint64_t magnitude = value < 0 ? static_cast<std::uint64_t>(-value) : static_cast<std::uint64_t>(value);
    std::string body;
    switch (rng.below(5)) {
      case 0: body = in_base(magnitude, 10); break;
      case 1: body = "0" + in_base(magnitude, 8); break;
      case 2: body = "0x" + in_base(magnitude, 16); break;
      case 3: body = "0b" + in_base(magnitude, 2); break;
      default: {  // sexagesimal: needs a first part of 1-9..., so only for 60 and up
        if (magnitude < 60) {
          body = in_base(magnitude, 10);
          break;
        }
        std::uint64_t rest = magnitude;
        std::vector<std::uint64_t> parts;
        while (rest >= 60) parts.push_back(rest % 60), rest /= 60;
        body = std::to_string(rest);
        for (auto it = parts.rbegin(); it != parts.rend(); ++it)
          body += ":" + std::string(*it < 10 && rng.below(2) ? "0" : "") + std::to_string(*it);
      }
    }
    // Underscores anywhere after the first digit, where the form allows them (not in ':' parts).
    if (body.find(':') == std::string::npos && body.size() > 2 && rng.below(2)) {
      const std::size_t prefix = body.size() > 1 && (body[1] == 'x' || body[1] == 'b') ? 2 : 1;
      body.insert(prefix + rng.below(body.size() - prefix + 1), "_");
    }
    const std::string text = (value < 0 ? "-" : (rng.below(4) == 0 ? "+" : "")) + body;
    CAPTURE(text);
    const auto parsed = parse_yaml_integer(text);
    REQUIRE(parsed.has_value());
    CHECK_FALSE(parsed->out_of_range);
    CHECK(parsed->value == value);
  }
}

TEST_CASE("hostile profiles: a transfer_map key 010 is layer 8, with a warning that says so") {
  const std::string text = rule_with(
      "{class: Model, kwargs: {transfer_map: {010: \"cuda:1\", 0x10: \"cuda:2\", 2_0: \"cuda:3\", 0b11: \"cuda:4\", "
      "1:00: \"cuda:5\", 07: \"cuda:6\"}}}");
  const Parsed parsed = parse(text);
  const Diagnostic octal = only(parsed, "octal-integer");
  CHECK(octal.severity == Severity::warning);
  check_at(octal, position_of(text, "010"));
  CHECK(contains(octal.message, "reads it as 8"));
  CHECK(contains(octal.message, "or 10 without the leading zero"));
  CHECK(parsed.diagnostics.count(Severity::error) == 0);
  REQUIRE(parsed.rules.rules.size() == 1);
  std::vector<std::pair<int, Device>> layers;
  for (const TransferMapEntry& e : parsed.rules.rules[0].transfer_map) layers.emplace_back(e.layer, e.device);
  const std::vector<std::pair<int, Device>> expected = {{3, Device::cuda(4)},  {7, Device::cuda(6)},  {8, Device::cuda(1)},
                                                        {16, Device::cuda(2)}, {20, Device::cuda(3)}, {60, Device::cuda(5)}};
  CHECK(layers == expected);

  // Keys that are not layer numbers in YAML 1.1, each with why.
  for (const auto& [key, hint] : {std::pair<std::string, std::string>{"08", "must be a layer number"},
                                  {"\"10\"", "quoted, so a string"},
                                  {"'3'", "quoted, so a string"},
                                  {"1e3", "must be a layer number"},
                                  {"-1", "must be a layer number"},
                                  {"99999999999999999999", "must be a layer number"}}) {
    const std::string bad = rule_with("{class: Model, kwargs: {transfer_map: {" + key + ": \"cuda:1\"}}}");
    CAPTURE(bad);
    const Diagnostic d = only(parse(bad), "type-mismatch");
    check_at(d, position_of(bad, key + ":"));
    CHECK(contains(d.message, hint));
  }
}

TEST_CASE("hostile profiles: integer kwargs have ranges") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  struct Kwarg {
    std::string replace, name;
    long long low, high;
  };
  const Kwarg kwargs[] = {{"MLA", "chunk_size", 1, 1 << 20},
                          {"MLA", "chunck_size", 1, 1 << 20},
                          {"Model", "per_layer_prefill_intput_threshold", 0, 2147483647}};
  for (const Kwarg& k : kwargs) {
    const auto check_value = [&](const std::string& written, bool accepted) {
      const std::string text = rule_with("{class: " + k.replace + ", kwargs: {" + k.name + ": " + written + "}}");
      CAPTURE(text);
      const Parsed parsed = parse(text);
      if (accepted) {
        CHECK(parsed.diagnostics.count(Severity::error) == 0);
        return;
      }
      const Diagnostic d = only(parsed, "kwarg-out-of-range");
      check_at(d, position_of(text, written + "}"));
      CHECK(contains(d.message, "from " + std::to_string(k.low) + " to " + std::to_string(k.high)));
    };
    check_value(std::to_string(k.low), true);
    check_value(std::to_string(k.high), true);
    check_value(std::to_string(k.low - 1), false);
    check_value(std::to_string(k.high + 1), false);
    check_value("-5", false);
    check_value("99999999999999999999", false);
    check_value(std::to_string(rng.between(k.low, k.high)), true);
    check_value(std::to_string(rng.between(k.high + 1, k.high + 1'000'000'000)), false);
    check_value(std::to_string(rng.between(-1'000'000'000, k.low - 1)), false);
  }
  // Octal, hex and sexagesimal are integers too; an octal one is said to be.
  const Parsed octal = parse(rule_with("{class: MLA, kwargs: {chunk_size: 0100}}"));
  CHECK(octal.diagnostics.count(Severity::error) == 0);
  CHECK(contains(only(octal, "octal-integer").message, "reads it as 64"));
  CHECK(octal.rules.rules[0].kwargs.at("chunk_size") == 64);
  const Parsed hex = parse(rule_with("{class: MLA, kwargs: {chunk_size: 0x400}}"));
  CHECK(hex.diagnostics.items().empty());
  CHECK(hex.rules.rules[0].kwargs.at("chunk_size") == 1024);
  CHECK(contains(only(parse(rule_with("{class: MLA, kwargs: {chunk_size: \"512\"}}")), "type-mismatch").message,
                 "quoted, so a string"));
}

TEST_CASE("hostile profiles: unknown tags are errors naming the tag; the standard ones keep their meaning") {
  // Pairs, not structured bindings, in these loops: clang 14 cannot capture a binding in CAPTURE.
  for (const auto& text_tag : std::vector<std::pair<std::string, std::string>>{
           {"- match: {name: !foo x}\n  replace: {class: default}\n", "!foo"},
           {rule_with_kwargs("{generate_device: !!python/object:os.system {}}"), "!!python/object:os.system"},
           {rule_with_kwargs("!!python/object/apply:os.system [\"ls\"]"), "!!python/object/apply:os.system"},
           {rule_with_kwargs("{generate_device: !!binary Y3B1}"), "!!binary"},
           {rule_with_kwargs("!!set {generate_device}"), "!!set"},
           {rule_with_kwargs("{generate_device: !!timestamp 2001-12-14}"), "!!timestamp"},
           {"%TAG !e! tag:example.com,2000:\n---\n- !e!rule {match: {name: x}, replace: {class: default}}\n",
            "!<tag:example.com,2000:rule>"},
       }) {
    const std::string& text = text_tag.first;
    const std::string& tag = text_tag.second;
    CAPTURE(text);
    const Diagnostic d = only(parse(text), "yaml-unknown-tag");
    CHECK(contains(d.message, "'" + tag + "'"));
    CHECK(d.location.line > 0);
  }
  // Standard tags: accepted, with their meaning.
  const std::string tagged = R"(!!seq
- !!map
  match: !!map {name: !!str "^lm_head$"}
  replace: {class: !!str Model, kwargs: !!map {transfer_map: {!!int "3": "cuda:1", !!int 0x4: !!str "cuda:2"}}}
  recursive: !!bool "false"
- match: {name: x}
  replace: {class: MLA, kwargs: {chunk_size: !!int "0x10", absorb_for_prefill: !!bool YES}}
- match: {name: y}
  replace: {class: default, kwargs: !!null}
- match: {name: !!str 10}
  replace: {class: default, kwargs: {generate_device: ! cpu}}
)";
  const Parsed parsed = parse(tagged);
  require_clean(parsed);
  REQUIRE(parsed.rules.rules.size() == 4);
  CHECK_FALSE(parsed.rules.rules[0].recursive);
  REQUIRE(parsed.rules.rules[0].transfer_map.size() == 2);
  CHECK(parsed.rules.rules[0].transfer_map[0].layer == 3);
  CHECK(parsed.rules.rules[0].transfer_map[1].layer == 4);
  CHECK(parsed.rules.rules[1].kwargs.at("chunk_size") == 16);
  CHECK(parsed.rules.rules[1].kwargs.at("absorb_for_prefill") == true);
  CHECK(parsed.rules.rules[2].kwargs.empty());
  CHECK(parsed.rules.rules[3].name_pattern == "10");
  CHECK(parsed.rules.rules[3].generate_device == Device::cpu());
  // !!str makes a string of what would be a number, and a tagged value must be what its tag says.
  CHECK(contains(only(parse(rule_with("{class: Model, kwargs: {transfer_map: {!!str 3: \"cuda:1\"}}}")), "type-mismatch")
                     .message,
                 "must be a layer number"));
  for (const auto& text_code : std::vector<std::pair<std::string, std::string>>{
           {rule_with("{class: MLA, kwargs: {chunk_size: !!int abc}}"), "yaml-bad-tagged-value"},
           {rule_with("{class: MLA, kwargs: {chunk_size: !!float many}}"), "yaml-bad-tagged-value"},
           {rule_with("{class: MLA, kwargs: {absorb_for_prefill: !!bool maybe}}"), "yaml-bad-tagged-value"},
           {rule_with_kwargs("!!map [generate_device]"), "yaml-tag-mismatch"},
           {rule_with_kwargs("!!str {generate_device: cpu}"), "yaml-tag-mismatch"},
           {rule_with_kwargs("{generate_device: !!seq cpu}"), "yaml-tag-mismatch"}}) {
    const std::string& text = text_code.first;
    const std::string& code = text_code.second;
    CAPTURE(text);
    CHECK(only(parse(text), code).location.line == 2);
  }
}

TEST_CASE("hostile profiles: YAML 1.1 booleans, nulls and floats in kwargs keep their type in reports") {
  const Parsed parsed = parse(rule_with(
      "{class: MLA, kwargs: {absorb_for_prefill: on, x: [yes, No, ~, null, '', 1.5, 1e3, .5, -.inf, 1:30.5, 0o7]}}"));
  REQUIRE(parsed.rules.rules.size() == 1);
  const nlohmann::ordered_json& kwargs = parsed.rules.rules[0].kwargs;
  CHECK(kwargs.at("absorb_for_prefill") == true);
  const nlohmann::ordered_json expected =
      nlohmann::ordered_json::parse(R"([true, false, null, null, "", 1.5, "1e3", 0.5, "-.inf", 90.5, "0o7"])");
  CHECK(kwargs.at("x") == expected);
}

// --- echoes ---

TEST_CASE("hostile profiles: user text in messages is shortened, whatever its length") {
  const std::string huge(300'000, 'q');
  const std::string key(1000, 'k');  // a simple key is at most 1024 characters in YAML
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"- match: {name: \"(" + huge + "\"}\n  replace: {class: default}\n", "regex-compile"},
      {"- match: {name: x, " + key + ": 1}\n  replace: {class: default}\n", "unknown-key"},
      {"- match:\n    name: x\n    ? " + huge + "\n    : 1\n  replace: {class: default}\n", "unknown-key"},
      {"- match: {class: " + huge + "}\n  replace: {class: default}\n", "unknown-match-class"},
      {rule_with("{class: " + huge + "}"), "unknown-class"},
      {rule_with_kwargs("{" + key + ": 1}"), "unknown-kwarg"},
      {rule_with_kwargs("{generate_device: " + huge + "}"), "bad-device"},
      {rule_with("{class: Linear, kwargs: {generate_op: " + huge + "}}"), "unknown-op"},
      {rule_with("{class: Experts, kwargs: {backend: " + huge + "}}"), "bad-kwarg-value"},
      {"- match: {name: x}\n  replace: {class: default}\n  recursive: " + huge + "\n", "type-mismatch"},
      {rule_with("{class: MLA, kwargs: {chunk_size: 1" + std::string(200'000, '0') + "}}"), "kwarg-out-of-range"},
      {"- match: {name: x}\n  replace: {class: default}\n- " + huge + "\n", "rule-not-a-mapping"},
      {"- match: {name: x, name: " + huge + "}\n  replace: {class: default}\n", "yaml-duplicate-key"},
      {"- match: {name: !" + huge + " x}\n  replace: {class: default}\n", "yaml-unknown-tag"},
  };
  const auto start = std::chrono::steady_clock::now();
  for (const auto& text_code : cases) {
    const std::string& text = text_code.first;
    const std::string& code = text_code.second;
    CAPTURE(code);
    const Diagnostic d = only(parse(text), code);
    CHECK(d.message.size() < 600);
    CHECK(contains(d.message, "characters)"));
  }
  // yaml-cpp's own messages are kept short too (an undefined anchor's name could be any length).
  CHECK(only(parse("- match: {name: *" + huge + "}\n  replace: {class: default}\n"), "yaml-syntax").message.size() < 600);
  // Did-you-mean compares only candidates of a plausible length: no 300,000 x 60 edit distances.
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 10.0);
}

TEST_CASE("hostile profiles: a long regex that compiles is shortened in the check's findings too") {
  // PCRE2 compiles patterns up to about 64K code units; these are near that, and valid.
  const std::string dead = "- match: {name: \"^nomatch" + std::string(30'000, 'n') + "$\"}\n  replace: {class: default}\n";
  CHECK(only(check_yaml(dead), "dead-rule").message.size() < 600);
  const std::string runaway =
      "- match: {name: \"^((\\\\w|\\\\.)+)+[^\\\\w.]|" + std::string(30'000, 'z') + "\"}\n  replace: {class: default}\n";
  CHECK(only(check_yaml(runaway), "regex-match-limit").message.size() < 600);
  TempDir dir;
  write_file(dir / "dead.yaml", dead);
  const CommandResult explain = run_switchyard("check --arch tiny-deepseek-v3 --explain model.norm --optimize_config_path '" +
                                               (dir / "dead.yaml").string() + "'");
  CHECK(explain.exit_code == 0);
  CHECK(contains(explain.output, "(30009 characters)"));
  std::size_t longest = 0;
  for (std::size_t start = 0; start < explain.output.size();) {
    const std::size_t end = std::min(explain.output.find('\n', start), explain.output.size());
    longest = std::max(longest, end - start);
    start = end + 1;
  }
  CHECK(longest < 600);
}

TEST_CASE("hostile profiles: a shortened echo is one line of valid UTF-8") {
  CHECK(quoted_excerpt("lm_head") == "'lm_head'");
  CHECK(quoted_excerpt("a\nb\tc\x7f") == "'a\\x0Ab\\x09c\\x7F'");
  CHECK(quoted_excerpt("\xff\xfe") == "'\\xFF\\xFE'");
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xc3\xa9";  // é
  const std::string cut = quoted_excerpt(accents);
  std::string kept;
  for (int i = 0; i < static_cast<int>(kExcerptCharacters); ++i) kept += "\xc3\xa9";
  CHECK(cut == "'" + kept + "\xe2\x80\xa6' (200 characters)");

  SeededRng rng;
  INFO("seed " << rng.seed);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string text = rng.bytes(rng.below(1000));
    const std::string echo = quoted_excerpt(text);
    CHECK(echo.find('\n') == std::string::npos);
    CHECK(echo.size() <= 4 * kExcerptCharacters + 40);
    char32_t c = 0;
    for (std::size_t i = 0; i < echo.size();) {
      const std::size_t length = decode_utf8(echo, i, c);
      REQUIRE(length > 0);
      CHECK(c >= 0x20);
      i += length;
    }
  }
  // Escapes in a double-quoted value reach the message as text, not as control bytes.
  const Diagnostic d = only(parse("- match: {class: \"a\\0b\\x01\\n\"}\n  replace: {class: default}\n"),
                            "unknown-match-class");
  CHECK(contains(d.message, "'a\\x00b\\x01\\x0A'"));
}

TEST_CASE("hostile profiles: check --format json stays a small document with a huge regex") {
  TempDir dir;
  write_file(dir / "regex.yaml", "- match: {name: \"(" + std::string(900'000, 'r') + "\"}\n  replace: {class: default}\n");
  const CommandResult run = run_switchyard("check --arch tiny-deepseek-v3 --format json --optimize_config_path '" +
                                           (dir / "regex.yaml").string() + "'");
  CHECK(run.exit_code == 1);
  CHECK(run.output.size() < 200'000);
  const auto document = nlohmann::json::parse(run.output, nullptr, /*allow_exceptions=*/false);
  CHECK_FALSE(document.is_discarded());
}

// --- bytes and files ---

TEST_CASE("hostile profiles: bytes that are not UTF-8 text are refused where they are") {
  const std::string rule = "- match: {name: x}\n  replace: {class: default}\n";
  for (const auto& [bad, what] : std::vector<std::pair<std::string, std::string>>{{"\xff", "byte 0xFF is not UTF-8"},
                                                                                 {"\xc3", "byte 0xC3 is not UTF-8"},
                                                                                 {"\xed\xa0\x80", "byte 0xED"},
                                                                                 {"\xc0\xaf", "byte 0xC0"},
                                                                                 {std::string(1, '\0'), "U+0000"},
                                                                                 {"\x1b", "U+001B"},
                                                                                 {"\xc2\x9b", "U+009B"},
                                                                                 {"\xef\xbf\xbe", "U+FFFE"}}) {
    const std::string text = rule + "- match: {name: \"a" + bad + "b\"}\n  replace: {class: default}\n";
    CAPTURE(text);
    const Diagnostic d = only(parse(text), "yaml-bad-character");
    CHECK(d.location.line == 3);
    CHECK(d.location.column == 19);
    CHECK(contains(d.message, what));
  }
  // UTF-8 itself is fine, a BOM included.
  require_clean(parse("\xef\xbb\xbf- match: {name: \"caf\xc3\xa9|\xe6\xbc\xa2|\xf0\x9f\x98\x80\"}\n  replace: {class: default}\n"));
}

TEST_CASE("hostile profiles: random bytes and mutated shipped profiles give diagnostics, never an exception") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  std::vector<std::string> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(source_path("optimize_rules")))
    seeds.push_back(read_input_file(entry.path(), "profile", kMaxProfileBytes));
  REQUIRE_FALSE(seeds.empty());
  const std::string alphabet = "-:[]{},&*!|>'\"#%@` \n\t?~0123456789abcxyz.\\";
  for (int trial = 0; trial < 1000; ++trial) {
    std::string text;
    if (trial % 3 == 0) {
      text = rng.bytes(rng.below(2000));
    } else {
      text = seeds[rng.below(seeds.size())];
      const int edits = static_cast<int>(rng.between(1, 20));
      for (int e = 0; e < edits && !text.empty(); ++e) {
        const std::size_t at = rng.below(text.size());
        switch (rng.below(4)) {
          case 0: text[at] = alphabet[rng.below(alphabet.size())]; break;
          case 1: text.insert(at, 1, alphabet[rng.below(alphabet.size())]); break;
          case 2: text.erase(at, rng.below(8) + 1); break;
          default: text.insert(at, text.substr(rng.below(text.size()), rng.below(64))); break;
        }
      }
    }
    CAPTURE(trial);
    Diagnostics diagnostics;
    CHECK_NOTHROW(parse_rules(text, "fuzz.yaml", diagnostics));
    CHECK_NOTHROW(check_yaml(text));
  }
}

TEST_CASE("hostile profiles: the rules file must be a regular file of at most 64 MiB") {
  TempDir dir;
  Diagnostics diagnostics;
  const auto refusal = [&](const std::filesystem::path& file) {
    const auto start = std::chrono::steady_clock::now();
    const std::string message = input_error_message([&] { load_rules(file, diagnostics); });
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0);
    return message;
  };
  for (const char* device : {"/dev/zero", "/dev/urandom", "/dev/null"})
    if (std::filesystem::exists(device)) CHECK(contains(refusal(device), "is a character device"));
  REQUIRE(::mkfifo((dir / "fifo.yaml").c_str(), 0600) == 0);
  CHECK(contains(refusal(dir / "fifo.yaml"), "is a FIFO"));
  std::filesystem::create_directory(dir / "folder.yaml");
  CHECK(contains(refusal(dir / "folder.yaml"), "is a directory"));
  CHECK(contains(refusal(dir / "missing.yaml"), "no such file"));
  write_file(dir / "huge.yaml", "");
  std::filesystem::resize_file(dir / "huge.yaml", kMaxProfileBytes + 1);  // sparse: no 64 MiB written
  CHECK(contains(refusal(dir / "huge.yaml"), "profile larger than 64.0 MiB"));
  // A file whose size reads 0 but that cannot be read is a read error, not an empty profile.
  if (std::filesystem::exists("/proc/self/mem")) CHECK(contains(refusal("/proc/self/mem"), "read error"));
  if (std::filesystem::exists("/proc/self/status")) CHECK(contains(refusal("/proc/self/status"), "size reads 0"));
  // An empty regular file is an empty profile (a diagnostic), not an input error.
  write_file(dir / "empty.yaml", "");
  Diagnostics empty;
  CHECK_NOTHROW(load_rules(dir / "empty.yaml", empty));
  CHECK(with_code(empty, "empty-profile").size() == 1);

  // As commands: exit 2 (I/O), at once, for what used to block or read forever.
  for (const std::filesystem::path& file : {std::filesystem::path(dir / "fifo.yaml"), std::filesystem::path("/dev/zero")}) {
    const auto start = std::chrono::steady_clock::now();
    const CommandResult run = check_in_child(file);
    INFO(run.output.substr(0, 2000));
    CHECK(run.exit_code == 2);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 30.0);
  }
}

TEST_CASE("hostile profiles: yaml-cpp's own messages quote the bad byte printably, so the JSON document dumps") {
  // An unknown escape followed by the first byte of a multi-byte character: yaml-cpp's message
  // quotes that one byte, which is not UTF-8 on its own.
  for (const std::string& tail : {std::string("\xef\xbb\xbf"), std::string("\xc3"), std::string("\x01")}) {
    const std::string yaml = "- match:\n    name: \"a\\" + tail + "\"\n  replace: {class: default}\n";
    const switchyard::CheckResult result = switchyard::testing::check_yaml(yaml);
    CHECK(result.diagnostics.has_errors());
    for (const switchyard::Diagnostic& d : result.diagnostics.items())
      CHECK_NOTHROW((void)nlohmann::json(d.message).dump());  // throws on bytes that are not UTF-8
    CHECK_NOTHROW((void)switchyard::check_to_json(result, {}).dump());
  }
}
