// `switchyard completion bash|zsh` through the binary: the bash script is loaded into a real bash
// and its completion function (the one `complete -p switchyard` names) called as bash calls it,
// with COMP_WORDS and COMP_CWORD; what it offers is checked against what `--help` lists and what
// the commands accept. The zsh script is checked by zsh where zsh is installed. Last, each shell
// runs interactively on a pseudo-terminal and Tab is pressed.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/core_test_support.h"
#include "tests/terminal_test_support.h"
#include "tests/test_support.h"

// Failed checks print the sets they compared.
namespace doctest {
template <>
struct StringMaker<std::set<std::string>> {
  static String convert(const std::set<std::string>& words) {
    std::string out = "{";
    for (const std::string& word : words) out += (out.size() > 1 ? " " : "") + word;
    return (out + "}").c_str();
  }
};
}  // namespace doctest

namespace {

using switchyard::core_testing::contains;
using switchyard::core_testing::TempDir;
using switchyard::testing::run_switchyard;
using switchyard::testing::run_switchyard_with_env;

std::string sh_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

using ShellResult = switchyard::testing::CommandResult;

// `command` under the shell, stdout and stderr together.
ShellResult run_shell(const std::string& command) { return switchyard::testing::run_command(command + " 2>&1"); }

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    if (end > start) lines.insert(text.substr(start, end - start));
  if (start < text.size()) lines.insert(text.substr(start));
  return lines;
}

bool has_program(const std::string& name) { return run_shell("command -v " + name + " > /dev/null").exit_code == 0; }

// The script `switchyard completion SHELL` prints, saved to a file.
struct Script {
  TempDir dir;
  std::filesystem::path path;
  explicit Script(const std::string& shell) : path(dir / ("switchyard." + shell)) {
    const auto printed = run_switchyard_with_env("", "completion " + shell, true);
    REQUIRE_MESSAGE(printed.exit_code == 0, printed.output);
    std::ofstream(path) << printed.output;
  }
};

// What bash offers for the last of `words` (the word under the cursor; "" for none typed yet),
// in the directory `cwd`: the script sourced in a plain bash, then the function it registered for
// `switchyard` called with bash's completion variables set as readline sets them.
std::set<std::string> bash_offers(const Script& script, const std::vector<std::string>& words,
                                  const std::filesystem::path& cwd = std::filesystem::current_path()) {
  static const char* driver =
      "source \"$1\" || exit 3; shift; "
      "function=$(complete -p switchyard | sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p'); [[ -n $function ]] || exit 4; "
      "COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); COMP_LINE=\"$*\"; COMP_POINT=${#COMP_LINE}; COMPREPLY=(); "
      "\"$function\" switchyard \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\" || exit 5; "
      "if (( ${#COMPREPLY[@]} )); then printf '%s\\n' \"${COMPREPLY[@]}\"; fi";
  std::string command = "cd " + sh_quoted(cwd.string()) + " && bash --norc --noprofile -c " + sh_quoted(driver) + " bash " +
                        sh_quoted(script.path.string());
  for (const std::string& word : words) command += " " + sh_quoted(word);
  const ShellResult result = run_shell(command);
  REQUIRE_MESSAGE(result.exit_code == 0, command << "\n" << result.output);
  return lines_of(result.output);
}

// The subcommands a --help text lists under "Subcommands:".
std::vector<std::string> subcommands_in(const std::string& help) {
  std::vector<std::string> names;
  const auto at = help.find("Subcommands:\n");
  if (at == std::string::npos) return names;
  for (const std::string& line : lines_of(help.substr(at + 13)))
    if (line.size() > 2 && line.substr(0, 2) == "  " && line[2] != ' ') names.push_back(line.substr(2, line.find(' ', 2) - 2));
  return names;
}

// The flag names a --help text lists: each option row starts with two spaces and its names,
// comma-separated ("  -n,--max_new_tokens,--n-predict INT ...").
std::set<std::string> flags_in(const std::string& help) {
  std::set<std::string> flags;
  for (const std::string& line : lines_of(help)) {
    if (line.size() < 3 || line.substr(0, 3) != "  -") continue;
    const std::string names = line.substr(2, line.find(' ', 2) - 2);
    std::size_t start = 0;
    for (std::size_t end; start <= names.size(); start = end + 1) {
      end = names.find(',', start);
      if (end == std::string::npos) end = names.size();
      flags.insert(names.substr(start, end - start));
    }
  }
  return flags;
}

std::string help_of(const std::string& command) {
  const auto help = run_switchyard_with_env("", command + " --help", true);
  REQUIRE_MESSAGE(help.exit_code == 0, command << ": " << help.output);
  return help.output;
}

// Every command and bench's subcommands, as `switchyard --help` and `switchyard bench --help` list them.
std::vector<std::string> all_commands() {
  std::vector<std::string> commands;
  for (const std::string& name : subcommands_in(help_of(""))) {
    commands.push_back(name);
    for (const std::string& sub : subcommands_in(help_of(name))) commands.push_back(name + " " + sub);
  }
  return commands;
}

std::vector<std::string> words_of(const std::string& command) {
  std::vector<std::string> words{"switchyard"};
  std::size_t start = 0;
  for (std::size_t end; (end = command.find(' ', start)) != std::string::npos; start = end + 1)
    words.push_back(command.substr(start, end - start));
  words.push_back(command.substr(start));
  return words;
}

std::vector<std::string> with(std::vector<std::string> words, std::initializer_list<std::string> more) {
  words.insert(words.end(), more);
  return words;
}

std::string other_spelling(std::string flag) {
  for (std::size_t i = 2; i < flag.size(); ++i) flag[i] = flag[i] == '_' ? '-' : flag[i] == '-' ? '_' : flag[i];
  return flag;
}

}  // namespace

TEST_CASE("completion bash: the script is bash, and completes commands, bench's subcommands and run's flags") {
  const Script script("bash");
  const ShellResult syntax = run_shell("bash -n " + sh_quoted(script.path.string()));
  CHECK_MESSAGE(syntax.exit_code == 0, syntax.output);

  CHECK(bash_offers(script, {"switchyard", "ru"}) == std::set<std::string>{"run"});
  const std::vector<std::string> top = subcommands_in(help_of(""));
  CHECK(top.size() >= 9);
  CHECK(bash_offers(script, {"switchyard", ""}) == std::set<std::string>(top.begin(), top.end()));
  const std::vector<std::string> bench = subcommands_in(help_of("bench"));
  CHECK(bench.size() >= 4);
  CHECK(bash_offers(script, {"switchyard", "bench", ""}) == std::set<std::string>(bench.begin(), bench.end()));
  CHECK(bash_offers(script, {"switchyard", "bench", "de"}) == std::set<std::string>{"decode"});

  const std::set<std::string> max = bash_offers(script, {"switchyard", "run", "--max"});
  CHECK(max.count("--max_new_tokens") == 1);
  CHECK(max.count("--max-new-tokens") == 1);
  CHECK(max.count("--max_context") == 1);
  for (const std::string& flag : max) CHECK(flag.rfind("--max", 0) == 0);
  CHECK(bash_offers(script, {"switchyard", "-"}).count("--version") == 1);

  // A value is not a command: "bench" here is run's prompt, so run's flags follow.
  const std::set<std::string> after_value = bash_offers(script, {"switchyard", "run", "--prompt", "bench", "--top"});
  CHECK(after_value == std::set<std::string>{"--top_k", "--top-k", "--top_p", "--top-p"});
}

TEST_CASE("completion bash: every command offers every flag its --help lists, in both spellings, and llama.cpp's short ones") {
  const Script script("bash");
  const std::vector<std::string> commands = all_commands();
  CHECK(commands.size() >= 14);
  for (const std::string& command : commands) {
    INFO(command);
    const std::set<std::string> offered = bash_offers(script, with(words_of(command), {"-"}));
    const std::set<std::string> listed = flags_in(help_of(command));
    CHECK(listed.count("--help") == 1);
    for (const std::string& flag : listed) {
      CHECK_MESSAGE(offered.count(flag) == 1, command << " --help lists " << flag << ", which completion does not offer");
      if (flag.rfind("--", 0) == 0)
        CHECK_MESSAGE(offered.count(other_spelling(flag)) == 1, "no " << other_spelling(flag) << " beside " << flag);
    }
    // Whatever is offered, the command takes: no spelling it would call an unknown flag.
    std::string arguments = command;
    for (const std::string& flag : offered)
      if (flag != "-h" && flag != "--help") arguments += " " + flag + "=1";
    const auto parsed = run_switchyard_with_env("", arguments + " --help", true);
    CHECK_MESSAGE(!contains(parsed.output, "unknown flag"), parsed.output);
  }
  // llama.cpp's multi-letter short flags, where the command takes the long one.
  const std::set<std::string> run = bash_offers(script, {"switchyard", "run", "-"});
  for (const char* flag : {"-ot", "-ngl", "-ts", "-mg", "-m", "-p", "-f", "-n", "-c", "-t", "-s"}) {
    INFO(flag);
    CHECK(run.count(flag) == 1);
  }
  CHECK(run.count("-np") == 0);   // serve's
  CHECK(run.count("-sys") == 0);  // chat's
  CHECK(bash_offers(script, {"switchyard", "serve", "-n"}).count("-np") == 1);
  const std::set<std::string> chat = bash_offers(script, {"switchyard", "chat", "-s"});
  CHECK(chat.count("-sys") == 1);
  CHECK(chat.count("-s") == 1);
}

TEST_CASE("completion bash: fixed values, and every value offered is one the command takes") {
  const Script script("bash");
  const std::set<std::string> formats = bash_offers(script, {"switchyard", "check", "--format", ""});
  CHECK(formats == std::set<std::string>{"table", "json"});
  // "--format=j": bash gives the '=' as a word of its own.
  CHECK(bash_offers(script, {"switchyard", "check", "--format", "=", "j"}) == std::set<std::string>{"json"});
  CHECK(bash_offers(script, {"switchyard", "check", "--format", "="}) == formats);

  // Each value offered, given to `check`: accepted.
  struct Case {
    std::string flag, command;  // the value goes last
    std::size_t at_least;
  };
  const std::string check = "check --arch tiny-deepseek-v3 --cpu-moe ";
  const std::vector<Case> cases = {{"--format", check + "--format ", 2},
                                   {"--kv_cache_dtype", check + "--kv_cache_dtype ", 2},
                                   {"--weight-dtype", check + "--weight_dtype ", 10},
                                   {"--arch", "check --cpu-moe --arch ", 10}};
  for (const Case& c : cases) {
    INFO(c.flag);
    const std::set<std::string> values = bash_offers(script, {"switchyard", "check", c.flag, ""});
    CHECK(values.size() >= c.at_least);
    for (const std::string& value : values) {
      INFO(value);
      CHECK(run_switchyard(c.command + value).exit_code == 0);
    }
  }
  const std::set<std::string> shells = bash_offers(script, {"switchyard", "completion", ""});
  CHECK(shells.count("bash") == 1);
  for (const std::string& shell : shells) {
    INFO(shell);
    CHECK(run_switchyard("completion " + shell).exit_code == 0);
  }
  CHECK(bash_offers(script, {"switchyard", "chat", "--think", ""}) == std::set<std::string>{"true", "false"});
  CHECK(bash_offers(script, {"switchyard", "make-model", "--format", ""}) == std::set<std::string>{"safetensors", "gguf"});
  const std::set<std::string> kernels = bash_offers(script, {"switchyard", "run", "--cpu-kernels", ""});
  CHECK(kernels.count("auto") == 1);
  CHECK(kernels.count("scalar") == 1);
  const std::filesystem::path tokenizer = switchyard::testing::source_path(".tokenizers/deepseek_v3");
  if (std::filesystem::exists(tokenizer / "tokenizer.json")) {
    const std::set<std::string> tokenize = bash_offers(script, {"switchyard", "tokenize", "--format", ""});
    CHECK(tokenize.size() >= 2);
    for (const std::string& value : tokenize) {
      INFO(value);
      CHECK(run_switchyard("tokenize --tokenizer " + tokenizer.string() + " --prompt hi --format " + value).exit_code == 0);
    }
  }
}

TEST_CASE("completion bash: file and directory names where an option takes a path, nothing where it takes text") {
  const Script script("bash");
  TempDir dir;
  std::ofstream(dir / "profile.yaml") << "[]\n";
  std::ofstream(dir / "prompt.txt") << "Hello\n";
  std::filesystem::create_directory(dir / "models");
  const std::set<std::string> everything{"profile.yaml", "prompt.txt", "models"};
  auto offers = [&](std::vector<std::string> words) { return bash_offers(script, words, dir.path()); };
  CHECK(offers({"switchyard", "check", "--optimize_config_path", "prof"}) == std::set<std::string>{"profile.yaml"});
  CHECK(offers({"switchyard", "check", "--optimize-rule-path", ""}) == everything);
  CHECK(offers({"switchyard", "run", "--model_path", ""}) == std::set<std::string>{"models"});
  CHECK(offers({"switchyard", "run", "-m", ""}) == everything);
  CHECK(offers({"switchyard", "run", "--gguf-path", "mo"}) == std::set<std::string>{"models"});
  CHECK(offers({"switchyard", "run", "-f", ""}) == everything);
  CHECK(offers({"switchyard", "chat", "--file", "pr"}) == std::set<std::string>{"profile.yaml", "prompt.txt"});
  CHECK(offers({"switchyard", "chat", "--tokenizer", ""}) == everything);
  CHECK(offers({"switchyard", "split", "-o", ""}) == everything);
  CHECK(offers({"switchyard", "make-model", "--out", ""}) == std::set<std::string>{"models"});
  CHECK(offers({"switchyard", "run", "--trace_out", "p"}) == std::set<std::string>{"profile.yaml", "prompt.txt"});
  CHECK(offers({"switchyard", "tokenize", "--messages", "pro"}) == std::set<std::string>{"profile.yaml", "prompt.txt"});
  // Text and numbers: no file names.
  CHECK(offers({"switchyard", "run", "--max_new_tokens", ""}).empty());
  CHECK(offers({"switchyard", "run", "-p", ""}).empty());
  CHECK(offers({"switchyard", "check", "-ot", ""}).empty());
}

TEST_CASE("completion: an unknown shell or none is a usage error naming it") {
  const auto fish = run_switchyard_with_env("", "completion fish", true);
  CHECK(fish.exit_code == 2);
  CHECK(contains(fish.output, "'fish'"));
  CHECK(contains(fish.output, "bash or zsh"));
  const auto none = run_switchyard_with_env("", "completion", true);
  CHECK(none.exit_code == 2);
  CHECK(contains(none.output, "shell"));
  CHECK(run_switchyard("completion bash zsh").exit_code == 2);
}

TEST_CASE("completion zsh: the script is zsh, registers itself, and completes as the bash one does") {
  if (!has_program("zsh")) {
    MESSAGE("skipped: zsh is not installed");
    return;
  }
  const Script script("zsh");
  const ShellResult syntax = run_shell("zsh -n " + sh_quoted(script.path.string()));
  CHECK_MESSAGE(syntax.exit_code == 0, syntax.output);
  // Sourced before compinit it says what is missing; after, it registers with compdef.
  const ShellResult early = run_shell("zsh -f -c " + sh_quoted("source " + sh_quoted(script.path.string())));
  CHECK(contains(early.output, "compinit"));
  const ShellResult registered =
      run_shell("zsh -f -c " + sh_quoted("compdef() { print -r -- compdef \"$@\"; }; source " + sh_quoted(script.path.string())));
  CHECK(contains(registered.output, "compdef _switchyard switchyard"));

  // The completion function with the completion system's functions standing in as recorders:
  // _describe prints its candidates' names, compadd its words, _files how it was asked.
  auto offers = [&](const std::vector<std::string>& words) {
    std::string setup =
        "compdef() { :; }; source " + sh_quoted(script.path.string()) + "; "
        "_describe() { local spec; for spec in \"${(@P)${@[-1]}}\"; do print -r -- \"${spec%%:*}\"; done; }; "
        "compadd() { [[ $1 == -a ]] && print -rl -- \"${(@P)2}\"; }; "
        "_files() { print -r -- \"_files $*\"; }; compset() { :; }; _message() { :; }; "
        "words=(";
    for (const std::string& word : words) setup += sh_quoted(word) + " ";
    setup += "); CURRENT=${#words}; _switchyard";
    const ShellResult result = run_shell("zsh -f -c " + sh_quoted(setup));
    REQUIRE_MESSAGE(result.exit_code == 0, setup << "\n" << result.output);
    return lines_of(result.output);
  };
  CHECK(offers({"switchyard", "ru"}).count("run") == 1);
  const std::vector<std::string> bench = subcommands_in(help_of("bench"));
  CHECK(offers({"switchyard", "bench", ""}) == std::set<std::string>(bench.begin(), bench.end()));
  const std::set<std::string> run = offers({"switchyard", "run", "--max"});
  CHECK(run.count("--max_new_tokens") == 1);
  CHECK(run.count("--max-new-tokens") == 1);
  const std::set<std::string> all_of_run = offers({"switchyard", "run", "-"});
  for (const std::string& flag : flags_in(help_of("run"))) {
    INFO(flag);
    CHECK(all_of_run.count(flag) == 1);
  }
  CHECK(offers({"switchyard", "serve", "-"}).count("-np") == 1);
  CHECK(offers({"switchyard", "check", "--format="}) == std::set<std::string>{"table", "json"});
  CHECK(offers({"switchyard", "check", "--format", ""}) == std::set<std::string>{"table", "json"});
  CHECK(offers({"switchyard", "run", "--model_path", ""}) == std::set<std::string>{"_files -/"});
  CHECK(offers({"switchyard", "run", "-f", ""}) == std::set<std::string>{"_files "});
  CHECK(offers({"switchyard", "run", "--max_new_tokens", ""}).empty());
  CHECK(offers({"switchyard", "completion", ""}).count("zsh") == 1);
}

namespace {

// An interactive shell on a pseudo-terminal with the completion script loaded (`setup`), where
// Tab is pressed after each of `typed` and the line must then hold the matching `completed`.
void complete_at_terminal(const std::vector<std::string>& shell, const std::string& setup,
                          const std::vector<std::pair<std::string, std::string>>& typed_and_completed) {
  switchyard::testing::Terminal t(shell);
  t.type("PS1='rea''dy> '\r");  // the echo of this line does not read "ready> "
  std::size_t at = t.read_until("ready> ", 0);
  t.type(setup + "\r");
  at = t.read_until("ready> ", at);
  for (const auto& each : typed_and_completed) {
    INFO(each.first);
    t.type(std::string(SWITCHYARD_BINARY) + " " + each.first + "\t");
    at = t.read_until(each.second, at);
    t.type("\x15");  // Ctrl-U: the line is cleared, not run
  }
  t.type("\rexit\r");
  CHECK(t.wait_exit() == 0);
}

}  // namespace

TEST_CASE("completion: Tab in an interactive bash, and zsh where installed, completes from the script") {
  // (zsh draws the space after a completed word in its own colours, so the space is not looked for.)
  const std::vector<std::pair<std::string, std::string>> cases = {{"bench d", "bench decode"},
                                                                  {"check --format=j", "--format=json"},
                                                                  {"run --kv-cache-dtype b", "--kv-cache-dtype bf16"},
                                                                  {"run --max-n", "--max-new-tokens"}};
  const std::string binary = SWITCHYARD_BINARY;
  complete_at_terminal({"/bin/bash", "--norc", "--noprofile", "-i"}, "source <(" + binary + " completion bash)", cases);
  if (!has_program("zsh")) {
    MESSAGE("zsh skipped: zsh is not installed");
    return;
  }
  // -D: compinit keeps no dump file in $HOME; -u: it trusts the test's directories.
  complete_at_terminal({"/bin/sh", "-c", "exec zsh -f -i"},
                       "autoload -Uz compinit && compinit -u -D && source <(" + binary + " completion zsh)", cases);
}
