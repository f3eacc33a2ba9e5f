// The flags a newcomer brings: llama.cpp's short and long forms and ktransformers' local_chat
// names, either separator in a multi-word flag, "did you mean" for a typo, --version, grouped
// --help, and the CPU fallback of llama.cpp's GPU flags on a machine without a CUDA device.
#include <fstream>
#include <string>

#include "tests/core_test_support.h"
#include "tests/test_support.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/device_context.h"
#endif

using namespace switchyard::testing;
using switchyard::core_testing::contains;
using switchyard::core_testing::TempDir;

namespace {

int cuda_devices() {
#if SWITCHYARD_HAVE_CUDA
  return switchyard::cuda::device_count();
#else
  return 0;
#endif
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("command line: llama.cpp's and ktransformers' spellings of run's, chat's and serve's flags") {
  TempDir dir;
  // -p -n -t -s --temp -c: the prompt, 3 new tokens (the first comes from the prefill), 2 threads,
  // a KV cache of 200 tokens.
  const auto run = run_switchyard("run -p hi -n 3 -t 2 -s 5 --temp 0 -c 200 --top-k 4 --repeat-penalty 1.1 --format json");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json doc = run_json(run.output);
  CHECK(doc["prompt"] == "hi");
  CHECK(doc["generated_ids"].size() == 3);
  CHECK(doc["threads"] == 2);
  CHECK(doc["kv_cache"]["tokens"] == 200);
  // -f and --prompt_file: the prompt from a file, less its final newline; --cache_lens, --chunk_size.
  write_file(dir / "prompt.txt", "hi\n");
  const auto from_file =
      run_switchyard("run -n 3 -f " + (dir / "prompt.txt").string() + " --cache_lens 300 --chunk_size 2 --format json");
  CHECK(from_file.exit_code == 0);
  CHECK(generated_ids(from_file.output) == generated_ids(run.output));
  CHECK(run_json(from_file.output)["kv_cache"]["tokens"] == 300);
  CHECK(run_switchyard("run -n 3 --prompt_file " + (dir / "none.txt").string()).exit_code == 2);
  CHECK(run_switchyard("run -n 3 --chunk_size 0").exit_code == 2);
  // -m: a checkpoint folder (as --model_path), a GGUF folder and file (as --gguf_path).
  REQUIRE(run_switchyard("make-model --preset tiny-qwen3-moe --seed 3 --out " + (dir / "st").string()).exit_code == 0);
  REQUIRE(run_switchyard("make-model --preset tiny-qwen3-moe --seed 3 --format gguf --out " + (dir / "gguf").string())
              .exit_code == 0);
  std::string gguf_file;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "gguf"))
    if (entry.path().extension() == ".gguf") gguf_file = entry.path().string();
  REQUIRE(!gguf_file.empty());
  for (const std::string& model : {(dir / "st").string(), (dir / "gguf").string(), gguf_file}) {
    INFO("-m " << model);
    const auto check = run_switchyard("check -m " + model + " --cpu-moe");
    CHECK(check.exit_code == 0);
    CHECK(contains(check.output, "0 error(s)"));
  }
  const auto missing = run_switchyard_with_env("", "check --cpu-moe -m " + (dir / "nothing").string(), true);
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.output, "does not exist"));
  CHECK(run_switchyard("check --cpu-moe -m " + (dir / "st").string() + " --gguf_path " + gguf_file).exit_code == 2);
  // serve: -np takes only what it honours; --model_name is --served_model_name; --chat-template
  // must be a file or a template (all refused before a model loads).
  const auto parallel = run_switchyard_with_env("", "serve -np 4", true);
  CHECK(parallel.exit_code == 2);
  CHECK(contains(parallel.output, "one generation at a time"));
  const auto name = run_switchyard_with_env("", "serve -np 1 --model_name ''", true);
  CHECK(name.exit_code == 2);
  CHECK(contains(name.output, "--served_model_name: give a name"));
  const auto template_name = run_switchyard_with_env("", "serve -np 1 --chat-template chatml", true);
  CHECK(template_name.exit_code == 2);
  CHECK(contains(template_name.output, "neither a file nor a Jinja template"));
  // chat: --chat-template's file replaces the model's template (one that does not parse is refused).
  write_file(dir / "broken.jinja", "{% if %}");
  const auto broken = run_switchyard_with_env("", "chat -n 2 --chat-template " + (dir / "broken.jinja").string() + " < /dev/null", true);
  CHECK(broken.exit_code != 0);
  CHECK(contains(broken.output, "broken.jinja"));
  write_file(dir / "plain.jinja", "{% for m in messages %}{{ m['content'] }}{% endfor %}");
  CHECK(run_switchyard("chat -n 2 --chat-template " + (dir / "plain.jinja").string() + " < /dev/null").exit_code == 0);
  CHECK(run_switchyard("run -n 2 --chat-template " + (dir / "plain.jinja").string()).exit_code == 2);
}

TEST_CASE("command line: every multi-word flag takes '_' and '-', and an unknown one gets a did-you-mean") {
  const auto hyphens = run_switchyard("run --max-new-tokens 2 --prompt-ids=1,2,3 --cpu-infer 1 --kv-cache-dtype f32 --format json");
  CHECK(hyphens.exit_code == 0);
  const auto underscores = run_switchyard("run --max_new_tokens 2 --prompt_ids 1,2,3 --cpu_infer 1 --kv_cache_dtype f32 --format json");
  CHECK(underscores.exit_code == 0);
  CHECK(generated_ids(hyphens.output) == generated_ids(underscores.output));
  CHECK(run_switchyard("check --arch tiny-deepseek-v3 --cpu_moe --n_gpu_layers 2 --max-context 64").exit_code == 0);
  // A short flag with its value attached, as CLI11 reads it.
  CHECK(generated_ids(run_switchyard("run -n2 --prompt_ids 1,2,3 --cpu_infer 1 --kv_cache_dtype f32 --format json").output) ==
        generated_ids(underscores.output));
  // A value is a value, whatever it looks like.
  const auto value = run_switchyard("run -n 1 --prompt=--max-new-tokens --format json");
  CHECK(value.exit_code == 0);
  CHECK(run_json(value.output)["prompt"] == "--max-new-tokens");
  const auto typo = run_switchyard_with_env("", "run --max-new-tokenz 2", true);
  CHECK(typo.exit_code == 2);
  CHECK(contains(typo.output, "unknown flag --max-new-tokenz (did you mean '--max-new-tokens'?)"));
  const auto other = run_switchyard_with_env("", "check --arch tiny-deepseek-v3 --optimize_confg_path x.yaml", true);
  CHECK(other.exit_code == 2);
  CHECK(contains(other.output, "did you mean '--optimize_config_path'?"));
  // serve takes no -n (a request says its own length).
  const auto serve = run_switchyard_with_env("", "serve -n 4", true);
  CHECK(serve.exit_code == 2);
  CHECK(contains(serve.output, "serve: unknown flag -n;"));
}

TEST_CASE("command line: --version and the grouped --help") {
  const auto version = run_switchyard("--version");
  INFO(version.output);
  CHECK(version.exit_code == 0);
  CHECK(contains(version.output, "switchyard 0."));
  CHECK(contains(version.output, "\ncommit: "));
  CHECK(contains(version.output, "\nCUDA backend: "));
  CHECK(contains(version.output, "\nCPU kernels: scalar"));
  const auto help = run_switchyard("--help");
  CHECK(help.exit_code == 0);
  CHECK(contains(help.output, "switchyard"));
  CHECK(contains(help.output, "--version"));
  const auto run_help = run_switchyard("run --help");
  CHECK(run_help.exit_code == 0);
  for (const char* group : {"Model:", "Placement:", "Sampling:", "Output:", "Performance:"}) {
    INFO(group);
    CHECK(contains(run_help.output, group));
  }
  CHECK(contains(run_help.output, "switchyard run"));
}

TEST_CASE("command line: without a CUDA device, llama.cpp's GPU flags run on the CPU; a profile's cuda:0 is refused") {
  if (cuda_devices() > 0) {
    MESSAGE("skipped: this machine has a CUDA device");
    return;
  }
  const auto cpu = run_switchyard_with_env("", "run -n 2 --prompt_ids 1,2,3 -ngl 99 --cpu-moe", true);
  INFO(cpu.output);
  CHECK(cpu.exit_code == 0);
  const std::string warning = "warning: this machine has no CUDA device; -ngl 99 --cpu-moe";
  CHECK(contains(cpu.output, warning));
  CHECK(cpu.output.find("warning:", cpu.output.find(warning) + 1) == std::string::npos);  // one warning
  CHECK(run_switchyard("run -n 2 --prompt_ids 1,2,3 --fit").exit_code == 0);
  // A GPU named on purpose is not moved.
  CHECK(run_switchyard("run -n 2 --prompt_ids 1,2,3 -ngl 99 --default_device cuda:0").exit_code != 0);
  const auto profile = run_switchyard_with_env(
      "", "run -n 2 --optimize_config_path " + source_path("optimize_rules/DeepSeek-V3-Chat.yaml"), true);
  CHECK(profile.exit_code == 1);
#if SWITCHYARD_HAVE_CUDA
  CHECK(contains(profile.output, "does not have"));
  CHECK(contains(profile.output, "--default_device cpu"));
#endif
}
