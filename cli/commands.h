#pragma once
// Subcommands of the `switchyard` executable. Each registers its options on the CLI11 app and
// returns a runner that yields the process exit status (0 ok, 1 bad profile/model, 2 usage/IO).
#include <functional>

#include <CLI/CLI.hpp>

namespace switchyard::cli {

using Runner = std::function<int()>;

Runner add_check_command(CLI::App& app);
Runner add_run_command(CLI::App& app);
Runner add_split_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_make_model_command(CLI::App& app);
Runner add_tokenize_command(CLI::App& app);
Runner add_serve_command(CLI::App& app);
Runner add_chat_command(CLI::App& app);
// `switchyard completion bash|zsh`: walks the whole of `app` when it runs, so register it on the
// top-level app; `app` must outlive the runner.
Runner add_completion_command(CLI::App& app);

}  // namespace switchyard::cli
