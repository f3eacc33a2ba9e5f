#pragma once
// Progress of a long job over bytes, on stderr: a model built (CausalLMOptions::on_progress,
// "loading") or written (make-model, "writing"). On a terminal one line rewritten in place (bytes,
// GB/s, time left); otherwise a plain line at each tenth. Nothing for a job that ends within its
// first second.
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace switchyard::cli {

class LoadProgress {
 public:
  // To stderr, as a terminal line where stderr is one, quiet for the first second; `verb` opens
  // each line ("loading: 1.20 of 8.40 GB ...").
  explicit LoadProgress(const char* verb = "loading");
  // To `out`: `terminal` picks the rewritten line; nothing before `quiet_seconds`.
  LoadProgress(std::FILE* out, bool terminal, double quiet_seconds, const char* verb = "loading");
  void operator()(std::uint64_t done_bytes, std::uint64_t total_bytes);

 private:
  std::FILE* out_;
  const char* verb_;
  std::chrono::steady_clock::time_point start_, last_;
  bool terminal_ = false;
  double quiet_seconds_ = 1.0;
  bool shown_ = false;
  int last_tenth_ = -1;
};

}  // namespace switchyard::cli
