// The launch contract of operators/cuda/kernels/launch.cuh, checked on the sources (no GPU needed): every
// kernel is launched through cuda::launch_kernel (programmatic dependent launch), and so every
// kernel must wait for the previous grid before it touches memory an earlier kernel wrote. A
// kernel without the wait would read stale data only now and then, in a race no test could be
// counted on to catch; this one fails at once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_support.h"

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The source without // comments (kernels' docs mention <<< and the functions by name).
std::string without_comments(const std::string& source) {
  std::string out;
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t comment = line.find("//");
    out += line.substr(0, comment) + "\n";
  }
  return out;
}

struct Kernel {
  std::string name, body;
};

// Each `marker` function's name and body (from its opening brace to the matching closing one):
// __global__ kernels, or the __device__ functions of a header.
std::vector<Kernel> functions_of(const std::string& source, const std::string& marker = "__global__") {
  std::vector<Kernel> kernels;
  for (std::size_t at = source.find(marker); at != std::string::npos; at = source.find(marker, at + 1)) {
    const std::size_t open = source.find('{', at);
    if (open == std::string::npos) break;
    // The parameter list's parenthesis, past a __launch_bounds__(...) if there is one.
    std::size_t from = at;
    const std::size_t bounds = source.find("__launch_bounds__", at);
    if (bounds != std::string::npos && bounds < open) from = source.find(')', bounds);
    const std::size_t open_paren = source.find('(', from);
    if (open_paren == std::string::npos) break;
    std::size_t name_end = open_paren;
    while (name_end > at && source[name_end - 1] == ' ') --name_end;
    std::size_t name_begin = name_end;
    while (name_begin > at && (std::isalnum(static_cast<unsigned char>(source[name_begin - 1])) || source[name_begin - 1] == '_'))
      --name_begin;
    int depth = 0;
    std::size_t close = open;
    for (; close < source.size(); ++close) {
      if (source[close] == '{') ++depth;
      if (source[close] == '}' && --depth == 0) break;
    }
    kernels.push_back({source.substr(name_begin, name_end - name_begin), source.substr(open, close - open + 1)});
  }
  return kernels;
}
std::vector<Kernel> kernels_of(const std::string& source) { return functions_of(source); }

bool waits(const std::string& body) {
  return body.find("begin_after_previous_grid()") != std::string::npos ||
         body.find("wait_for_previous_grid()") != std::string::npos;
}

// The __device__ functions of operators/cuda/kernels/*.cuh that wait for the previous grid themselves (the
// body of a kernel that runs another kernel's rows beside its own work, such as swiglu_rows).
std::vector<std::string> waiting_device_functions(const std::filesystem::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.path().extension() != ".cuh") continue;
    for (const Kernel& f : functions_of(without_comments(read_file(entry.path())), "__device__"))
      if (waits(f.body)) names.push_back(f.name);
  }
  return names;
}

bool calls_any(const std::string& body, const std::vector<std::string>& names) {
  for (const std::string& name : names)
    if (body.find(name + "<") != std::string::npos || body.find(name + "(") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("launch contract: every CUDA kernel waits for the previous grid, every launch goes through launch_kernel") {
  // The kernels and the GPU measuring aids (whose kernels run in the same chain).
  const std::filesystem::path directory = switchyard::testing::source_path("operators/cuda/kernels");
  const std::vector<std::string> waiting = waiting_device_functions(directory);
  CHECK(std::find(waiting.begin(), waiting.end(), "swiglu_rows") != waiting.end());
  std::vector<std::filesystem::path> sources;
  for (const char* folder : {"operators/cuda/kernels", "operators/cuda/measure"})
    for (const auto& entry : std::filesystem::directory_iterator(switchyard::testing::source_path(folder)))
      sources.push_back(entry.path());
  int files = 0, kernels = 0;
  for (const std::filesystem::path& path : sources) {
    if (path.extension() != ".cu") continue;
    ++files;
    const std::string source = without_comments(read_file(path));
    INFO(path.filename().string());
    CHECK_MESSAGE(source.find("<<<") == std::string::npos,
                  "a plain <<<>>> launch: use cuda::launch_kernel (operators/cuda/kernels/launch.cuh)");
    for (const Kernel& kernel : kernels_of(source)) {
      ++kernels;
      INFO("kernel " << kernel.name);
      CHECK((waits(kernel.body) || calls_any(kernel.body, waiting)));
    }
  }
  // The sources were found and parsed: the CUDA backend has a dozen files and dozens of kernels.
  CHECK(files >= 10);
  CHECK(kernels >= 25);
}

TEST_CASE("launch contract: the source check finds a kernel that does not wait") {
  const std::string source =
      "__global__ void good(float* x) {\n  begin_after_previous_grid();\n  x[0] = 1;\n}\n"
      "template <typename T>\n__global__ void __launch_bounds__(256) bad(T* x) {\n  if (x) { x[0] = 1; }\n}\n";
  const std::vector<Kernel> found = kernels_of(without_comments(source));
  REQUIRE(found.size() == 2);
  CHECK(found[0].name == "good");
  CHECK(found[0].body.find("begin_after_previous_grid()") != std::string::npos);
  CHECK(found[1].name == "bad");
  CHECK(found[1].body.find("begin_after_previous_grid()") == std::string::npos);
  CHECK(found[1].body.find("x[0] = 1;") != std::string::npos);  // the whole body, nested braces included
}
