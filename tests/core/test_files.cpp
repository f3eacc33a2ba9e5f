// Reading user-named files (InputFile: only regular files, with caps; MappedFile's fault report
// for a file truncated while mapped) and writing files that a failure never leaves half-written
// (AtomicFile).
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "core/atomic_file.h"
#include "core/input_file.h"
#include "core/mapped_file.h"
#include "tests/core_test_support.h"

namespace sy = switchyard;
using sy::core_testing::contains;
using sy::core_testing::input_error_message;
using sy::core_testing::SeededRng;
using sy::core_testing::TempDir;
using sy::core_testing::read_file;
using sy::core_testing::write_file;

namespace {

// Files in `dir` whose names start with '.', the temporaries AtomicFile writes.
int hidden_files(const std::filesystem::path& dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) n += entry.path().filename().string()[0] == '.';
  return n;
}

}  // namespace

TEST_CASE("InputFile reads regular files whole and refuses what is not one, by name") {
  TempDir dir;
  SeededRng rng;
  INFO("seed " << rng.seed);
  const std::string bytes = rng.bytes(1 + rng.below(100000));
  write_file(dir / "rules.yaml", bytes);
  CHECK(sy::read_input_file(dir / "rules.yaml", "profile", 1 << 20) == bytes);

  const std::string too_big = input_error_message([&] { sy::read_input_file(dir / "rules.yaml", "profile", bytes.size() - 1); });
  CHECK(contains(too_big, "profile larger than"));
  CHECK(contains(too_big, "rules.yaml"));

  CHECK(contains(input_error_message([&] { sy::read_input_file(dir.path(), "profile", 1 << 20); }), "is a directory"));
  CHECK(contains(input_error_message([&] { sy::read_input_file(dir / "absent.yaml", "profile", 1 << 20); }), "no such file"));
  // Devices and FIFOs would never end or never start; both are refused at once, by what they are.
  CHECK(contains(input_error_message([&] { sy::read_input_file("/dev/zero", "profile", 1 << 20); }), "character device"));
  REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);
  CHECK(contains(input_error_message([&] { sy::read_input_file(dir / "pipe", "config.json", 1 << 20); }), "FIFO"));
  // /proc files report size 0 and hold data: refused, not read as empty (config.json, the index,
  // a profile alike).
  if (std::filesystem::exists("/proc/self/status"))
    CHECK(contains(input_error_message([&] { sy::read_input_file("/proc/self/status", "config.json", 1 << 20); }),
                   "config.json's size reads 0 but it holds data"));
  write_file(dir / "empty.json", "");
  CHECK(sy::read_input_file(dir / "empty.json", "config.json", 1 << 20).empty());
  // A symlink loop says so instead of failing later somewhere else.
  std::filesystem::create_symlink(dir / "loop-b", dir / "loop-a");
  std::filesystem::create_symlink(dir / "loop-a", dir / "loop-b");
  CHECK(contains(input_error_message([&] { sy::read_input_file(dir / "loop-a", "config.json", 1 << 20); }),
                 "symbolic links"));
}

TEST_CASE("InputFile::read_at reads any range exactly and calls a short file an error") {
  TempDir dir;
  SeededRng rng;
  INFO("seed " << rng.seed);
  const std::string bytes = rng.bytes(4096 + rng.below(4096));
  write_file(dir / "weights", bytes);
  const sy::InputFile file = sy::InputFile::open(dir / "weights", "weights file");
  CHECK(file.size() == bytes.size());
  for (int trial = 0; trial < 20; ++trial) {
    const std::size_t begin = rng.below(bytes.size());
    const std::size_t count = rng.below(bytes.size() - begin + 1);
    std::string got(count, '\0');
    file.read_at(begin, got.data(), count);
    CHECK(got == bytes.substr(begin, count));
  }
  std::string past(16, '\0');
  CHECK(contains(input_error_message([&] { file.read_at(bytes.size() - 8, past.data(), 16); }), "ended early"));
}

TEST_CASE("AtomicFile replaces a file only when committed, and leaves no temporary behind") {
  TempDir dir;
  SeededRng rng;
  INFO("seed " << rng.seed);
  const std::string old_text = rng.bytes(1000), new_text = rng.bytes(5000);
  write_file(dir / "out.yaml", old_text);
  {
    sy::AtomicFile file(dir / "out.yaml");
    file.write(new_text.substr(0, 2000));
    CHECK(read_file(dir / "out.yaml") == old_text);  // nothing visible before the commit
    // Destroyed without commit: an error path.
  }
  CHECK(read_file(dir / "out.yaml") == old_text);
  CHECK(hidden_files(dir.path()) == 0);

  sy::write_file_atomically(dir / "out.yaml", new_text);
  CHECK(read_file(dir / "out.yaml") == new_text);
  CHECK(hidden_files(dir.path()) == 0);

  sy::write_file_atomically(dir / "fresh.json", new_text);
  CHECK(read_file(dir / "fresh.json") == new_text);

  CHECK(contains(input_error_message([&] { sy::AtomicFile(dir.path()); }), "is a directory"));
  CHECK(contains(input_error_message([&] { sy::AtomicFile(dir / "no-such-folder" / "x.yaml"); }), "cannot write there"));
}

TEST_CASE("AtomicFile: a write past the file-size limit is an error and the old file survives") {
  TempDir dir;
  SeededRng rng;
  INFO("seed " << rng.seed);
  const std::string old_text = rng.bytes(100);
  write_file(dir / "out.yaml", old_text);
  // In a child, so the limit and the ignored signal do not reach the test process.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const std::string big(100000, 'x');
    const std::string message = input_error_message([&] { sy::write_file_atomically(dir / "out.yaml", big); });
    ::_exit(contains(message, "write failed") && contains(message, "not written") ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_file(dir / "out.yaml") == old_text);
  CHECK(hidden_files(dir.path()) == 0);
}

namespace {

struct ChildRead {
  std::string stderr_text;
  int status = 0;
};

// What a child process that reads `address` with report_mapped_file_faults() installed writes to
// stderr, and its wait status. The child does nothing but the read: it was forked from a process
// with threads, so it allocates nothing.
ChildRead read_in_child(const volatile std::byte* address) {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(out[1], STDERR_FILENO);
    const struct rlimit no_core {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    sy::report_mapped_file_faults();
    const std::byte value = *address;
    ::_exit(static_cast<int>(value) == 0 ? 10 : 11);  // the read worked: no fault
  }
  ::close(out[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return {text, status};
}

}  // namespace

TEST_CASE("MappedFile: a read past the end of a file truncated while mapped names the file and exits 2, not SIGBUS") {
  TempDir dir;
  const std::filesystem::path file = dir / "weights.gguf";
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  write_file(file, std::string(4 * page, 'w'));
  const sy::MappedFile mapped = sy::MappedFile::open(file);
  std::filesystem::resize_file(file, page);  // another process cuts the file short
  const ChildRead fault = read_in_child(mapped.data() + 3 * page + 5);
  INFO(fault.stderr_text);
  REQUIRE(WIFEXITED(fault.status));
  CHECK(WEXITSTATUS(fault.status) == sy::kExitUsageOrIo);
  CHECK(contains(fault.stderr_text, "switchyard: error: " + file.string() + ": the file became shorter while it was mapped"));
  CHECK(contains(fault.stderr_text, "at byte " + std::to_string(3 * page + 5) + " of the " + std::to_string(4 * page)));

  // A read of a page still in the file is an ordinary read.
  const ChildRead ordinary = read_in_child(mapped.data() + 5);
  CHECK(ordinary.stderr_text.empty());
  CHECK((WIFEXITED(ordinary.status) && WEXITSTATUS(ordinary.status) == 11));
}

TEST_CASE("MappedFile: a SIGBUS outside every mapping keeps its default action") {
  // A mapping of a file that is not a MappedFile: its fault is none of the handler's business.
  TempDir dir;
  const std::filesystem::path file = dir / "other.bin";
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  write_file(file, std::string(2 * page, 'o'));
  std::FILE* handle = std::fopen(file.c_str(), "rb");
  REQUIRE(handle != nullptr);
  void* address = ::mmap(nullptr, 2 * page, PROT_READ, MAP_SHARED, ::fileno(handle), 0);
  std::fclose(handle);
  REQUIRE(address != MAP_FAILED);
  std::filesystem::resize_file(file, 0);
  const ChildRead foreign = read_in_child(static_cast<const std::byte*>(address) + page);
  CHECK(foreign.stderr_text.empty());
  CHECK((WIFSIGNALED(foreign.status) && WTERMSIG(foreign.status) == SIGBUS));
  ::munmap(address, 2 * page);
}
