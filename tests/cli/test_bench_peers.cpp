// scripts/bench-peers.sh, the benchmark beside llama.cpp and ik_llama.cpp that anyone can run: on
// this machine, our side on the CPU on a make-model GGUF (no peer given: their columns say "-").
#include <regex>
#include <string>

#include <doctest/doctest.h>

#include "tests/core_test_support.h"
#include "tests/test_support.h"

namespace {

switchyard::testing::CommandResult run_script(const std::string& arguments) {
  return switchyard::testing::run_command("bash " + switchyard::testing::source_path("scripts/bench-peers.sh") +
                                          " --switchyard " + std::string(SWITCHYARD_BINARY) + " " + arguments + " 2>&1");
}

}  // namespace

TEST_CASE("bench-peers.sh: a row of our prefill and decode rates per file, the peers' columns empty without them") {
  const switchyard::core_testing::TempDir dir;
  const std::string model = (dir / "m").string();
  REQUIRE(switchyard::testing::run_switchyard("make-model --preset tiny-qwen3-moe --format gguf --quant q8_0 --out " + model)
              .exit_code == 0);
  const auto r = run_script("--placement cpu --threads 2 --prompt 8 --gen 3 " + model + "/model.gguf");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // | model.gguf | PP | TG | - | - | - | - | - | - | - | - |
  static const std::regex row(R"(\| model\.gguf \| ([0-9.]+) \| ([0-9.]+) \|( - \|){8})");
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, row));
  CHECK(std::stod(m[1]) > 0);
  CHECK(std::stod(m[2]) > 0);
  CHECK(r.output.find("CPU: STREAM triad ") != std::string::npos);
  // Bad input: exit 2, saying what.
  for (const char* bad : {"", "--placement xpu m.gguf", "--threads 0 m.gguf", "--frobnicate m.gguf", "/nonexistent.gguf",
                          "--llama-bench /nonexistent m.gguf"}) {
    const auto refused = run_script(bad);
    INFO(bad << ": " << refused.output);
    CHECK(refused.exit_code == 2);
    CHECK(refused.output.find("bench-peers: ") != std::string::npos);
  }
}
