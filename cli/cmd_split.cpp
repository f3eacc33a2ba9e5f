// switchyard split: an N-GPU profile from a base profile, balanced by bytes per GPU, then checked.
#include <iostream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/units.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "placement/report.h"
#include "placement/split.h"

namespace switchyard::cli {
namespace {

struct SplitCommand {
  ModelOptions model;
  std::string out;

  int run() const {
    if (!model.gpus) throw InputError("split needs --gpus N");
    CheckOptions target = model.to_check_options();
    if (!target.quick_rules.empty())
      throw InputError("split writes a profile from a profile: llama.cpp's flags (-ot, --cpu-moe, --n-cpu-moe) are not "
                       "written into split profiles yet; put them on the commands that use the split profile");
    // The base is checked as written: its own GPUs, no GPU budgets (those are for the split).
    CheckOptions base_options = target;
    base_options.gpus.reset();
    base_options.budget.gpu_bytes.clear();
    const CheckResult base = run_check(base_options);
    if (base.diagnostics.has_errors()) {
      for (const Diagnostic& d : base.diagnostics.sorted()) std::cerr << format_diagnostic(d) << "\n";
      std::cerr << "switchyard split: the base profile has errors; fix them first\n";
      return 1;
    }
    const SplitResult split = split_profile(base, *model.gpus, target.budget, model.profile);
    const bool to_file = !out.empty() && out != "-";
    // The split is checked before it is written: a profile that fails its own check never replaces
    // the file at --out, and a write that fails (disk full, file-size limit) leaves that file whole.
    target.profile = to_file ? out : std::string("<split output>");
    target.profile_text = split.yaml;
    const CheckResult check = run_check(target);
    const bool passes = !check.diagnostics.has_errors();
    if (!to_file) std::cout << split.yaml;
    std::ostream& log = to_file ? std::cout : std::cerr;
    for (std::size_t g = 0; g < split.gpus.size(); ++g) {
      const GpuShare& s = split.gpus[g];
      log << "cuda:" << g << "  layers " << s.first_layer << "-" << s.last_layer << "  " << format_bytes(s.bytes);
      if (s.budget_bytes) log << " of " << format_bytes(s.budget_bytes);
      log << "\n";
    }
    for (Diagnostic d : check.diagnostics.sorted()) {
      // Lines of a profile that was not written point into what would have been written, not
      // into the file of that name, which is left as it was.
      if (to_file && !passes && d.location.file == out) d.location.file = out + " (not written)";
      log << format_diagnostic(d) << "\n";
    }
    if (to_file && passes) write_file_atomically(out, split.yaml);
    log << "check of the split profile: " << check.diagnostics.count(Severity::error) << " error(s), "
        << check.diagnostics.count(Severity::warning) << " warning(s)";
    if (to_file && passes) log << "; wrote " << out;
    if (to_file && !passes)
      log << "; " << out << " not written (fix the errors above; without -o the split profile goes to standard output)";
    log << "\n";
    return check.diagnostics.has_errors() ? 1 : 0;
  }
};

}  // namespace

Runner add_split_command(CLI::App& app) {
  auto command = std::make_shared<SplitCommand>();
  CLI::App* sub = app.add_subcommand("split", "write an N-GPU profile from a base profile, balanced by memory");
  command->model.add_to(*sub);
  sub->add_option("-o,--out", command->out, "output YAML (default: standard output)");
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
