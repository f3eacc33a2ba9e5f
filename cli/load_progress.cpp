#include "cli/load_progress.h"

#include <unistd.h>

#include <cstdio>

namespace switchyard::cli {

LoadProgress::LoadProgress(const char* verb) : LoadProgress(stderr, isatty(STDERR_FILENO) == 1, 1.0, verb) {}

LoadProgress::LoadProgress(std::FILE* out, bool terminal, double quiet_seconds, const char* verb)
    : out_(out), verb_(verb), start_(std::chrono::steady_clock::now()), last_(start_), terminal_(terminal), quiet_seconds_(quiet_seconds) {}

void LoadProgress::operator()(std::uint64_t done, std::uint64_t total) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const bool finished = done >= total;
  if (seconds < quiet_seconds_ && !shown_) return;  // quick loads stay quiet
  const double gb = 1e9;
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  const double left = rate > 0 ? static_cast<double>(total - done) / rate : 0;
  const int percent = total > 0 ? static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)) : 100;
  if (terminal_) {
    if (!finished && shown_ && now - last_ < std::chrono::milliseconds(100)) return;
    std::fprintf(out_, "\r%s: %.2f of %.2f GB (%3d%%), %.2f GB/s, %.0f s left   ", verb_, static_cast<double>(done) / gb,
                 static_cast<double>(total) / gb, percent, rate / gb, left);
    if (finished) std::fprintf(out_, "\n");
  } else {
    const int tenth = percent / 10;
    if (tenth == last_tenth_ && !finished) return;
    last_tenth_ = tenth;
    std::fprintf(out_, "%s: %.2f of %.2f GB (%d%%), %.2f GB/s, %.0f s left\n", verb_, static_cast<double>(done) / gb,
                 static_cast<double>(total) / gb, percent, rate / gb, left);
  }
  std::fflush(out_);
  shown_ = true;
  last_ = now;
}

}  // namespace switchyard::cli
