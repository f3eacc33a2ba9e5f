// Loading progress: a line rewritten in place on a terminal, a plain line per tenth elsewhere, the
// bytes and the percentage as the builder reports them, and silence for a quick load.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "cli/load_progress.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

namespace {

std::string written(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string text;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) text.append(buffer, n);
  return text;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("load progress: plain lines at each tenth off a terminal; one rewritten line on one; quiet when quick") {
  const std::uint64_t total = 4'000'000'000;
  {
    std::FILE* f = std::tmpfile();
    switchyard::cli::LoadProgress plain(f, /*terminal=*/false, /*quiet_seconds=*/0);
    for (int i = 1; i <= 100; ++i) plain(total / 100 * i, total);
    const std::string text = written(f);
    CHECK(count(text, "\n") == 11);  // 1%..9% once, each further tenth once, then 100%
    CHECK(text.find("loading: 4.00 of 4.00 GB (100%)") != std::string::npos);
    CHECK(count(text, "\r") == 0);
    std::fclose(f);
  }
  {
    std::FILE* f = std::tmpfile();
    switchyard::cli::LoadProgress terminal(f, /*terminal=*/true, /*quiet_seconds=*/0);
    terminal(total / 2, total);
    terminal(total, total);
    const std::string text = written(f);
    CHECK(text.starts_with("\rloading: 2.00 of 4.00 GB ( 50%)"));
    CHECK(text.find("\rloading: 4.00 of 4.00 GB (100%)") != std::string::npos);
    CHECK(count(text, "\n") == 1);  // the finished line ends it
    std::fclose(f);
  }
  {
    std::FILE* f = std::tmpfile();
    switchyard::cli::LoadProgress quick(f, /*terminal=*/false, /*quiet_seconds=*/60);
    quick(total / 2, total);
    quick(total, total);
    CHECK(written(f).empty());
    std::fclose(f);
  }
}

TEST_CASE("make-model shows its progress on stderr when the write takes more than a second, and the same files") {
  const switchyard::core_testing::TempDir dir;
  // 600 layers: about 150 MB, seconds of generating and writing on a 2-core machine.
  const std::string make = std::string(SWITCHYARD_BINARY) + " make-model --preset tiny-deepseek-v3 --layers 600 --out " +
                           (dir / "model").string();
  std::string progress;  // stderr alone
  FILE* pipe = popen((make + " 2>&1 > " + (dir / "stdout.txt").string()).c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) progress.append(buffer, n);
  REQUIRE(pclose(pipe) == 0);
  INFO(progress);
  CHECK(progress.find("writing: ") != std::string::npos);
  CHECK(progress.find(" GB/s, ") != std::string::npos);
  CHECK(progress.find(" s left") != std::string::npos);
  CHECK(progress.find("(100%)") != std::string::npos);  // the last line says it is whole
  const std::string stdout_text = switchyard::core_testing::read_file(dir / "stdout.txt");
  CHECK(stdout_text.find("wrote tiny-deepseek-v3 (600 layers") != std::string::npos);  // stdout as before
  CHECK(stdout_text.find("writing: ") == std::string::npos);
}
