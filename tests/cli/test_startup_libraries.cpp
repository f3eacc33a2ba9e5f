// The weight-free commands pay nothing for CUDA: `switchyard --help`, `--version`, `check`, `split` and
// `bench check` run without mapping cuBLAS, cuBLASLt, a shared CUDA runtime or the driver, in the
// CUDA build too (the GPU operators open cuBLAS when they first need it:
// operators/cuda/kernels/cublas_on_demand.h). The dynamic linker's own log (LD_DEBUG=libs) is the witness:
// it names every library it loads, at start-up and by dlopen.
#include <filesystem>
#include <string>
#include <vector>

#include "tests/core_test_support.h"
#include "tests/test_support.h"

using namespace switchyard::testing;
using switchyard::core_testing::contains;
using switchyard::core_testing::TempDir;

namespace {

// The dynamic linker's log of one switchyard process (LD_DEBUG_OUTPUT writes it to FILE.PID).
std::string libraries_log(const std::string& arguments, int& exit_code) {
  TempDir dir;
  const CommandResult result =
      run_switchyard_with_env("LD_DEBUG=libs LD_DEBUG_OUTPUT=" + (dir / "libs").string(), arguments);
  exit_code = result.exit_code;
  std::string log;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    log += switchyard::core_testing::read_file(entry.path());
  return log;
}

const std::vector<std::string> kCudaLibraries = {"libcublas", "libcublasLt", "libcudart", "libcuda.so", "libnvrtc",
                                                 "libnvJitLink"};

}  // namespace

TEST_CASE("start-up: --help, --version, check, split and bench check load no CUDA library") {
  const std::string profile = source_path("optimize_rules/DeepSeek-V3-Chat-multi-gpu-8.yaml");
  const std::string base = source_path("optimize_rules/DeepSeek-V3-Chat.yaml");
  const std::vector<std::string> commands = {
      "--help",
      "--version",
      "check --arch deepseek-v3 --optimize_config_path " + profile,
      "check --arch deepseek-v3 --optimize_config_path " + profile + " --format json",
      "split --arch deepseek-v3 --optimize_config_path " + base + " --gpus 2",
      "bench check --arch deepseek-v3 --optimize_config_path " + profile + " --repeat 1",
  };
  for (const std::string& arguments : commands) {
    INFO("switchyard " << arguments);
    int exit_code = -1;
    const std::string log = libraries_log(arguments, exit_code);
    CHECK(exit_code == 0);
    // The log records what was loaded: the C++ runtime every process of ours maps.
    REQUIRE_MESSAGE(contains(log, "libstdc++"), "LD_DEBUG=libs logged no libstdc++; log: " << log.substr(0, 2000));
    for (const std::string& library : kCudaLibraries) {
      INFO(library);
      CHECK_FALSE(contains(log, library));
    }
  }
}
