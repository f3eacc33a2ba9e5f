// switchyard completion bash|zsh: a shell completion script made from the same CLI11 option tables
// as --help, so that it follows every flag that is added: the subcommands (bench's own too), each
// option in every spelling the command line takes (cli/flag_spellings.h: both separators of a
// multi-word flag, llama.cpp's multi-letter short flags), and an option's values.
//
// What an option's value completes to is decided, first rule that says something wins, by:
//   1. CLI11's type of it, as --help prints it: BOOLEAN gives true and false; an IsMember check
//      ({table,json}) its members; CLI11's ExistingFile, ExistingDirectory and ExistingPath checks
//      file or directory names.
//   2. kValueRules below, keyed by the option's long name (and its command, where one name means
//      two things: split's --out is a file, make-model's a directory): the options that name files
//      and directories, and the value sets our own parsers check (--arch, --kv_cache_dtype ...),
//      taken from the lists those parsers use where there is one.
//   3. Otherwise the value is free text (a number, a regex, a size) and nothing is offered.
//
// Both scripts share one parser of the words typed (_switchyard_parse, written in the syntax bash
// and zsh have in common) and the tables, emitted as `case` statements; each shell's own function
// turns the result into its completions.
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_spellings.h"
#include "core/arch_presets.h"
#include "core/error.h"
#include "core/text.h"
#include "core/weight_scheme.h"
#include "operators/cpu/kernels/isa.h"

namespace switchyard::cli {
namespace {

constexpr const char* kShells[] = {"bash", "zsh"};

enum class ValueKind { text, files, directories, words };

struct Value {
  ValueKind kind = ValueKind::text;
  std::vector<std::string> words;  // ValueKind::words
};

std::vector<std::string> arch_names() {
  std::vector<std::string> names;
  for (const ArchPreset& preset : arch_presets()) names.push_back(preset.name);
  return names;
}

std::vector<std::string> cpu_kernel_names() {
  std::vector<std::string> names{"auto"};
  for (cpu::Isa isa : cpu::kAllIsas) names.emplace_back(cpu::isa_name(isa));
  return names;
}

struct ValueRule {
  std::string_view command;  // "switchyard split"; empty: every command
  std::string_view option;   // a long name in either spelling, or a positional argument's name
  ValueKind kind;
  std::vector<std::string> (*words)();  // ValueKind::words
};

// The options whose values CLI11 does not know (rule 2 above). An entry that names its command
// wins over one that does not.
const ValueRule kValueRules[] = {
    {"", "--optimize_config_path", ValueKind::files, nullptr},
    {"", "--model_path", ValueKind::directories, nullptr},
    {"", "--gguf_path", ValueKind::files, nullptr},  // a file, or a folder holding one
    {"", "--model", ValueKind::files, nullptr},      // likewise
    {"", "--tokenizer", ValueKind::files, nullptr},  // a tokenizer.json, a folder holding one, a GGUF
    {"", "--file", ValueKind::files, nullptr},
    {"", "--chat_template", ValueKind::files, nullptr},  // or the template's text
    {"", "--trace_out", ValueKind::files, nullptr},
    {"", "--messages", ValueKind::files, nullptr},
    {"", "--corpus", ValueKind::files, nullptr},
    {"switchyard split", "--out", ValueKind::files, nullptr},
    {"switchyard make-model", "--out", ValueKind::directories, nullptr},
    {"", "--arch", ValueKind::words, arch_names},
    {"switchyard make-model", "--preset", ValueKind::words, arch_names},
    {"switchyard bench experts", "--shape", ValueKind::words, arch_names},
    {"", "--weight_dtype", ValueKind::words, weight_scheme_names},
    {"switchyard bench experts", "--weight_dtype", ValueKind::text, nullptr},  // dtypes, not schemes
    {"switchyard make-model", "--dtype", ValueKind::words, gguf_weight_scheme_names},
    {"switchyard make-model", "--format", ValueKind::words, [] { return std::vector<std::string>{"safetensors", "gguf"}; }},
    {"switchyard tokenize", "--format", ValueKind::words, [] { return std::vector<std::string>{"table", "json"}; }},
    {"", "--kv_cache_dtype", ValueKind::words, [] { return std::vector<std::string>{"f32", "bf16"}; }},
    {"", "--cpu_kernels", ValueKind::words, cpu_kernel_names},
    {"", "--nvtx_layers", ValueKind::words, [] { return std::vector<std::string>{"all", "none"}; }},
    {"switchyard completion", "shell", ValueKind::words, [] { return std::vector<std::string>(std::begin(kShells), std::end(kShells)); }},
};

// A long name with every word separator '_' ("--chat-template" -> "--chat_template"): the one
// spelling both of a flag's spellings share.
std::string one_spelling(std::string_view name) {
  std::string out(name);
  for (std::size_t i = 2; i < out.size(); ++i)
    if (out[i] == '-') out[i] = '_';
  return out;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + 1)
    parts.push_back(text.substr(start, at - start));
  parts.push_back(text.substr(start));
  return parts;
}

// Rule 1: what CLI11's type name ("TEXT:{table,json}", "BOOLEAN", "TEXT:FILE") says of the value.
std::optional<Value> value_by_cli11(const CLI::Option& option) {
  for (const std::string& part : split(option.get_type_name(), ':')) {
    if (part == "BOOLEAN") return Value{ValueKind::words, {"true", "false"}};
    if (part.size() >= 2 && part.front() == '{' && part.back() == '}')
      return Value{ValueKind::words, split(part.substr(1, part.size() - 2), ',')};
    if (part == "FILE" || part == "PATH(existing)") return Value{ValueKind::files, {}};
    if (part == "DIR") return Value{ValueKind::directories, {}};
  }
  return std::nullopt;
}

// Rule 2.
std::optional<Value> value_by_rule(const std::string& command, const CLI::Option& option) {
  std::vector<std::string> names;
  if (option.get_positional()) names.push_back(option.get_name(true));
  for (const std::string& l : option.get_lnames()) names.push_back(one_spelling("--" + l));
  const ValueRule* found = nullptr;
  for (const ValueRule& rule : kValueRules)
    for (const std::string& name : names)
      if (name == one_spelling(rule.option) && (rule.command == command || (rule.command.empty() && found == nullptr)))
        found = &rule;
  if (found == nullptr) return std::nullopt;
  return Value{found->kind, found->words ? found->words() : std::vector<std::string>{}};
}

Value value_of(const std::string& command, const CLI::Option& option) {
  if (std::optional<Value> value = value_by_cli11(option)) return *value;
  if (std::optional<Value> value = value_by_rule(command, option)) return *value;
  return {};
}

struct CompletedOption {
  std::vector<std::string> names;  // every spelling; a positional argument's name
  std::string description;
  bool takes_value = false;
  Value value;
};

struct CompletedCommand {
  std::string path;  // "switchyard bench decode"
  std::vector<std::pair<std::string, std::string>> subcommands;  // name, description
  std::vector<CompletedOption> options;
  std::vector<CompletedOption> positionals;  // in order
};

// A description as a completion menu shows it: its first clause, on one line, at most ~70 characters.
std::string short_description(const std::string& text) {
  std::string out = text.substr(0, text.find("; "));
  for (char& c : out)
    if (c == '\n' || c == '\t') c = ' ';
  constexpr std::size_t kShown = 70;
  if (out.size() > kShown) {
    const std::size_t space = out.rfind(' ', kShown);
    out = out.substr(0, space == std::string::npos ? kShown : space) + " ...";
  }
  return out;
}

// The commands below `app` that CLI11 shows in --help (named, not hidden), `app` first, depth first.
void collect(const CLI::App& app, const std::string& path, std::vector<CompletedCommand>& out) {
  CompletedCommand command;
  command.path = path;
  std::vector<const CLI::App*> subcommands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!sub->get_name().empty() && !sub->get_group().empty()) {
      subcommands.push_back(sub);
      command.subcommands.emplace_back(sub->get_name(), short_description(sub->get_description()));
    }
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group().empty()) continue;  // hidden from --help
    CompletedOption completed;
    completed.description = short_description(option->get_description());
    if (option->get_positional()) {
      completed.names = {option->get_name(true)};
      completed.takes_value = true;
      completed.value = value_of(path, *option);
      command.positionals.push_back(std::move(completed));
      continue;
    }
    completed.names = flag_spellings(*option);
    completed.takes_value = option->get_items_expected_min() > 0;
    if (completed.takes_value) completed.value = value_of(path, *option);
    command.options.push_back(std::move(completed));
  }
  out.push_back(std::move(command));
  for (const CLI::App* sub : subcommands) collect(*sub, path + " " + sub->get_name(), out);
}

// Names and values go into the scripts bare, as `case` patterns and compgen word lists (which
// expand $ and `), so they must be plain words; the option tables hold nothing else.
const std::string& plain_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                              "0123456789_-.,+:/@%") == std::string::npos;
  if (!plain) throw std::logic_error("completion: '" + word + "' is not a plain word a shell script can hold bare");
  return word;
}

// `text` in single quotes, for either shell.
std::string quoted(const std::string& text) { return "'" + replace_all(text, "'", "'\\''") + "'"; }

std::string joined_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : " ") + plain_word(word);
  return out;
}

std::string pattern(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : "|") + plain_word(name);
  return out;
}

// The shared tables: which words name subcommands, which options take a value, what a value
// completes to, and the positional arguments.
std::string shared_tables(const std::vector<CompletedCommand>& commands) {
  std::string is_subcommand, takes_value, value, positional;
  for (const CompletedCommand& command : commands) {
    const std::string label = "    " + quoted(command.path) + ")";
    if (!command.subcommands.empty()) {
      std::vector<std::string> names;
      for (const auto& sub : command.subcommands) names.push_back(sub.first);
      is_subcommand += label + " case $2 in " + pattern(names) + ") return 0 ;; esac ;;\n";
    }
    std::vector<std::string> with_value;
    std::string values;
    for (const CompletedOption& option : command.options) {
      if (!option.takes_value) continue;
      with_value.insert(with_value.end(), option.names.begin(), option.names.end());
      if (option.value.kind == ValueKind::text) continue;
      values += "        " + pattern(option.names) + ") _switchyard_kind=" +
                (option.value.kind == ValueKind::files         ? std::string("files")
                 : option.value.kind == ValueKind::directories ? std::string("directories")
                                                               : "words _switchyard_words=" + quoted(joined_words(option.value.words))) +
                " ;;\n";
    }
    for (std::size_t i = 0; i < command.positionals.size(); ++i) {
      const CompletedOption& argument = command.positionals[i];
      positional += "    " + quoted(command.path + " " + std::to_string(i)) + ") _switchyard_words=" +
                    plain_word(argument.names.front()) + " ;;\n";
      if (argument.value.kind == ValueKind::words)
        values += "        " + plain_word(argument.names.front()) + ") _switchyard_kind=words _switchyard_words=" +
                  quoted(joined_words(argument.value.words)) + " ;;\n";
    }
    if (!with_value.empty()) takes_value += label + " case $2 in " + pattern(with_value) + ") return 0 ;; esac ;;\n";
    if (!values.empty()) value += label + "\n      case $2 in\n" + values + "      esac ;;\n";
  }
  return "# Whether word $2 names a subcommand of command $1 (\"switchyard bench\").\n"
         "_switchyard_is_subcommand() {\n  case $1 in\n" + is_subcommand + "  esac\n  return 1\n}\n\n"
         "# Whether option $2 of command $1 takes a value (the next word, or after '=').\n"
         "_switchyard_takes_value() {\n  case $1 in\n" + takes_value + "  esac\n  return 1\n}\n\n"
         "# What the value of option (or positional argument) $2 of command $1 completes to: sets _switchyard_kind\n"
         "# (files, directories, words or text) and, for words, _switchyard_words.\n"
         "_switchyard_value() {\n  _switchyard_kind=text\n  _switchyard_words=\n  case $1 in\n" + value + "  esac\n}\n\n"
         "# The name of positional argument $2 (from 0) of command $1 in _switchyard_words; fails where it has none.\n"
         "_switchyard_positional() {\n  case \"$1 $2\" in\n" + positional + "    *) return 1 ;;\n  esac\n}\n\n";
}

// The words typed before the cursor, in the syntax bash and zsh share.
constexpr const char* kParser = R"(# Reads the words after "switchyard" up to the cursor's: sets _switchyard_command to the command they
# name ("switchyard bench decode"), _switchyard_option to the option whose value the cursor's word
# is ("" for none) and _switchyard_positionals to the count of positional arguments given.
_switchyard_parse() {
  _switchyard_command=switchyard
  _switchyard_option=
  _switchyard_positionals=0
  local word
  for word in "$@"; do
    if [[ -n $_switchyard_option ]]; then
      # bash splits "--flag=value" into "--flag" "=" "value".
      [[ $word == "=" ]] || _switchyard_option=
      continue
    fi
    case $word in
      -*=*) ;;
      -*) _switchyard_takes_value "$_switchyard_command" "$word" && _switchyard_option=$word ;;
      *)
        if _switchyard_is_subcommand "$_switchyard_command" "$word"; then
          _switchyard_command="$_switchyard_command $word"
        else
          _switchyard_positionals=$((_switchyard_positionals + 1))
        fi ;;
    esac
  done
}

)";

std::string bash_script(const std::vector<CompletedCommand>& commands) {
  std::string subcommands, flags;
  for (const CompletedCommand& command : commands) {
    std::vector<std::string> names;
    for (const auto& sub : command.subcommands) names.push_back(sub.first);
    if (!names.empty()) subcommands += "    " + quoted(command.path) + ") _switchyard_words=" + quoted(joined_words(names)) + " ;;\n";
    names.clear();
    for (const CompletedOption& option : command.options) names.insert(names.end(), option.names.begin(), option.names.end());
    flags += "    " + quoted(command.path) + ") _switchyard_words=" + quoted(joined_words(names)) + " ;;\n";
  }
  return "# bash completion for switchyard, made by `switchyard completion bash` from its option tables.\n"
         "# Install: source <(switchyard completion bash), e.g. in ~/.bashrc, or save it as\n"
         "# ~/.local/share/bash-completion/completions/switchyard.\n\n" +
         shared_tables(commands) +
         "# The subcommands of command $1 in _switchyard_words.\n"
         "_switchyard_subcommands() {\n  _switchyard_words=\n  case $1 in\n" + subcommands + "  esac\n}\n\n"
         "# The flags of command $1, every spelling, in _switchyard_words.\n"
         "_switchyard_flags() {\n  _switchyard_words=\n  case $1 in\n" + flags + "  esac\n}\n\n" + kParser +
         R"(_switchyard() {
  local cur=${COMP_WORDS[COMP_CWORD]} option
  COMPREPLY=()
  _switchyard_parse "${COMP_WORDS[@]:1:COMP_CWORD-1}"
  option=$_switchyard_option
  if [[ -z $option && $cur != -* ]] && _switchyard_positional "$_switchyard_command" "$_switchyard_positionals"; then
    option=$_switchyard_words
  fi
  if [[ -n $option ]]; then
    # "--flag=": the value starts after the '=', which bash gives as a word of its own.
    [[ $cur == "=" ]] && cur=
    _switchyard_value "$_switchyard_command" "$option"
    case $_switchyard_kind in
      files) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
      directories) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
      words) mapfile -t COMPREPLY < <(compgen -W "$_switchyard_words" -- "$cur") ;;
    esac
    return 0
  fi
  if [[ $cur != -* ]]; then
    _switchyard_subcommands "$_switchyard_command"
    if [[ -n $_switchyard_words ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$_switchyard_words" -- "$cur")
      return 0
    fi
    # A command without subcommands offers its flags where nothing is typed yet.
    [[ -n $cur ]] && return 0
  fi
  _switchyard_flags "$_switchyard_command"
  mapfile -t COMPREPLY < <(compgen -W "$_switchyard_words" -- "$cur")
  return 0
}

complete -F _switchyard switchyard
)";
}

// "name:description" for zsh's _describe, single-quoted.
std::string zsh_spec(const std::string& name, const std::string& description) {
  return quoted(replace_all(name, ":", "\\:") + (description.empty() ? "" : ":" + description));
}

std::string zsh_script(const std::vector<CompletedCommand>& commands) {
  std::string subcommands, flags;
  for (const CompletedCommand& command : commands) {
    std::string specs;
    for (const auto& sub : command.subcommands) specs += " " + zsh_spec(plain_word(sub.first), sub.second);
    if (!specs.empty()) subcommands += "    " + quoted(command.path) + ") _switchyard_specs=(" + specs + ") ;;\n";
    specs.clear();
    for (const CompletedOption& option : command.options)
      for (const std::string& name : option.names) specs += "\n      " + zsh_spec(plain_word(name), option.description);
    flags += "    " + quoted(command.path) + ") _switchyard_specs=(" + specs + ") ;;\n";
  }
  return "#compdef switchyard\n"
         "# zsh completion for switchyard, made by `switchyard completion zsh` from its option tables.\n"
         "# Install: source <(switchyard completion zsh) in ~/.zshrc after compinit, or save it as _switchyard\n"
         "# in a directory of $fpath.\n\n" +
         shared_tables(commands) +
         "# The subcommands of command $1 as _describe's \"name:description\", in _switchyard_specs.\n"
         "_switchyard_subcommands() {\n  _switchyard_specs=()\n  case $1 in\n" + subcommands + "  esac\n}\n\n"
         "# The flags of command $1, every spelling, as \"name:description\", in _switchyard_specs.\n"
         "_switchyard_flags() {\n  _switchyard_specs=()\n  case $1 in\n" + flags + "  esac\n}\n\n" + kParser +
         R"(_switchyard() {
  local cur=${words[CURRENT]} option
  local -a values
  _switchyard_parse "${(@)words[2,CURRENT-1]}"
  option=$_switchyard_option
  if [[ -z $option && $cur == -*=* ]]; then
    option=${cur%%=*}
    _switchyard_takes_value "$_switchyard_command" "$option" || return 1
    compset -P '*='
  fi
  if [[ -z $option && $cur != -* ]] && _switchyard_positional "$_switchyard_command" "$_switchyard_positionals"; then
    option=$_switchyard_words
  fi
  if [[ -n $option ]]; then
    _switchyard_value "$_switchyard_command" "$option"
    case $_switchyard_kind in
      files) _files ;;
      directories) _files -/ ;;
      words) values=(${=_switchyard_words}); compadd -a values ;;
      *) _message "the value of $option" ;;
    esac
    return
  fi
  if [[ $cur != -* ]]; then
    _switchyard_subcommands "$_switchyard_command"
    if (( ${#_switchyard_specs} )); then
      _describe -t commands 'switchyard command' _switchyard_specs
      return
    fi
  fi
  _switchyard_flags "$_switchyard_command"
  _describe -t options 'option' _switchyard_specs
}

if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
  # Loaded from $fpath by compinit, as the body of _switchyard: this call completes the word.
  _switchyard "$@"
elif (( $+functions[compdef] )); then
  compdef _switchyard switchyard
else
  print -u2 "switchyard completion: zsh's completion system is not started; put 'autoload -Uz compinit && compinit' before this in ~/.zshrc"
fi
)";
}

}  // namespace

Runner add_completion_command(CLI::App& app) {
  auto shell = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "completion", "print a shell completion script for bash or zsh: source <(switchyard completion bash)");
  sub->add_option("shell", *shell, "bash or zsh")->required();
  const CLI::App* root = &app;
  return [shell, root] {
    std::vector<CompletedCommand> commands;
    collect(*root, root->get_name(), commands);
    std::string script;
    if (*shell == "bash") script = bash_script(commands);
    else if (*shell == "zsh") script = zsh_script(commands);
    else
      throw InputError("completion: no completion script for " + quoted_excerpt(*shell) +
                       "; give bash or zsh (e.g. source <(switchyard completion bash))");
    std::fwrite(script.data(), 1, script.size(), stdout);
    return 0;
  };
}

}  // namespace switchyard::cli
