// llama.cpp's multi-letter short flags (-ot -ngl -ts -mg -np -sys) through the binary: each is the
// command's long flag where the command takes it; where it does not, the error names what was
// typed and the commands that take it. A value that looks like one is left alone.
#include <string>

#include <doctest/doctest.h>

#include "tests/core_test_support.h"
#include "tests/test_support.h"

using switchyard::core_testing::contains;
using switchyard::testing::run_json;
using switchyard::testing::run_switchyard;
using switchyard::testing::run_switchyard_with_env;

TEST_CASE("flag spellings: a llama.cpp short flag on a command without its long flag names the command that takes it") {
  const auto parallel = run_switchyard_with_env("", "run -np 4 -n 2", true);
  INFO(parallel.output);
  CHECK(parallel.exit_code == 2);
  CHECK(contains(parallel.output, "run: unknown flag -np (llama.cpp's --parallel)"));
  CHECK(contains(parallel.output, "'switchyard serve'"));
  CHECK_FALSE(contains(parallel.output, "'switchyard run'"));
  // "-np" is not "-n p" on a command with -n.
  CHECK_FALSE(contains(parallel.output, "whole number"));

  const auto system = run_switchyard_with_env("", "run -sys 'Be brief.' -n 2", true);
  CHECK(system.exit_code == 2);
  CHECK(contains(system.output, "unknown flag -sys (llama.cpp's --system-prompt)"));
  CHECK(contains(system.output, "'switchyard chat'"));

  const auto layers = run_switchyard_with_env("", "tokenize -ngl 99 --tokenizer x --prompt hi", true);
  CHECK(layers.exit_code == 2);
  CHECK(contains(layers.output, "tokenize: unknown flag -ngl (llama.cpp's --n-gpu-layers)"));
  for (const char* command : {"'switchyard run'", "'switchyard check'", "'switchyard serve'", "'switchyard chat'"}) {
    INFO(command);
    CHECK(contains(layers.output, command));
  }
  CHECK_FALSE(contains(layers.output, "'switchyard tokenize'"));

  // A long flag of another command is named the same way.
  const auto long_flag = run_switchyard_with_env("", "check --arch tiny-deepseek-v3 --max-new-tokens 3", true);
  CHECK(long_flag.exit_code == 2);
  CHECK(contains(long_flag.output, "check: unknown flag --max-new-tokens; it is a flag of 'switchyard run' and 'switchyard chat'"));
  // A flag no command takes still gets the closest of the command's own.
  const auto typo = run_switchyard_with_env("", "check --arch tiny-deepseek-v3 -ngll 3", true);
  CHECK(typo.exit_code == 2);
  CHECK(contains(typo.output, "did you mean '-ngl'?"));
}

TEST_CASE("flag spellings: a llama.cpp short flag where the command takes it, and one as a value") {
  // -ngl on check: the same plan as --n-gpu-layers, and "-ngl=N" too.
  const auto plan = [](const std::string& flag) {
    const auto check = run_switchyard("check --arch tiny-deepseek-v3 --gpus 1 " + flag);
    CHECK(check.exit_code == 0);
    return check.output.substr(0, check.output.find("\nchecked "));  // less the time it took
  };
  const std::string long_flag = plan("--n_gpu_layers 2");
  CHECK(contains(long_flag, "cuda:0"));
  CHECK(plan("-ngl 2") == long_flag);
  CHECK(plan("-ngl=2") == long_flag);
  // After an option that takes a value, "-np" and "-ot" are that value.
  const auto prompt = run_switchyard("run -n 2 -p -np --format json");
  CHECK(prompt.exit_code == 0);
  CHECK(run_json(prompt.output)["prompt"] == "-np");
  const auto ot = run_switchyard("run -n 2 --prompt -ot --format json");
  CHECK(ot.exit_code == 0);
  CHECK(run_json(ot.output)["prompt"] == "-ot");
}
