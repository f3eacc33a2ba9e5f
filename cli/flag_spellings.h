#pragma once
// How a command line may spell a flag, settled before CLI11 parses it: llama.cpp's multi-letter
// short flags (which CLI11 cannot name), either separator in a multi-word flag (--max-new-tokens
// and --max_new_tokens), and, for a flag the subcommand does not know, the command that takes it
// or a "did you mean". The shell completion (`switchyard completion`) offers the same spellings.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace switchyard::cli {

// A llama.cpp short flag of more than one letter and the long flag it is here: -ot -ngl -ts -mg
// -np -sys for --override-tensor --n-gpu-layers --tensor-split --main-gpu --parallel
// --system-prompt. Each is rewritten only where the subcommand takes the long flag.
struct LlamaCppShortFlag {
  std::string_view short_flag, long_flag;
};
std::span<const LlamaCppShortFlag> llama_cpp_short_flags();

// Every name a command line may give `option`: its short names ("-n"), its long names in both
// spellings ("--max_new_tokens", "--max-new-tokens") and the llama.cpp short flags of them ("-ngl").
std::vector<std::string> flag_spellings(const CLI::Option& option);

// Rewrites, in place, the arguments after the program's name as CLI11 reads them, for the
// subcommand (and bench's own subcommand) that they name: a llama.cpp short flag ("-ngl 99",
// "-ot=REGEX=CPU") as its long flag, and "--foo-bar[=v]" as "--foo_bar[=v]" where the subcommand
// knows only that spelling (and the reverse). An option's value is left alone, whatever it looks
// like. Throws InputError (exit 2) for a flag the subcommand takes in no spelling: the message
// names the flag as typed, and the commands that take it, or else the closest of the subcommand's own.
void normalize_flag_spellings(const CLI::App& app, std::vector<std::string>& args);

}  // namespace switchyard::cli
