// `switchyard make-model --format gguf` and `switchyard run --gguf_path` end to end, for every
// family with a GGUF form and the shipped CPU profiles: an f32 GGUF generates exactly what the f32
// safetensors checkpoint of the same seed generates; quantised files run; check describes them.
#include <random>
#include <string>

#include <doctest/doctest.h>

#include "tests/test_support.h"

using namespace switchyard::testing;

namespace {


struct TempDirectory {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("switchyard-gguf-run-" + std::to_string(std::random_device{}()) + "-" +
                                std::to_string(std::random_device{}()));
  ~TempDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

TEST_CASE("gguf run: every family's make-model GGUF runs with its CPU profile, an f32 one as its safetensors twin") {
  const std::pair<const char*, const char*> cases[] = {{"tiny-deepseek-v3", "DeepSeek-V3-Chat-cpu.yaml"},
                                                      {"tiny-deepseek-v2", "DeepSeek-V2-Lite-Chat-cpu.yaml"},
                                                      {"tiny-qwen3-moe", "Qwen3-MoE-cpu.yaml"},
                                                      {"tiny-mixtral", "Mixtral-cpu.yaml"},
                                                      {"tiny-glm4-moe", "GLM-4.5-Air-cpu.yaml"}};
  for (const auto& entry : cases) {
    const std::string preset = entry.first;
    const std::string profile = " --optimize_config_path " + source_path(std::string("optimize_rules/") + entry.second);
    INFO(preset);
    TempDirectory dir;
    const std::string st = (dir.path / "st").string(), f32 = (dir.path / "f32").string(), q = (dir.path / "q").string();
    REQUIRE(run_switchyard("make-model --preset " + preset + " --seed 5 --dtype f32 --out " + st).exit_code == 0);
    const auto made = run_switchyard("make-model --preset " + preset + " --seed 5 --format gguf --dtype f32 --out " + f32);
    REQUIRE(made.exit_code == 0);
    CHECK(made.output.find("model.gguf") != std::string::npos);
    const std::string prompt = " --prompt_ids 3,1,4,1,5,9 --max_new_tokens 8 --format json";
    const auto from_st = run_switchyard("run --model_path " + st + profile + prompt);
    const auto from_gguf = run_switchyard("run --gguf_path " + f32 + "/model.gguf" + profile + prompt);
    REQUIRE(from_st.exit_code == 0);
    REQUIRE(from_gguf.exit_code == 0);
    CHECK(generated_ids(from_gguf.output) == generated_ids(from_st.output));
    // A directory holding the file works as well; so does the config.json of the twin beside it.
    CHECK(generated_ids(run_switchyard("run --gguf_path " + f32 + profile + prompt).output) == generated_ids(from_st.output));
    CHECK(generated_ids(run_switchyard("run --gguf_path " + f32 + " --model_path " + st + profile + prompt).output) ==
          generated_ids(from_st.output));

    REQUIRE(run_switchyard("make-model --preset " + preset + " --seed 5 --format gguf --quant q4_k_m --out " + q).exit_code == 0);
    const auto quantised = run_switchyard("run --gguf_path " + q + profile + prompt);
    CHECK(quantised.exit_code == 0);
    CHECK(run_json(quantised.output)["generated_ids"].size() == 8);
    const auto dry = run_switchyard("check --gguf_path " + q + profile);
    CHECK(dry.exit_code == 0);
    CHECK(dry.output.find("0 error(s)") != std::string::npos);
  }
}

TEST_CASE("gguf run: bad GGUF input is a clear error") {
  TempDirectory dir;
  std::filesystem::create_directories(dir.path);
  const std::string profile = " --optimize_config_path " + source_path("optimize_rules/Mixtral-cpu.yaml");
  {
    std::ofstream(dir.path / "junk.gguf") << "GGUF but not really";
    const auto junk = run_switchyard_with_env("", "check --gguf_path " + (dir.path / "junk.gguf").string() + profile, true);
    CHECK(junk.exit_code == 1);
    CHECK(junk.output.find("junk.gguf") != std::string::npos);
  }
  CHECK(run_switchyard("check --gguf_path /nonexistent/x.gguf" + profile).exit_code == 2);
  CHECK(run_switchyard("check --gguf_path x.gguf --arch tiny-mixtral" + profile).exit_code == 2);
  CHECK(run_switchyard("make-model --preset tiny-mixtral --format gguf --dtype fp8 --out " + (dir.path / "m").string())
            .exit_code == 2);
  CHECK(run_switchyard("make-model --preset tiny-mixtral --format safetensors --dtype q4_k --out " + (dir.path / "n").string())
            .exit_code == 2);
}

TEST_CASE("gguf run: llama.cpp's placement flags place a GGUF as its safetensors twin; -ngl 0 runs it on the CPU") {
  // The check's table from MODULES to the counts, without the model line that names the file
  // and the time it took.
  auto table = [](const std::string& output) {
    const std::size_t at = output.find("MODULES"), end = output.find("\nchecked ");
    return at == std::string::npos || end < at ? std::string() : output.substr(at, end - at);
  };
  for (const char* preset : {"tiny-deepseek-v3", "tiny-deepseek-v2", "tiny-qwen3-moe", "tiny-mixtral", "tiny-glm4-moe"}) {
    INFO(preset);
    TempDirectory dir;
    const std::string st = (dir.path / "st").string(), gguf = (dir.path / "gguf").string();
    REQUIRE(run_switchyard("make-model --preset " + std::string(preset) + " --seed 3 --dtype f32 --out " + st).exit_code == 0);
    REQUIRE(run_switchyard("make-model --preset " + std::string(preset) + " --seed 3 --format gguf --dtype f32 --out " + gguf)
                .exit_code == 0);
    for (const char* flags : {"--cpu-moe", "--n-cpu-moe 1", "-ot 'blk\\.1\\.ffn_.*_exps=CPU,token_embd=CPU'", "-ngl 1 --cpu-moe",
                              "-ngl 2 -ts 1,1", "-ngl 0"}) {
      INFO(flags);
      const auto from_gguf = run_switchyard("check --gguf_path " + gguf + " " + flags);
      const auto from_st = run_switchyard("check --model_path " + st + " " + flags);
      CHECK(from_gguf.exit_code == 0);
      CHECK(from_gguf.output.find("0 error(s), 0 warning(s)") != std::string::npos);
      CHECK(!table(from_gguf.output).empty());
      CHECK(table(from_gguf.output) == table(from_st.output));
    }
    // Every layer on the CPU: the GGUF generates what its safetensors twin does.
    const std::string prompt = " --prompt_ids 3,1,4,1,5,9 --max_new_tokens 6 --format json";
    const auto cpu_gguf = run_switchyard("run --gguf_path " + gguf + " -ngl 0" + prompt);
    const auto cpu_st = run_switchyard("run --model_path " + st + " -ngl 0" + prompt);
    REQUIRE(cpu_gguf.exit_code == 0);
    CHECK(!generated_ids(cpu_gguf.output).empty());
    CHECK(generated_ids(cpu_gguf.output) == generated_ids(cpu_st.output));
  }
}
