#pragma once
// Helpers shared by the core/ tests: a scratch directory, seeded random data, and the message of
// the InputError an expression throws.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include "core/error.h"

namespace switchyard::core_testing {

// A fresh directory under the system temp directory, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::random_device entropy;
    path_ = std::filesystem::temp_directory_path() /
            ("switchyard-core-test-" + std::to_string(entropy()) + "-" + std::to_string(entropy()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A random engine whose seed is printed with every failing check of the test that made it:
// construct it at the top of a TEST_CASE, then INFO(rng.seed) is in scope for the whole test.
struct SeededRng {
  std::uint32_t seed = std::random_device{}();
  std::mt19937 engine{seed};

  std::size_t below(std::size_t bound) {  // uniform in [0, bound)
    return std::uniform_int_distribution<std::size_t>(0, bound - 1)(engine);
  }
  std::int64_t between(std::int64_t low, std::int64_t high) {  // uniform in [low, high]
    return std::uniform_int_distribution<std::int64_t>(low, high)(engine);
  }
  std::string bytes(std::size_t count) {
    std::string out(count, '\0');
    std::uniform_int_distribution<int> byte(0, 255);
    for (char& c : out) c = static_cast<char>(byte(engine));
    return out;
  }
};

// The whole file's bytes; a file that cannot be opened fails the test.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE_MESSAGE(out.good(), "cannot create " << path);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE_MESSAGE(out.good(), "cannot write " << path);
}

// The message of the InputError `action` throws; a marker string when it throws nothing or
// something else, so a CHECK on the result shows what happened instead.
template <typename Action>
std::string input_error_message(Action&& action) {
  try {
    action();
  } catch (const InputError& error) {
    return error.what();
  } catch (const std::exception& error) {
    return std::string("<not an InputError: ") + error.what() + ">";
  } catch (...) {
    return "<not an InputError: unknown exception>";
  }
  return "<no exception>";
}

// The exit status an InputError from `action` carries; -1 when it throws none.
template <typename Action>
int input_error_exit_code(Action&& action) {
  try {
    action();
  } catch (const InputError& error) {
    return error.exit_code();
  } catch (...) {
  }
  return -1;
}

inline bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace switchyard::core_testing
