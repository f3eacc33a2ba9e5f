// docs/commands.md against the binary's own option tables: every flag that `switchyard COMMAND
// --help` lists (every command, bench's too) is in the reference, in either spelling, and every
// flag of the reference's synopsis is a flag some command takes.
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/test_support.h"

namespace {

using switchyard::testing::run_switchyard_with_env;

std::string help_of(const std::string& command) {
  const auto r = run_switchyard_with_env("", command + " --help", true);
  REQUIRE_MESSAGE(r.exit_code == 0, command << " --help: " << r.output);
  return r.output;
}

// The names under "Subcommands:" in a --help text.
std::vector<std::string> subcommands_in(const std::string& help) {
  std::vector<std::string> names;
  const auto at = help.find("Subcommands:\n");
  REQUIRE(at != std::string::npos);
  static const std::regex row(R"(^  ([a-z][a-z-]*) )");
  std::size_t line = at + 13;
  while (line < help.size()) {
    const std::size_t end = help.find('\n', line);
    const std::string text = help.substr(line, end == std::string::npos ? std::string::npos : end - line);
    std::smatch m;
    if (std::regex_search(text, m, row)) names.push_back(m[1]);
    if (end == std::string::npos) break;
    line = end + 1;
  }
  return names;
}

std::set<std::string> long_flags_in(const std::string& text) {
  std::set<std::string> flags;
  static const std::regex flag(R"(--[a-z][a-z0-9_-]*[a-z0-9])");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), flag); it != std::sregex_iterator(); ++it)
    flags.insert(it->str());
  return flags;
}

// `--foo-bar` and `--foo_bar` are one flag.
std::string one_spelling(std::string flag) {
  for (std::size_t i = 2; i < flag.size(); ++i)
    if (flag[i] == '-') flag[i] = '_';
  return flag;
}

}  // namespace

TEST_CASE("docs/commands.md lists every flag --help lists, and its synopsis no flag that is gone") {
  std::ifstream file(switchyard::testing::source_path("docs/commands.md"));
  REQUIRE(file.good());
  const std::string docs((std::istreambuf_iterator<char>(file)), {});
  std::set<std::string> documented;
  for (const std::string& f : long_flags_in(docs)) documented.insert(one_spelling(f));

  std::vector<std::string> commands;
  for (const std::string& name : subcommands_in(help_of(""))) {
    if (name == "bench")
      for (const std::string& bench : subcommands_in(help_of("bench"))) commands.push_back("bench " + bench);
    else commands.push_back(name);
  }
  CHECK(commands.size() >= 12);
  std::set<std::string> taken;
  for (const std::string& flag : long_flags_in(help_of(""))) taken.insert(one_spelling(flag));  // --version
  for (const std::string& command : commands) {
    for (const std::string& flag : long_flags_in(help_of(command))) {
      taken.insert(one_spelling(flag));
      INFO(command << " " << flag);
      CHECK_MESSAGE(documented.count(one_spelling(flag)) == 1, "switchyard " << command << " takes " << flag
                                                                   << ", which docs/commands.md does not mention");
    }
  }
  // The synopsis: the indented block after "## Synopsis".
  const auto start = docs.find("## Synopsis\n");
  REQUIRE(start != std::string::npos);
  const auto end = docs.find("\n- ", start);
  for (const std::string& flag : long_flags_in(docs.substr(start, end - start))) {
    INFO(flag);
    CHECK_MESSAGE(taken.count(one_spelling(flag)) == 1, "docs/commands.md's synopsis names " << flag << ", which no command takes");
  }
}
