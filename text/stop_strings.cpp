#include "text/stop_strings.h"

#include <algorithm>

namespace switchyard::text {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopStrings::push(std::string_view piece) {
  if (stopped_) return "";
  if (stops_.empty()) return std::string(piece);
  pending_.append(piece);
  // Generation ends where a stop string first completes; the text ends before it (the one that
  // starts first, where several complete at the same byte). Independent of how text is split into pieces.
  std::size_t first = std::string::npos, first_end = std::string::npos;
  for (const std::string& s : stops_) {
    const std::size_t at = pending_.find(s);
    if (at == std::string::npos) continue;
    const std::size_t end = at + s.size();
    if (end < first_end || (end == first_end && at < first)) first = at, first_end = end;
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail of pending_ that begins some stop string.
  std::size_t keep = 0;
  for (const std::string& s : stops_)
    for (std::size_t n = std::min(s.size() - 1, pending_.size()); n > keep; --n)
      if (std::string_view(pending_).substr(pending_.size() - n) == std::string_view(s).substr(0, n)) {
        keep = n;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StopStrings::finish() {
  std::string out = stopped_ ? std::string() : std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace switchyard::text
