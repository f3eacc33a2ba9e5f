// `switchyard tokenize --messages` on hostile files, through the binary: a file whose JSON would take
// far more memory than its text is refused, and memory running out while parsing is exit 2 with a
// message, never an abort (nlohmann's destructor allocates under noexcept).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "tests/test_support.h"
#include "tests/tokenizer_test_support.h"

using namespace switchyard;
using switchyard::testing::CommandResult;
using switchyard::testing::run_switchyard_with_env;
namespace fs = std::filesystem;

namespace {

fs::path write_messages(const std::string& name, const std::string& text) {
  const fs::path file = fs::temp_directory_path() / ("switchyard_tokenize_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(file, std::ios::binary) << text;
  return file;
}

std::string repeated(const std::string& item, std::size_t count) {
  std::string text = "[";
  text.reserve(count * (item.size() + 1) + 2);
  for (std::size_t i = 0; i < count; ++i) (text += item) += ',';
  text.back() = ']';
  return text;
}

}  // namespace

TEST_CASE("tokenize --messages: a costly document is refused and memory running out is exit 2, not an abort") {
  const std::string tokenizer = (testing::real_tokenizer("deepseek_v3")).string();
  const fs::path small = write_messages("small.json", R"([{"role": "user", "content": "hi"}])");
  const fs::path lists = write_messages("lists.json", repeated("[]", 2000000));
  const fs::path ones = write_messages("ones.json", repeated("1", 20u << 20));  // 40 MiB: 320 MiB as a document
  const CommandResult costly = run_switchyard_with_env("", "tokenize --tokenizer " + tokenizer + " --messages " + lists.string(), true);
  CHECK(costly.exit_code == 2);
  CHECK(costly.output.find("--messages " + lists.string() + ": its 5.7 MiB of JSON would take more than") != std::string::npos);
  // Under an address-space limit: ASan reserves terabytes of shadow memory at start, so a
  // sanitizer build cannot run there at all.
  if (testing::kAddressSanitizer) {
    MESSAGE("skipped under AddressSanitizer: the out-of-memory half needs ulimit -v");
  } else {
    // About twice what the small file needs, far less than the 40 MiB list of ones needs.
    const std::string limited = "ulimit -v 300000;";
    CHECK(run_switchyard_with_env(limited, "tokenize --tokenizer " + tokenizer + " --messages " + small.string()).exit_code == 0);
    const CommandResult starved =
        run_switchyard_with_env(limited, "tokenize --tokenizer " + tokenizer + " --messages " + ones.string(), true);
    CHECK(starved.exit_code == 2);
    CHECK(starved.output.find("--messages " + ones.string() + ": out of memory while parsing its 40.0 MiB of JSON") !=
          std::string::npos);
  }
  for (const fs::path& f : {small, lists, ones}) fs::remove(f);
}
