#pragma once
// Diagnostics: problems found in a profile or a model, kept as values with a location until the
// command line prints them. Codes are stable identifiers that tests and JSON consumers rely on.
#include <optional>
#include <string>
#include <vector>

namespace switchyard {

enum class Severity { error, warning, note };
const char* severity_name(Severity severity);

struct SourceLocation {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based; 0 when unknown
};

struct Diagnostic {
  Severity severity = Severity::error;
  std::string code;     // e.g. "regex-compile", "layer-device-mismatch"
  std::string message;  // one line, says what is wrong and what would fix it
  SourceLocation location;
  std::optional<int> rule;  // 0-based rule index, when one rule is at fault
  std::string module;       // module name, when one module is at fault
};

class Diagnostics {
 public:
  Diagnostic& add(Severity severity, std::string code, std::string message, SourceLocation location = {},
                  std::optional<int> rule = std::nullopt);
  Diagnostic& error(std::string code, std::string message, SourceLocation location = {},
                    std::optional<int> rule = std::nullopt) {
    return add(Severity::error, std::move(code), std::move(message), std::move(location), rule);
  }
  Diagnostic& warning(std::string code, std::string message, SourceLocation location = {},
                      std::optional<int> rule = std::nullopt) {
    return add(Severity::warning, std::move(code), std::move(message), std::move(location), rule);
  }

  const std::vector<Diagnostic>& items() const { return items_; }
  std::size_t count(Severity severity) const;
  bool has_errors() const { return count(Severity::error) > 0; }
  // Stable order for printing: by file position, then by insertion.
  std::vector<Diagnostic> sorted() const;

 private:
  std::vector<Diagnostic> items_;
};

// "file:line:column: error: message [code]"
std::string format_diagnostic(const Diagnostic& diagnostic);

}  // namespace switchyard
