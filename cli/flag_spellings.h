#pragma once
// How a command line may spell a flag, settled before CLI11 parses it: llama.cpp's multi-letter
// short flags (which CLI11 cannot name), either separator in a multi-word flag (--max-new-tokens
// and --max_new_tokens), and a "did you mean" for a flag the subcommand does not know.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace switchyard::cli {

// llama.cpp's multi-letter short flags as the long ones CLI11 knows: -ot, -ngl, -ts, -mg and -np
// -> --override-tensor, --n-gpu-layers, --tensor-split, --main-gpu, --parallel (also
// "-ot=VALUE"). Returns the arguments after argv[0], the others unchanged.
std::vector<std::string> rewrite_llama_cpp_flags(int argc, const char* const* argv);

// Rewrites, in place, each "--foo-bar[=v]" that the subcommand named by `args` (the arguments
// after the program's name, in order) does not know as "--foo_bar[=v]" where it knows that one,
// and the reverse; an option's value is left alone. Throws InputError (exit 2) for a flag that
// the subcommand knows in neither spelling, naming the subcommand and the closest of its own flags.
void normalize_flag_spellings(const CLI::App& app, std::vector<std::string>& args);

}  // namespace switchyard::cli
