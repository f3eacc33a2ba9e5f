#include "core/diagnostics.h"

#include <algorithm>

namespace switchyard {

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::note: return "note";
  }
  return "error";
}

Diagnostic& Diagnostics::add(Severity severity, std::string code, std::string message,
                             SourceLocation location, std::optional<int> rule) {
  items_.push_back(Diagnostic{severity, std::move(code), std::move(message), std::move(location), rule, {}});
  return items_.back();
}

std::size_t Diagnostics::count(Severity severity) const {
  return static_cast<std::size_t>(std::count_if(items_.begin(), items_.end(),
                                                [&](const Diagnostic& d) { return d.severity == severity; }));
}

std::vector<Diagnostic> Diagnostics::sorted() const {
  std::vector<Diagnostic> out = items_;
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    // Diagnostics without a line (model-level findings) come after those that point into the file.
    const int la = a.location.line == 0 ? 1 << 30 : a.location.line;
    const int lb = b.location.line == 0 ? 1 << 30 : b.location.line;
    if (la != lb) return la < lb;
    return a.location.column < b.location.column;
  });
  return out;
}

std::string format_diagnostic(const Diagnostic& d) {
  std::string out;
  if (!d.location.file.empty()) {
    out += d.location.file;
    if (d.location.line > 0) {
      out += ":" + std::to_string(d.location.line);
      if (d.location.column > 0) out += ":" + std::to_string(d.location.column);
    }
    out += ": ";
  }
  out += severity_name(d.severity);
  out += ": ";
  out += d.message;
  out += " [" + d.code + "]";
  return out;
}

}  // namespace switchyard
