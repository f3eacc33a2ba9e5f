// core/shared_library: opening a library at run time, and the errors a missing one gives.
#include <dlfcn.h>

#include <string>

#include "core/shared_library.h"
#include "tests/core_test_support.h"

using namespace switchyard;
using namespace switchyard::core_testing;

namespace {

// What dlopen itself says about `file`, to compare the message with.
std::string dlopen_reason(const std::string& file) {
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(handle == nullptr, file << " loads");
  const char* reason = dlerror();
  REQUIRE(reason != nullptr);
  return reason;
}

}  // namespace

TEST_CASE("shared library: a library that does not load is an exit-2 error naming each file and dlerror's reason") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  TempDir dir;
  const std::string missing = "libswitchyard-test-missing-" + std::to_string(rng.engine()) + ".so.1";
  // A file that exists but is not a shared object: dlopen gives a different reason than for a missing one.
  const std::string not_elf = (dir / "libnot-elf.so").string();
  write_file(not_elf, rng.bytes(64 + rng.below(512)));
  const std::vector<std::string> candidates = {missing, not_elf};
  const auto open = [&] { open_shared_library(candidates, "the test library (for a test)", "build it first"); };
  CHECK(input_error_exit_code(open) == kExitUsageOrIo);
  const std::string message = input_error_message(open);
  INFO(message);
  CHECK(message.starts_with("cannot load the test library (for a test): tried "));
  CHECK(contains(message, missing + ": " + dlopen_reason(missing)));
  CHECK(contains(message, not_elf + ": " + dlopen_reason(not_elf)));
  CHECK(message.ends_with("; build it first"));
}

TEST_CASE("shared library: the first candidate that loads is opened; its symbols are found, a missing one is an error") {
  // The C library is in every process; a missing candidate before it is skipped.
  const SharedLibrary libc = open_shared_library({"libswitchyard-test-absent.so.0", "libc.so.6"}, "the C library", "-");
  CHECK(libc.file == "libc.so.6");
  using Strlen = std::size_t(const char*);
  auto* const strlen_there = reinterpret_cast<Strlen*>(libc.symbol("strlen"));
  REQUIRE(reinterpret_cast<void*>(strlen_there) != nullptr);
  SeededRng rng;
  INFO("seed " << rng.seed);
  std::string text(1 + rng.below(200), 'x');
  for (char& c : text) c = static_cast<char>('a' + rng.below(26));
  CHECK(strlen_there(text.c_str()) == text.size());

  const auto missing_symbol = [&] { libc.symbol("switchyard_test_no_such_symbol"); };
  CHECK(input_error_exit_code(missing_symbol) == kExitUsageOrIo);
  const std::string message = input_error_message(missing_symbol);
  CHECK(contains(message, "libc.so.6 has no symbol switchyard_test_no_such_symbol: "));
}

TEST_CASE("shared library: shared_library_loaded sees the libraries mapped into the process") {
  CHECK(shared_library_loaded("libc.so"));
  CHECK(shared_library_loaded("libstdc++"));
  CHECK_FALSE(shared_library_loaded("libswitchyard-test-never-loaded"));
}
