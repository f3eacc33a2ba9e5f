#include "cli/flag_spellings.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "core/error.h"
#include "core/text.h"

namespace switchyard::cli {

std::vector<std::string> rewrite_llama_cpp_flags(int argc, const char* const* argv) {
  struct Spelling {
    std::string_view llama_cpp, ours;
  };
  static constexpr Spelling kSpellings[] = {{"-ot", "--override-tensor"},
                                            {"-ngl", "--n-gpu-layers"},
                                            {"-ts", "--tensor-split"},
                                            {"-mg", "--main-gpu"},
                                            {"-np", "--parallel"}};
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    std::string rewritten(a);
    for (const Spelling& s : kSpellings) {
      if (a == s.llama_cpp) rewritten = s.ours;
      else if (a.size() > s.llama_cpp.size() && a.substr(0, s.llama_cpp.size()) == s.llama_cpp && a[s.llama_cpp.size()] == '=')
        rewritten = std::string(s.ours) + std::string(a.substr(s.llama_cpp.size()));
    }
    out.push_back(std::move(rewritten));
  }
  return out;
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

// The option `name` ("--foo" or "-f") of `command` or of a command above it (--help, --version).
const CLI::Option* find_option(const CLI::App* command, const std::string& name) {
  for (; command != nullptr; command = command->get_parent())
    if (const CLI::Option* option = command->get_option_no_throw(name)) return option;
  return nullptr;
}

// Every name `command` takes, long ones in both spellings, for the "did you mean".
std::vector<std::string> flag_names(const CLI::App* command) {
  std::vector<std::string> names;
  for (; command != nullptr; command = command->get_parent())
    for (const CLI::Option* option : command->get_options()) {
      for (const std::string& l : option->get_lnames()) {
        names.push_back("--" + l);
        if (other_spelling("--" + l) != "--" + l) names.push_back(other_spelling("--" + l));
      }
      for (const std::string& s : option->get_snames()) names.push_back("-" + s);
    }
  return names;
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

void normalize_flag_spellings(const CLI::App& app, std::vector<std::string>& args) {
  const CLI::App* command = &app;
  std::string command_name = app.get_name();
  std::size_t i = 0;
  // The subcommand (and a bench's own subcommand) the arguments name; everything after is its.
  for (; i < args.size(); ++i) {
    const CLI::App* sub = nullptr;
    for (const CLI::App* each : command->get_subcommands([](const CLI::App*) { return true; }))
      if (!each->get_name().empty() && each->check_name(args[i])) sub = each;
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
    const CLI::Option* option = find_option(command, name);
    // "-n8": a short flag with its value attached, which CLI11 reads.
    if (option == nullptr && name.size() > 2 && name[1] != '-' && find_option(command, name.substr(0, 2))) continue;
    if (option == nullptr && starts_with(name, "--")) {
      const std::string other = other_spelling(name);
      option = find_option(command, other);
      if (option != nullptr) arg.replace(0, name.size(), other);
    }
    // Every one- or two-letter flag is a typo away from another, so only a longer one gets a suggestion.
    if (option == nullptr)
      throw InputError(command_name + ": unknown flag " + name + (name.size() > 3 ? did_you_mean(name, flag_names(command)) : "") + "; run '" +
                       command_name + " --help' for its flags");
    // A flag that takes a value takes the next argument unless it was given as "--flag=value".
    if (equals == std::string::npos && option->get_items_expected_min() > 0) ++i;
  }
}

}  // namespace switchyard::cli
