// switchyard check: the dry run. Places every module of the model by the profile, validates the
// plan and estimates memory per device, without touching weights.
#include <chrono>
#include <iostream>
#include <new>

#include "core/error.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "placement/report.h"

namespace switchyard::cli {
namespace {

// JSON text that cannot fail: bytes that are not UTF-8 (a path, a rule's regex) become U+FFFD
// instead of making dump() throw.
std::string json_text(const nlohmann::ordered_json& doc) {
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

struct CheckCommand {
  ModelOptions model;
  std::string format = "table";
  std::string explain;

  // `--format json` promises one JSON document on stdout whatever happens, so every failure, an
  // unexpected exception included, is reported as one; the table format prints errors on stderr.
  int run() const {
    try {
      return check();
    } catch (const InputError& e) {
      return fail("input", e.what(), e.exit_code());
    } catch (const std::bad_alloc&) {
      if (format != "json") throw;  // main reports it
      return fail("out-of-memory", "out of memory", kExitUsageOrIo);
    } catch (const std::exception& e) {
      if (format != "json") throw;  // main reports it as an internal error
      return fail("internal", std::string("internal error: ") + e.what(), kExitUsageOrIo);
    } catch (...) {
      if (format != "json") throw;
      return fail("internal", "internal error: an unknown exception", kExitUsageOrIo);
    }
  }

  int check() const {
    const auto start = std::chrono::steady_clock::now();
    const CheckOptions options = model.to_check_options();
    const CheckResult result = run_check(options);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!explain.empty()) {
      bool found = false;
      std::cout << explain_module(result, explain, found);
      if (!found) return kExitUsageOrIo;
    } else if (format == "json") {
      std::cout << json_text(check_to_json(result, options.budget)) << "\n";
    } else {
      std::cout << format_check_table(result, options.budget);
      std::cout << "checked " << result.plan.visited.size() << " modules in " << static_cast<int>(ms + 0.5) << " ms\n";
    }
    return result.diagnostics.has_errors() ? kExitBadContent : 0;
  }

  int fail(const char* code, const std::string& message, int exit_code) const {
    if (format == "json") {
      const nlohmann::ordered_json doc = {
          {"model", nullptr},
          {"modules", nlohmann::ordered_json::array()},
          {"rules", nlohmann::ordered_json::array()},
          {"transfer_map", nlohmann::ordered_json::object()},
          {"devices", nlohmann::ordered_json::array()},
          {"diagnostics",
           {{{"severity", "error"}, {"code", code}, {"message", message}, {"file", nullptr}, {"line", nullptr},
             {"column", nullptr}, {"rule_number", nullptr}}}}};
      std::cout << json_text(doc) << "\n";
    } else {
      std::cerr << "switchyard check: error: " << message << "\n";
    }
    return exit_code;
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
