// The switchyard command line: one executable, one subcommand per job.
#include <algorithm>
#include <csignal>
#include <iostream>
#include <map>
#include <new>

#include "core/error.h"
#include "core/mapped_file.h"
#include "cli/commands.h"
#include "cli/flag_spellings.h"
#include "cli/version.h"

int main(int argc, char** argv) {
  // Past the file-size limit a write fails with EFBIG, which the writers report, instead of the
  // signal killing the process with a half-written file.
  std::signal(SIGXFSZ, SIG_IGN);
  // A model file truncated under us while mapped is a message naming it and exit 2, not a SIGBUS.
  switchyard::report_mapped_file_faults();
  CLI::App app{"place MoE model modules on GPUs and CPU by YAML rules, check profiles, run models", "switchyard"};
  app.require_subcommand(1);
  app.set_version_flag("--version", switchyard::cli::version_text, "print the version, commit, CUDA backend and CPU kernels");
  std::map<std::string, switchyard::cli::Runner> runners;
  runners["run"] = switchyard::cli::add_run_command(app);
  runners["check"] = switchyard::cli::add_check_command(app);
  runners["split"] = switchyard::cli::add_split_command(app);
  runners["bench"] = switchyard::cli::add_bench_command(app);
  runners["make-model"] = switchyard::cli::add_make_model_command(app);
  runners["tokenize"] = switchyard::cli::add_tokenize_command(app);
  runners["serve"] = switchyard::cli::add_serve_command(app);
  runners["chat"] = switchyard::cli::add_chat_command(app);
  runners["completion"] = switchyard::cli::add_completion_command(app);
  try {
    // llama.cpp's -ot, which CLI11 cannot name, and either spelling of a multi-word flag; the
    // arguments are parsed from the back.
    std::vector<std::string> args(argv + 1, argv + argc);
    switchyard::cli::normalize_flag_spellings(app, args);
    std::reverse(args.begin(), args.end());
    app.parse(args);
  } catch (const switchyard::InputError& e) {
    std::cerr << e.what() << "\n";
    return e.exit_code();
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "switchyard: " << e.what() << "\nrun 'switchyard --help' or 'switchyard SUBCOMMAND --help'\n";
    return 2;
  }
  try {
    for (CLI::App* sub : app.get_subcommands()) {
      // bench has its own subcommands; its runner dispatches them.
      return runners.at(sub->get_name())();
    }
  } catch (const switchyard::InputError& e) {
    std::cerr << "switchyard: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::cerr << "switchyard: error: out of memory (lower --max_context, or place fewer weights on this machine)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "switchyard: internal error: " << e.what() << "\n";
    return 2;
  }
  return 2;
}
