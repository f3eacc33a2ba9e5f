// Large profiles: the required-literal filter in front of every regex search, the module-name
// index, and the walk and dead-rule analysis built on them, each against a plain reference (raw
// PCRE2 searches over every module) on fresh random rules.
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <doctest/doctest.h>

#include "placement/module_name_index.h"
#include "placement/required_literal.h"
#include "tests/test_support.h"

namespace sy = switchyard;
using sy::testing::check_yaml;
using sy::testing::CheckSetup;
using sy::testing::with_code;

namespace {

// PCRE2 without anything of ours in front: does `pattern` match anywhere in `subject`?
// nullopt when the pattern does not compile.
class RawRegex {
 public:
  explicit RawRegex(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0, &error, &offset, nullptr);
    if (code_) data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~RawRegex() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  RawRegex(const RawRegex&) = delete;
  RawRegex& operator=(const RawRegex&) = delete;
  bool compiled() const { return code_ != nullptr; }
  bool search(std::string_view subject) const {
    return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0, 0, data_, nullptr) >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

struct Rng {
  std::uint32_t seed = std::random_device{}();
  std::mt19937 engine{seed};
  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(engine); }
  bool chance(double p) { return std::bernoulli_distribution(p)(engine); }
  template <typename T>
  const T& pick(const std::vector<T>& items) { return items[below(items.size())]; }
};

// A random pattern over a small alphabet, in the syntax real profiles use: literals, escaped
// dots, classes, groups with alternation, lookahead, quantifiers, anchors, now and then a
// top-level alternation or an inline (?i).
std::string random_pattern(Rng& rng) {
  static const std::vector<std::string> atoms = {
      "a", "b", ".", "\\.", "1", "ab", "[ab]", "[^a]", "\\d", "\\w", "(a|b)", "(?:ab)", "(?=a)", "(?!b)",
      "(a|\\.)", "[.]", "x", "]", "}", "{", "-", "\\-", "\\b", "(?:a|)", "[]a]"};
  static const std::vector<std::string> quantifiers = {"", "", "", "?", "*", "+", "{2}", "{0,2}", "{1,}", "??", "*+", "{,2}"};
  std::string p;
  if (rng.chance(0.3)) p += "^";
  if (rng.chance(0.05)) p += "(?i)";
  const std::size_t n = 1 + rng.below(7);
  for (std::size_t i = 0; i < n; ++i) {
    p += rng.pick(atoms);
    p += rng.pick(quantifiers);
    if (rng.chance(0.04)) p += "|";
  }
  if (rng.chance(0.3)) p += "$";
  return p;
}

std::string random_subject(Rng& rng) {
  static const std::string alphabet = "ab.1xAB-]{}";
  std::string s;
  const std::size_t n = rng.below(12);
  for (std::size_t i = 0; i < n; ++i) s += alphabet[rng.below(alphabet.size())];
  return s;
}

CheckSetup setup_for(const char* arch) {
  CheckSetup setup;
  setup.arch = arch;
  return setup;
}
CheckSetup deepseek_v3() { return setup_for("deepseek-v3"); }

}  // namespace

TEST_CASE("required_literal: every subject a random pattern matches contains its literal") {
  Rng rng;
  INFO("seed " << rng.seed);
  int patterns = 0, with_literal = 0, matches = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string pattern = random_pattern(rng);
    const RawRegex regex(pattern);
    if (!regex.compiled()) continue;
    ++patterns;
    const std::vector<std::string> literals = sy::required_literals(pattern);
    if (literals.empty()) continue;
    ++with_literal;
    for (int s = 0; s < 60; ++s) {
      // Half the subjects are built around the literal so that matches are frequent.
      std::string subject = random_subject(rng);
      if (rng.chance(0.5))
        for (const std::string& literal : literals) subject += literal + random_subject(rng);
      if (!regex.search(subject)) continue;
      ++matches;
      for (const std::string& literal : literals) {
        INFO("pattern " << pattern << " literal '" << literal << "' subject '" << subject << "'");
        CHECK(subject.find(literal) != std::string::npos);
      }
    }
  }
  // The generator must exercise the filter, not only its refusals.
  CHECK(patterns > 1500);
  CHECK(with_literal > 500);
  CHECK(matches > 2000);
}

TEST_CASE("required_literal: the runs real profiles' patterns need, and refusals where it cannot tell") {
  using Runs = std::vector<std::string>;
  CHECK(sy::required_literals("^model\\.layers\\.(?!.*self_attn\\.kv_b_proj).*$") == Runs{"model.layers."});
  CHECK(sy::required_literals("^model\\.layers\\..*\\.mlp\\.experts$") == Runs{"model.layers.", ".mlp.experts"});
  CHECK(sy::required_literals("^model\\.layers\\.([0-9]|1[0-4])\\.self_attn$") == Runs{"model.layers.", ".self_attn"});
  CHECK(sy::required_literals("blk\\.1[0-9]\\.ffn_up_exps") == Runs{".ffn_up_exps", "blk.1"});
  CHECK(sy::required_literals("^lm_head") == Runs{"lm_head"});
  CHECK(sy::required_literals("abc?d") == Runs{"ab", "d"});  // c is optional
  CHECK(sy::required_literals("ab+cd") == Runs{"ab", "cd"});  // b repeats: what follows it is a run of its own
  CHECK(sy::required_literals("xa{2}bcd") == Runs{"bcd", "x"});
  CHECK(sy::required_literals("a.b[c]d") == Runs{"a", "b", "d"});
  // Nothing is claimed where the pattern's meaning for literals is not modelled.
  for (const char* pattern : {"experts|shared_experts", "(?i)EXPERTS", "(?x) e x p", "\\Qa.b\\E", "(*UTF)experts",
                              "a\\x41bc", "(a)\\1bc", "ab\\Ecd", "\\p{L}abc", "(?#comment)abc"})
    CHECK_MESSAGE(sy::required_literals(pattern).empty(), pattern);
}

TEST_CASE("ModuleNameIndex: candidates hold every module whose name contains the literal") {
  Rng rng;
  INFO("seed " << rng.seed);
  const sy::CheckResult check = check_yaml("- match: {name: x}\n  replace: {class: default}\n", deepseek_v3());
  const sy::ModuleTree& tree = *check.tree;
  const sy::ModuleNameIndex index(tree);
  for (int trial = 0; trial < 200; ++trial) {
    // A window of a random name, its ends moved into or out of a component now and then, or mutated.
    const std::string name(tree.at(static_cast<int>(1 + rng.below(tree.size() - 1))).name);
    const std::size_t begin = rng.below(name.size()), length = 1 + rng.below(name.size() - begin);
    std::string literal = name.substr(begin, length);
    if (rng.chance(0.2)) literal[rng.below(literal.size())] = "0123456789._z"[rng.below(13)];
    INFO("literal '" << literal << "'");
    const std::optional<std::vector<int>> candidates = index.candidates(std::vector<std::string>{literal});
    if (!candidates) continue;  // no restriction: trivially a superset
    CHECK(std::is_sorted(candidates->begin(), candidates->end()));
    std::size_t checked = 0;
    for (std::size_t m = 0; m < tree.size(); ++m) {
      if (tree.at(static_cast<int>(m)).name.find(literal) == std::string_view::npos) continue;
      ++checked;
      CHECK(std::binary_search(candidates->begin(), candidates->end(), static_cast<int>(m)));
    }
    CHECK(candidates->size() >= checked);
  }
}

namespace {

// The walk as ktransformers does it, with raw PCRE2 on every module and rule: (module, rule) in
// visit order.
std::vector<std::pair<int, int>> reference_walk(const sy::ModuleTree& tree, const sy::RuleSet& rules,
                                                const std::vector<std::unique_ptr<RawRegex>>& regexes) {
  std::vector<std::pair<int, int>> visits;
  std::vector<int> stack = {0};
  while (!stack.empty()) {
    const int m = stack.back();
    stack.pop_back();
    const sy::Module& module = tree.at(m);
    int winner = -1;
    for (const sy::Rule& rule : rules.rules) {
      if (!rule.matchable) continue;
      if (rule.match_class && !module.cls->is_a(*rule.match_class)) continue;
      if (rule.name_pattern && !regexes[static_cast<std::size_t>(rule.index)]->search(module.name)) continue;
      winner = rule.index;
      break;
    }
    visits.emplace_back(m, winner);
    if (winner >= 0 && !rules.rules[static_cast<std::size_t>(winner)].recursive) continue;
    for (auto child = module.children.rbegin(); child != module.children.rend(); ++child) stack.push_back(*child);
  }
  return visits;
}

// Rules cut from real module names: a window of components, numbers sometimes widened to a class
// or a range, dots escaped or not, anchors, a trailing ".*", now and then a dead name, a class
// test or recursive: false.
std::string random_rules_yaml(Rng& rng, const sy::ModuleTree& tree, int count) {
  std::string yaml;
  for (int r = 0; r < count; ++r) {
    const std::string name(tree.at(static_cast<int>(1 + rng.below(tree.size() - 1))).name);
    std::vector<std::string> parts;
    for (std::size_t b = 0, e; b <= name.size(); b = e + 1) {
      e = name.find('.', b);
      if (e == std::string::npos) e = name.size();
      parts.push_back(name.substr(b, e - b));
    }
    const std::size_t first = rng.below(parts.size()), last = first + rng.below(parts.size() - first);
    std::string pattern = first == 0 && rng.chance(0.6) ? "^" : "";
    for (std::size_t k = first; k <= last; ++k) {
      std::string part = parts[k];
      if (std::all_of(part.begin(), part.end(), ::isdigit) && rng.chance(0.3))
        part = rng.chance(0.5) ? "[0-9]+" : "(1[0-9]|" + part + ")";
      if (rng.chance(0.05)) part += "_dead";
      pattern += part;
      if (k < last) pattern += rng.chance(0.8) ? "\\\\." : ".";
    }
    if (last + 1 == parts.size() && rng.chance(0.5)) pattern += "$";
    else if (rng.chance(0.2)) pattern += ".*";
    yaml += "- match:\n    name: \"" + pattern + "\"\n";
    if (rng.chance(0.1)) yaml += "    class: torch.nn.Linear\n";
    yaml += "  replace:\n    class: default\n    kwargs: {generate_device: \"cpu\", prefill_device: \"cpu\"}\n";
    if (rng.chance(0.15)) yaml += "  recursive: false\n";
  }
  return yaml;
}

}  // namespace

TEST_CASE("a profile of hundreds of random rules places every module as the plain walk does") {
  Rng rng;
  INFO("seed " << rng.seed);
  for (const char* arch : {"tiny-deepseek-v3", "deepseek-v3", "tiny-qwen3-moe"}) {
    INFO(arch);
    const sy::CheckResult probe = check_yaml("- match: {name: x}\n  replace: {class: default}\n", setup_for(arch));
    const std::string yaml = random_rules_yaml(rng, *probe.tree, 300);
    const sy::CheckResult check = check_yaml(yaml, setup_for(arch));
    REQUIRE(check.plan.name_index != nullptr);  // large enough to take the indexed walk
    std::vector<std::unique_ptr<RawRegex>> regexes;
    for (const sy::Rule& rule : check.rules->rules) regexes.push_back(std::make_unique<RawRegex>(rule.name_pattern.value_or("")));
    const auto expected = reference_walk(*check.tree, *check.rules, regexes);
    std::vector<std::pair<int, int>> got;
    for (const sy::ModulePlacement& p : check.plan.visited) got.emplace_back(p.module, p.rule);
    REQUIRE(got.size() == expected.size());
    CHECK(got == expected);

    // Dead rules: exactly those that won nothing, each with the reason the plain analysis gives.
    std::set<int> winners;
    for (const auto& [module, rule] : expected) winners.insert(rule);
    std::set<int> reported;
    for (const sy::Diagnostic& d : with_code(check, "dead-rule")) {
      REQUIRE(d.rule.has_value());
      reported.insert(*d.rule);
      const sy::Rule& rule = check.rules->rules[static_cast<std::size_t>(*d.rule)];
      const RawRegex& regex = *regexes[static_cast<std::size_t>(rule.index)];
      bool matches_visited = false, matches_any = false;
      for (const auto& [module, winner] : expected) {
        const sy::Module& m = check.tree->at(module);
        matches_visited = matches_visited || ((!rule.match_class || m.cls->is_a(*rule.match_class)) && regex.search(m.name));
      }
      for (const sy::Module& m : check.tree->modules())
        matches_any = matches_any || ((!rule.match_class || m.cls->is_a(*rule.match_class)) && regex.search(m.name));
      INFO(d.message);
      if (matches_visited) CHECK(d.message.find("taken by an earlier rule") != std::string::npos);
      else if (matches_any) CHECK(d.message.find("recursive: false") != std::string::npos);
      else CHECK(d.message.find("no module of this") != std::string::npos);
    }
    std::set<int> idle;
    for (const sy::Rule& rule : check.rules->rules)
      if (!winners.count(rule.index)) idle.insert(rule.index);
    CHECK(reported == idle);
  }
}
