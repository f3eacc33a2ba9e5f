// switchyard split: an N-GPU profile from a base profile, balanced by bytes per GPU, and/or what
// llama.cpp's placement flags and --fit place written as a profile; checked before it is written.
#include <iostream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"
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
    CheckOptions target = model.to_check_options();
    const bool no_profile = target.profile.empty();
    // Without a profile, split writes what the flags (and, with --gpus, the layer division) place.
    const bool quick = !target.quick_rules.empty() || target.fit.enabled || no_profile;
    if (!model.gpus && !quick)
      throw InputError("split needs --gpus N (divide the profile's layers over N GPUs), or llama.cpp's flags or --fit "
                       "(write what they place as a profile)");
    // The base: the profile divided over --gpus (the profile as written without --gpus; nothing
    // without a profile, where the layer flags divide the layers).
    std::string base_text;
    std::vector<GpuShare> shares;
    if (!no_profile && model.gpus) {
      // The base is checked as written: its own GPUs, no GPU budgets (those are for the split).
      CheckOptions base_options = target;
      base_options.gpus.reset();
      base_options.budget.gpu_bytes.clear();
      base_options.quick_rules = {};
      base_options.fit.enabled = false;
      const CheckResult base = run_check(base_options);
      if (base.diagnostics.has_errors()) {
        for (const Diagnostic& d : base.diagnostics.sorted()) std::cerr << format_diagnostic(d) << "\n";
        std::cerr << "switchyard split: the base profile has errors; fix them first\n";
        return 1;
      }
      SplitResult split = split_profile(base, *model.gpus, target.budget, model.profile);
      base_text = std::move(split.yaml);
      shares = std::move(split.gpus);
    } else if (!no_profile) {
      base_text = read_input_file(target.profile, "profile", kMaxProfileBytes);
    }
    std::string yaml = base_text;
    std::optional<FitOutcome> fit;
    if (quick) {
      // The command line's rules, then the base; without a profile, a last rule sends what they do
      // not place to the default device, as check does without a profile.
      CheckOptions with_flags = target;
      if (!base_text.empty()) {
        with_flags.profile = "<split base>";
        with_flags.profile_text = base_text;
      }
      const CheckResult placed = run_check(with_flags);
      if (placed.diagnostics.has_errors()) {
        for (const Diagnostic& d : placed.diagnostics.sorted()) std::cerr << format_diagnostic(d) << "\n";
        std::cerr << "switchyard split: what the command line places has errors; nothing written\n";
        return 1;
      }
      fit = placed.fit;
      yaml = "# Written by `switchyard split`: the command line's placement flags as rules, tried first";
      if (fit) yaml += "\n# " + describe_fit(*fit);
      yaml += "\n\n" + placed.quick_rules_yaml;
      if (!base_text.empty()) yaml += "# ---- the base profile ----\n" + base_text;
      else
        yaml += "# everything else on the default device\n- match:\n    name: \".\"\n  replace:\n    class: \"default\"\n"
                "    kwargs:\n      generate_device: \"" + placed.plan.options.default_device.str() +
                "\"\n      prefill_device: \"" + placed.plan.options.default_device.str() + "\"\n";
    }
    // The written profile is checked as a profile alone: no flags.
    target.quick_rules = {};
    target.fit.enabled = false;
    const bool to_file = !out.empty() && out != "-";
    // The split is checked before it is written: a profile that fails its own check never replaces
    // the file at --out, and a write that fails (disk full, file-size limit) leaves that file whole.
    target.profile = to_file ? out : std::string("<split output>");
    target.profile_text = yaml;
    const CheckResult check = run_check(target);
    const bool passes = !check.diagnostics.has_errors();
    if (!to_file) std::cout << yaml;
    std::ostream& log = to_file ? std::cout : std::cerr;
    if (fit) log << describe_fit(*fit) << "\n";
    for (std::size_t g = 0; g < shares.size(); ++g) {
      const GpuShare& s = shares[g];
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
    if (to_file && passes) write_file_atomically(out, yaml);
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
  CLI::App* sub = app.add_subcommand("split", "write an N-GPU profile from a base profile, balanced by memory, or what llama.cpp's flags and --fit place");
  command->model.add_to(*sub);
  sub->add_option("-o,--out", command->out, "output YAML (default: standard output)");
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
