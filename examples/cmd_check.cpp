// switchyard check: the dry run. Places every module of the model by the profile, validates the
// plan and estimates memory per device, without touching weights.
#include <chrono>
#include <iostream>

#include "core/error.h"
#include "examples/commands.h"
#include "examples/model_options.h"
#include "placement/report.h"

namespace switchyard::cli {
namespace {

struct CheckCommand {
  ModelOptions model;
  std::string format = "table";
  std::string explain;

  int run() const {
    const auto start = std::chrono::steady_clock::now();
    CheckOptions options;
    try {
      options = model.to_check_options();
      const CheckResult result = run_check(options);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!explain.empty()) {
        bool found = false;
        std::cout << explain_module(result, explain, found);
        if (!found) return 2;
      } else if (format == "json") {
        std::cout << check_to_json(result, options.budget).dump(2) << "\n";
      } else {
        std::cout << format_check_table(result, options.budget);
        std::cout << "checked " << result.plan.visited.size() << " modules in " << static_cast<int>(ms + 0.5) << " ms\n";
      }
      return result.diagnostics.has_errors() ? 1 : 0;
    } catch (const InputError& e) {
      if (format == "json") {
        nlohmann::ordered_json doc = {{"model", nullptr},       {"modules", nlohmann::ordered_json::array()},
                                      {"transfer_map", nlohmann::ordered_json::object()},
                                      {"devices", nlohmann::ordered_json::array()},
                                      {"diagnostics", {{{"severity", "error"}, {"code", "input"}, {"message", e.what()},
                                                        {"file", nullptr}, {"line", nullptr}, {"column", nullptr},
                                                        {"rule", nullptr}}}}};
        std::cout << doc.dump(2) << "\n";
      } else {
        std::cerr << "switchyard check: error: " << e.what() << "\n";
      }
      return e.exit_code();
    }
  }
};

}  // namespace

Runner add_check_command(CLI::App& app) {
  auto command = std::make_shared<CheckCommand>();
  CLI::App* sub = app.add_subcommand("check", "dry run: where every module goes, memory per device, profile errors");
  command->model.add_to(*sub);
  sub->add_option("--format", command->format, "table or json")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  sub->add_option("--explain", command->explain, "show each rule tried for one module, e.g. model.layers.20.mlp.experts");
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
