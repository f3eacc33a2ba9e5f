#include "cli/flag_spellings.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/error.h"
#include "core/text.h"

namespace switchyard::cli {

std::span<const LlamaCppShortFlag> llama_cpp_short_flags() {
  static constexpr LlamaCppShortFlag kFlags[] = {{"-ot", "--override-tensor"}, {"-ngl", "--n-gpu-layers"},
                                                 {"-ts", "--tensor-split"},    {"-mg", "--main-gpu"},
                                                 {"-np", "--parallel"},        {"-sys", "--system-prompt"}};
  return kFlags;
}

namespace {

// `name` ("--foo_bar") with its word separators swapped: "--foo-bar"; the leading "--" stays.
std::string other_spelling(std::string_view name) {
  std::string out(name);
  for (std::size_t i = 2; i < out.size(); ++i) {
    if (out[i] == '_') out[i] = '-';
    else if (out[i] == '-') out[i] = '_';
  }
  return out;
}

// `name` ("--foo-bar") with every separator '_': the one spelling two spellings of a flag share.
std::string one_spelling(std::string_view name) {
  std::string out(name);
  for (std::size_t i = 2; i < out.size(); ++i)
    if (out[i] == '-') out[i] = '_';
  return out;
}

// The option `name` ("--foo" or "-f") of `command` or of a command above it (--help, --version).
const CLI::Option* find_option(const CLI::App* command, const std::string& name) {
  for (; command != nullptr; command = command->get_parent())
    if (const CLI::Option* option = command->get_option_no_throw(name)) return option;
  return nullptr;
}

// The spelling of `name` that `command` (or a command above it) knows: `name` itself, or for a
// long flag the other separator; nothing where it knows neither.
std::optional<std::string> known_spelling(const CLI::App* command, const std::string& name) {
  if (find_option(command, name) != nullptr) return name;
  if (starts_with(name, "--") && find_option(command, other_spelling(name)) != nullptr) return other_spelling(name);
  return std::nullopt;
}

const LlamaCppShortFlag* llama_cpp_short_flag(std::string_view name) {
  for (const LlamaCppShortFlag& flag : llama_cpp_short_flags())
    if (flag.short_flag == name) return &flag;
  return nullptr;
}

// Every name `command` takes, its parents' too, for the "did you mean".
std::vector<std::string> flag_names(const CLI::App* command) {
  std::vector<std::string> names;
  for (; command != nullptr; command = command->get_parent())
    for (const CLI::Option* option : command->get_options())
      for (std::string& name : flag_spellings(*option)) names.push_back(std::move(name));
  return names;
}

// The named subcommands of `command`, not its option groups.
std::vector<const CLI::App*> subcommands_of(const CLI::App* command) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* each : command->get_subcommands([](const CLI::App*) { return true; }))
    if (!each->get_name().empty()) out.push_back(each);
  return out;
}

// The commands below `command` (its subcommands, theirs, ...) other than `except` that take
// `flag` themselves, in either spelling, as "'switchyard serve'" or "'switchyard run' and
// 'switchyard chat'".
void commands_taking(const CLI::App* command, const CLI::App* except, const std::string& path, const std::string& flag,
                     std::vector<std::string>& out) {
  for (const CLI::App* sub : subcommands_of(command)) {
    const std::string sub_path = path + " " + sub->get_name();
    if (sub != except && (sub->get_option_no_throw(flag) != nullptr ||
                          (starts_with(flag, "--") && sub->get_option_no_throw(other_spelling(flag)) != nullptr)))
      out.push_back("'" + sub_path + "'");
    commands_taking(sub, except, sub_path, flag, out);
  }
}

std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

// The error for `typed`, a flag `command` (named `command_name`) takes in no spelling. `meaning`
// is the long flag a llama.cpp short flag stands for ("" otherwise): the flag looked for in the
// other commands.
InputError unknown_flag(const CLI::App* command, const std::string& command_name, const std::string& typed,
                        const std::string& meaning) {
  const CLI::App* root = command;
  while (root->get_parent() != nullptr) root = root->get_parent();
  std::vector<std::string> takers;
  commands_taking(root, command, root->get_name(), meaning.empty() ? typed : meaning, takers);
  std::string message = command_name + ": unknown flag " + typed;
  if (!meaning.empty()) message += " (llama.cpp's " + meaning + ")";
  if (!takers.empty()) message += "; it is a flag of " + listed(takers);
  // Every one- or two-letter flag is a typo away from another, so only a longer one gets a suggestion.
  else if (meaning.empty() && typed.size() > 3) message += did_you_mean(typed, flag_names(command));
  return InputError(message + "; run '" + command_name + " --help' for its flags");
}

// A flag as a user types one: "--word" or "-word", letters, digits, '_' and '-' (not "-5", a value).
bool looks_like_flag(std::string_view name) {
  const std::size_t dashes = starts_with(name, "--") ? 2 : starts_with(name, "-") ? 1 : 0;
  if (dashes == 0 || name.size() == dashes || !std::isalpha(static_cast<unsigned char>(name[dashes]))) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(dashes), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

}  // namespace

std::vector<std::string> flag_spellings(const CLI::Option& option) {
  std::vector<std::string> names;
  auto add = [&names](const std::string& name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const std::string& s : option.get_snames()) add("-" + s);
  for (const std::string& l : option.get_lnames()) {
    add("--" + l);
    add(other_spelling("--" + l));
  }
  for (const LlamaCppShortFlag& flag : llama_cpp_short_flags())
    for (const std::string& l : option.get_lnames())
      if (one_spelling("--" + l) == one_spelling(flag.long_flag)) add(std::string(flag.short_flag));
  return names;
}

void normalize_flag_spellings(const CLI::App& app, std::vector<std::string>& args) {
  const CLI::App* command = &app;
  std::string command_name = app.get_name();
  std::size_t i = 0;
  // The subcommand (and a bench's own subcommand) the arguments name; everything after is its.
  for (; i < args.size(); ++i) {
    const CLI::App* sub = nullptr;
    for (const CLI::App* each : subcommands_of(command))
      if (each->check_name(args[i])) sub = each;
    if (sub == nullptr) break;
    command = sub;
    command_name += " " + sub->get_name();
  }
  for (; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") return;  // what follows is values
    const std::size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    if (!looks_like_flag(name)) continue;
    std::optional<std::string> spelling;
    if (const LlamaCppShortFlag* llama_cpp = llama_cpp_short_flag(name)) {
      // Before the check below: "-np" is llama.cpp's, not "-n" with the value "p".
      spelling = known_spelling(command, std::string(llama_cpp->long_flag));
      if (!spelling) throw unknown_flag(command, command_name, name, std::string(llama_cpp->long_flag));
    } else {
      // "-n8": a short flag with its value attached, which CLI11 reads.
      if (name.size() > 2 && name[1] != '-' && !find_option(command, name) && find_option(command, name.substr(0, 2)))
        continue;
      spelling = known_spelling(command, name);
      if (!spelling) throw unknown_flag(command, command_name, name, "");
    }
    if (*spelling != name) arg.replace(0, name.size(), *spelling);
    // A flag that takes a value takes the next argument unless it was given as "--flag=value".
    if (equals == std::string::npos && find_option(command, *spelling)->get_items_expected_min() > 0) ++i;
  }
}

}  // namespace switchyard::cli
