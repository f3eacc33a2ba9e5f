// `switchyard run` end to end: the embedded default, make-model checkpoints of every family with
// the shipped CPU profiles, sampling, and the errors a user can cause.
#include <algorithm>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/make_model.h"
#include "tests/test_support.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/device_context.h"
#endif

using namespace switchyard::testing;

namespace {


struct TempModel {
  std::filesystem::path dir;
  TempModel(const std::string& preset, std::uint64_t seed, int layers = 0) {
    dir = std::filesystem::temp_directory_path() /
          ("switchyard-run-test-" + preset + "-" + std::to_string(seed) + "-" + std::to_string(std::random_device{}()));
    switchyard::MakeModelOptions options;
    options.preset = preset;
    options.out_dir = dir;
    options.seed = seed;
    if (layers > 0) options.layers = layers;
    switchyard::make_model(options);
  }
  ~TempModel() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

}  // namespace

TEST_CASE("run command: the embedded default generates, deterministically") {
  const auto first = run_switchyard("run --max_new_tokens 8 --format json");
  REQUIRE(first.exit_code == 0);
  const nlohmann::json doc = run_json(first.output);
  CHECK(doc["generated_ids"].size() == 8);
  CHECK(doc["timings"]["prompt_tokens_per_s"].get<double>() > 0);
  CHECK(doc["timings"]["decode_tokens"] == 7);  // the first token comes from the prompt's pass
  const std::string ids = generated_ids(first.output);
  CHECK(generated_ids(run_switchyard("run --max_new_tokens 8 --cpu_infer 1 --format json").output) == ids);
  // Sampling is reproducible for a seed.
  const auto sampled = run_switchyard("run --max_new_tokens 8 --temperature 0.9 --top_p 0.95 --seed 7 --format json");
  CHECK(sampled.exit_code == 0);
  CHECK(generated_ids(sampled.output) ==
        generated_ids(run_switchyard("run --max_new_tokens 8 --temperature 0.9 --top_p 0.95 --seed 7 --format json").output));
}

TEST_CASE("run command: stdout holds the answer alone; --quiet and --verbose set what stderr says") {
  const auto json = run_switchyard("run --max_new_tokens 6 --format json");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json doc = run_json(json.output);
  // Only the JSON line on stdout: it parses whole.
  CHECK(nlohmann::json::parse(json.output, nullptr, false) == doc);
  // Text mode: the answer's text and a newline, on stdout; the statistics on stderr.
  const auto text = run_switchyard("run --max_new_tokens 6");
  REQUIRE(text.exit_code == 0);
  REQUIRE(doc["text"].is_string());
  CHECK(text.output == doc["text"].get<std::string>() + "\n");
  const auto both = run_switchyard_with_env("", "run --max_new_tokens 6", true);
  CHECK(both.output.find("eval rate:") != std::string::npos);
  CHECK(both.output.find("placement: ") != std::string::npos);
  CHECK(both.output.find("generated ids:") == std::string::npos);
  // --quiet: stderr says nothing, so stdout and stderr together are the text alone.
  const auto quiet = run_switchyard_with_env("", "run --max_new_tokens 6 -q", true);
  CHECK(quiet.output == text.output);
  // --verbose: the prompt's and the answer's ids as well.
  const auto verbose = run_switchyard_with_env("", "run --max_new_tokens 6 --verbose", true);
  CHECK(verbose.output.find("generated ids: " + generated_ids(json.output) + "\n") != std::string::npos);
  std::string prompt_ids;
  for (const auto& id : doc["prompt_ids"]) prompt_ids += (prompt_ids.empty() ? "" : ",") + std::to_string(id.get<int>());
  CHECK(verbose.output.find("prompt ids: " + prompt_ids + "\n") != std::string::npos);
  CHECK(run_switchyard("run --max_new_tokens 6 --quiet --verbose").exit_code == 2);
  CHECK(run_switchyard("run --max_new_tokens 6 --format yaml").exit_code == 2);
  CHECK(run_switchyard("run --dry_run --format json").exit_code == 2);  // check --format json is the plan's JSON
  // --profile's table is asked for by name: it comes even under --quiet.
  const auto profiled = run_switchyard_with_env("", "run --max_new_tokens 3 -q --profile", true);
  CHECK(profiled.exit_code == 0);
  CHECK(profiled.output.find("load duration") == std::string::npos);
  CHECK(profiled.output.find("per decode step, milliseconds") != std::string::npos);
  // A prompt of ids without a tokenizer: the answer's ids are the output.
  const auto ids_json = run_switchyard("run --prompt_ids 5,6,7 -n 4 --format json");
  const auto ids_text = run_switchyard("run --prompt_ids 5,6,7 -n 4");
  REQUIRE(ids_text.exit_code == 0);
  CHECK(ids_text.output == generated_ids(ids_json.output) + "\n");
  CHECK(run_json(ids_json.output)["text"].is_null());
}

TEST_CASE("run command: --prefetch reads the whole mapped checkpoint at load and says so; off by default off a terminal") {
  const TempModel model("tiny-mixtral", 5);
  const std::string base = "run --model_path " + model.dir.string() + " --prompt_ids 1,2,3 -n 2";
  const auto on = run_switchyard(base + " --prefetch --format json");
  REQUIRE(on.exit_code == 0);
  const nlohmann::json doc = run_json(on.output);
  REQUIRE(doc["prefetch"].is_object());
  CHECK(doc["prefetch"]["bytes"] == doc["memory"]["checkpoint_bytes"]);
  CHECK(doc["memory"]["checkpoint_bytes"].get<std::uint64_t>() > 0);
  // The line on stderr; the same ids as without it.
  const auto said = run_switchyard_with_env("", base + " --prefetch", true);
  CHECK(said.output.find("prefetch: ") != std::string::npos);
  const auto off = run_switchyard(base + " --format json");  // stderr is not a terminal here
  REQUIRE(off.exit_code == 0);
  CHECK(run_json(off.output)["prefetch"].is_null());
  CHECK(generated_ids(off.output) == generated_ids(on.output));
  CHECK(run_json(run_switchyard(base + " --no-prefetch --format json").output)["prefetch"].is_null());
  CHECK(run_switchyard(base + " --prefetch --no_prefetch").exit_code == 2);
  // chat and serve build the model the same way: chat says it too.
  const auto chat = run_switchyard_with_env("", "chat --prefetch < /dev/null", true);
  CHECK(chat.exit_code == 0);
  CHECK(chat.output.find("prefetch: ") != std::string::npos);
}

TEST_CASE("run command: make-model checkpoints of every family run with the shipped CPU profiles") {
  const std::pair<const char*, const char*> cases[] = {{"tiny-deepseek-v3", "DeepSeek-V3-Chat-cpu.yaml"},
                                                      {"tiny-deepseek-v2", "DeepSeek-V2-Lite-Chat-cpu.yaml"},
                                                      {"tiny-qwen3-moe", "Qwen3-MoE-cpu.yaml"},
                                                      {"tiny-mixtral", "Mixtral-cpu.yaml"}};
  for (const auto& entry : cases) {
    const char* const preset = entry.first;
    const char* const profile = entry.second;
    INFO(preset);
    const TempModel model(preset, 3);
    const auto run = run_switchyard("run --model_path " + model.dir.string() + " --optimize_config_path " +
                                    source_path(std::string("optimize_rules/") + profile) +
                                    " --prompt_ids 3,1,4,1,5,9 --max_new_tokens 6 --format json");
    CHECK(run.exit_code == 0);
    CHECK(run_json(run.output)["generated_ids"].size() == 6);
    const auto dry = run_switchyard("run --dry_run --model_path " + model.dir.string() + " --optimize_config_path " +
                                    source_path(std::string("optimize_rules/") + profile));
    CHECK(dry.exit_code == 0);
    CHECK(dry.output.find("0 error(s)") != std::string::npos);
  }
}

namespace {
int gpu_count() {
#if SWITCHYARD_HAVE_CUDA
  return switchyard::cuda::device_count();
#else
  return 0;
#endif
}
}  // namespace

TEST_CASE("run command: errors a user can cause") {
  const TempModel model("tiny-mixtral", 5);
  const std::string base = "run --model_path " + model.dir.string();
  CHECK(run_switchyard(base + " --prompt_ids 1,x").exit_code == 2);
  // Outside the vocabulary, or past the context: refused before the tokens' header is printed.
  for (const char* request : {" --prompt_ids 1,99999", " --max_context 4 --max_new_tokens 8"}) {
    const auto refused = run_switchyard_with_env("", base + request, /*with_stderr=*/true);
    INFO(request << ": " << refused.output);
    CHECK(refused.exit_code == 2);
    CHECK(refused.output.find("eval count") == std::string::npos);
    CHECK(refused.output.find("error:") != std::string::npos);
  }
  CHECK(run_switchyard(base + " --prompt 'hello'").exit_code == 2);      // no tokenizer yet
  CHECK(run_switchyard(base + " --max_context 0").exit_code == 2);
  CHECK(run_switchyard(base + " --max_context 4000000000").exit_code == 2);  // caches larger than memory
  CHECK(run_switchyard("run --model_path /nonexistent").exit_code == 2);
  CHECK(run_switchyard("run --arch tiny-mixtral").exit_code == 2);  // no weights
  // A CPU kernel variant that does not exist, or that this CPU cannot run (scalar always runs).
  const auto no_variant = run_switchyard_with_env("", base + " --cpu_kernels sse", /*with_stderr=*/true);
  CHECK(no_variant.exit_code == 2);
  CHECK(no_variant.output.find("'sse' is not a variant") != std::string::npos);
  const auto scalar = run_switchyard(base + " --cpu_kernels scalar --max_new_tokens 2 --format json");
  CHECK(scalar.exit_code == 0);
  CHECK(run_json(scalar.output)["cpu_kernels"] == "scalar");
  // A GPU profile on a machine without that GPU: a clear error (exit 1, the profile does not fit
  // the machine), not a crash. With a GPU it runs.
  const auto gpu_run =
      run_switchyard_with_env("", base + " --optimize_config_path " + source_path("optimize_rules/Mixtral.yaml"), true);
  INFO("the GPU run said: " << gpu_run.output);
  if (gpu_count() == 0) {
    CHECK(gpu_run.exit_code == 1);  // "cuda:0 is not present: this machine has 0 CUDA devices"
  } else {
    CHECK(gpu_run.exit_code == 0);
  }
  // A checkpoint that lacks a tensor its config.json implies.
  std::ifstream in(model.dir / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  in.close();
  config["num_hidden_layers"] = config["num_hidden_layers"].get<int>() + 1;
  std::ofstream(model.dir / "config.json") << config.dump(2);
  CHECK(run_switchyard(base).exit_code == 1);  // the model's content is wrong
}

TEST_CASE("run command: a deep hybrid model runs eagerly and as graphs (GPU work queued ahead of the CPU experts)") {
  if (gpu_count() == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  // 61 layers, 58 of them handing experts to the CPU: an eager step queues more GPU work than the
  // driver's queue holds, so launches block until the CPU experts let the stream go on.
  const TempModel model("tiny-deepseek-v3", 3, 61);
  const std::string base = "run --model_path " + model.dir.string() + " --max_new_tokens 4 --optimize_config_path " +
                           source_path("optimize_rules/DeepSeek-V3-Chat.yaml");
  const auto eager = run_switchyard(base + " --use_cuda_graph false --format json");
  const auto graph = run_switchyard(base + " --profile --format json");
  CHECK(eager.exit_code == 0);
  CHECK(graph.exit_code == 0);
  CHECK(generated_ids(eager.output) == generated_ids(graph.output));
}

TEST_CASE("bench commands: options out of range are refused before any work (exit 2)") {
  CHECK(run_switchyard("bench gemv --weights_in dram").exit_code == 2);
  CHECK(run_switchyard("bench gemv --launches 0").exit_code == 2);
  CHECK(run_switchyard("bench gemv --repeat 0").exit_code == 2);
  CHECK(run_switchyard("bench decode --model_path /nonexistent --optimize_config_path x.yaml --decode_tokens 0")
            .exit_code == 2);
  // In range, on a machine without a GPU: the benchmark needs one (exit 1, not a crash).
  if (gpu_count() == 0) CHECK(run_switchyard("bench gemv --weights_in l2").exit_code == 1);
  // Leaving GPU kernels out of a placement that has none: refused before the model is built.
  const TempModel model("tiny-mixtral", 5);
  const auto cpu_only = run_switchyard_with_env(
      "", "bench decode --model_path " + model.dir.string() + " --optimize_config_path " +
              source_path("optimize_rules/Mixtral-cpu.yaml") + " --leave_out gemv --prompt_tokens 8",
      /*with_stderr=*/true);
  CHECK(cpu_only.exit_code == 2);
  CHECK(cpu_only.output.find("--leave_out times GPU kernels") != std::string::npos);
  const auto no_timeline = run_switchyard_with_env(
      "", "bench decode --model_path " + model.dir.string() + " --optimize_config_path " +
              source_path("optimize_rules/Mixtral-cpu.yaml") + " --timeline --prompt_tokens 8",
      /*with_stderr=*/true);
  CHECK(no_timeline.exit_code == 2);
  CHECK(no_timeline.output.find("--timeline times GPU kernels") != std::string::npos);
  // An A/B of a setting that is not a CPU kernel option, or of a value out of its range.
  for (const char* ab : {"no_such_option=1", "cpu_prefetch_bytes=8", "cpu_panels_by_row"}) {
    const auto refused = run_switchyard_with_env(
        "", "bench decode --model_path " + model.dir.string() + " --optimize_config_path " +
                source_path("optimize_rules/Mixtral-cpu.yaml") + " --prompt_tokens 8 --ab_option " + ab,
        /*with_stderr=*/true);
    INFO(ab << ": " << refused.output);
    CHECK(refused.exit_code == 2);
    CHECK(refused.output.find("--ab_option") != std::string::npos);
  }
}

TEST_CASE("bench decode --ab_option: both sides of a CPU kernel option timed in one process, alternating (all on the CPU)") {
  const TempModel model("tiny-mixtral", 5);
  const auto bench = run_switchyard_with_env(
      "", "bench decode --model_path " + model.dir.string() + " --optimize_config_path " +
              source_path("optimize_rules/Mixtral-cpu.yaml") +
              " --prompt_tokens 8 --decode_tokens 2 --profile_tokens 0 --cpu_prefetch_bytes 1024 "
              "--ab_option cpu_prefetch_bytes=0,cpu_tile_block_rows=0 --ab_rounds 3",
      /*with_stderr=*/true);
  INFO(bench.output);
  CHECK(bench.exit_code == 0);
  // The whole step and the prefill, three timings a side (two spaces inside each parenthesis); no
  // GPU side.
  for (const char* what : {"decode ms/token (the whole step): A median", "prefill ms: A median"}) {
    const std::size_t line = bench.output.find(std::string("A/B cpu_prefetch_bytes=0,cpu_tile_block_rows=0, ") + what);
    REQUIRE(line != std::string::npos);
    const std::size_t sides = bench.output.find("A median", line);
    const std::string text = bench.output.substr(sides, bench.output.find('\n', sides) - sides);
    CHECK(std::count(text.begin(), text.end(), '(') == 2);  // a side's timings each
    const std::size_t close = text.rfind(')'), open = text.rfind('(');
    CHECK(std::count(text.begin() + static_cast<std::ptrdiff_t>(open), text.begin() + static_cast<std::ptrdiff_t>(close),
                     ' ') == 2);
  }
  CHECK(bench.output.find("GPU side us per layer") == std::string::npos);
}

namespace {

// `bench decode` of a hybrid tiny DeepSeek (`layers` layers) with `options`, on a GPU.
CommandResult hybrid_deepseek_bench(int layers, const std::string& options) {
  const TempModel model("tiny-deepseek-v3", 3, layers);
  return run_switchyard_with_env("", "bench decode --model_path " + model.dir.string() + " --optimize_config_path " +
                                         source_path("optimize_rules/DeepSeek-V3-Chat.yaml") +
                                         " --prompt_tokens 16 --profile_tokens 0 " + options,
                                 /*with_stderr=*/true);
}

}  // namespace

TEST_CASE("bench decode --leave_out: the GPU side timed again without the named kernels (hybrid DeepSeek)") {
  if (gpu_count() == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  const auto bench =
      hybrid_deepseek_bench(4, "--decode_tokens 4 --leave_out rms_norm_rows --leave_out no_kernel_has_this_name");
  INFO(bench.output);
  CHECK(bench.exit_code == 0);
  // The norms are left out (one kernel or more, listed by their mangled names), the made-up word
  // leaves out none.
  const std::size_t norms = bench.output.find("left out rms_norm_rows (");
  REQUIRE(norms != std::string::npos);
  CHECK(bench.output.compare(norms + 24, 2, "0 ") != 0);
  CHECK(bench.output.find("rms_norm_rows", bench.output.find("\n  ", norms)) != std::string::npos);
  CHECK(bench.output.find("left out no_kernel_has_this_name (0 kernels)") != std::string::npos);
}

TEST_CASE("bench decode --timeline: every kernel of the step stamped, by kernel and along a layer (hybrid DeepSeek)") {
  if (gpu_count() == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  const auto bench = hybrid_deepseek_bench(6, "--decode_tokens 6 --timeline");
  INFO(bench.output);
  CHECK(bench.exit_code == 0);
  // The stamps paired with the recorded launches: 8 steps (2 warm-up + 6), a table by kernel with
  // the norms and the router in it, and the layers' repeating pattern.
  CHECK(bench.output.find("no timeline") == std::string::npos);
  CHECK(bench.output.find("timeline: 8 steps of ") != std::string::npos);
  CHECK(bench.output.find("rms_norm_rows") != std::string::npos);
  CHECK(bench.output.find("route_one_token") != std::string::npos);
  CHECK(bench.output.find("the launches' repeating pattern (a layer)") != std::string::npos);
}

TEST_CASE("bench decode --ab_option: both sides timed in one process, alternating (hybrid DeepSeek)") {
  if (gpu_count() == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  // An option whose two sides give the same results: the GPU side's line reports three timings each.
  const auto bench = hybrid_deepseek_bench(4, "--decode_tokens 4 --ab_option cpu_prefetch_bytes=0 --ab_rounds 3");
  INFO(bench.output);
  CHECK(bench.exit_code == 0);
  const std::size_t line = bench.output.find("A/B cpu_prefetch_bytes=0, GPU side us per layer: A median");
  REQUIRE(line != std::string::npos);
  const std::string text = bench.output.substr(line, bench.output.find('\n', line) - line);
  CHECK(std::count(text.begin(), text.end(), '(') == 2);
  CHECK(text.find("B - A") != std::string::npos);
  // Three timings a side: two spaces inside each parenthesis.
  const std::size_t open = text.find('('), close = text.find(')');
  CHECK(std::count(text.begin() + static_cast<std::ptrdiff_t>(open), text.begin() + static_cast<std::ptrdiff_t>(close),
                   ' ') == 2);
  CHECK(bench.output.find("A/B cpu_prefetch_bytes=0, decode ms/token (the whole step): A median") != std::string::npos);
}

TEST_CASE("run command: the KV cache is the checkpoint's dtype unless --kv_cache_dtype says otherwise") {
  // The embedded model is a bf16 checkpoint: bf16 caches, half the bytes of f32 ones.
  const auto bf16 = run_switchyard("run --max_new_tokens 2 --max_context 16384 --format json");
  const auto f32 = run_switchyard("run --max_new_tokens 2 --max_context 16384 --kv_cache_dtype f32 --format json");
  REQUIRE(bf16.exit_code == 0);
  REQUIRE(f32.exit_code == 0);
  const nlohmann::json bf16_cache = run_json(bf16.output)["kv_cache"], f32_cache = run_json(f32.output)["kv_cache"];
  CHECK(bf16_cache["dtype"] == "bf16");
  CHECK(f32_cache["dtype"] == "f32");
  CHECK(bf16_cache["tokens"] == 16384);
  CHECK(f32_cache["tokens"] == 16384);
  const double bf16_bytes = bf16_cache["bytes"].get<double>(), f32_bytes = f32_cache["bytes"].get<double>();
  CHECK(bf16_bytes > 0);
  CHECK(f32_bytes == doctest::Approx(2 * bf16_bytes).epsilon(0.05));
  // The dry run states the dtype it estimated.
  const auto dry = run_switchyard("run --dry_run --kv_cache_dtype f32 --max_context 512");
  CHECK(dry.exit_code == 0);
  CHECK(dry.output.find("KV CACHE (512 tok, f32)") != std::string::npos);
  CHECK(run_switchyard("run --dry_run --kv_cache_dtype q8_0").exit_code == 2);
}

TEST_CASE("run command: a profile for more GPUs than the machine has names --device_map, and runs folded with it") {
  const TempModel model("tiny-deepseek-v3", 11);
  const std::string base = "run --model_path " + model.dir.string() + " --max_new_tokens 6 --prompt_ids 3,9,27";
  const std::string two_gpus = " --optimize_config_path " + source_path("tests/fixtures/tiny-deepseek-v3-2gpu.yaml");
  const auto refused = run_switchyard_with_env("", base + two_gpus, /*with_stderr=*/true);
  INFO("without --device_map: " << refused.output);
  if (gpu_count() < 2) {
    CHECK(refused.exit_code == 1);  // before any weight reaches a GPU
#if SWITCHYARD_HAVE_CUDA
    CHECK(refused.output.find("cuda:1") != std::string::npos);
    CHECK(refused.output.find("does not have") != std::string::npos);
    if (gpu_count() == 1) CHECK(refused.output.find("--device_map") != std::string::npos);
#else
    CHECK(refused.output.find("no CUDA backend") != std::string::npos);
#endif
  }
  CHECK(run_switchyard(base + two_gpus + " --device_map cuda:1=x").exit_code == 2);
  if (gpu_count() == 0) {
    MESSAGE("skipped the folded run: no CUDA device");
    return;
  }
  const auto one_gpu =
      run_switchyard(base + " --optimize_config_path " + source_path("optimize_rules/DeepSeek-V3-Chat.yaml") + " --format json");
  REQUIRE(one_gpu.exit_code == 0);
  for (const char* graphs : {"true", "false"}) {
    const auto folded = run_switchyard(base + two_gpus + " --device_map all=0 --format json --use_cuda_graph " + graphs);
    INFO("folded, graphs " << graphs << ": " << folded.output);
    CHECK(folded.exit_code == 0);
    CHECK(generated_ids(folded.output) == generated_ids(one_gpu.output));
  }
}

TEST_CASE("check command: --device_map adds the folded GPUs' memory against each physical GPU's budget") {
  const std::string base = "check --arch deepseek-v3 --weight_dtype q4_k_m --optimize_config_path " +
                           source_path("optimize_rules/DeepSeek-V3-Chat-multi-gpu-8.yaml");
  const auto folded = run_switchyard(base + " --device_map cuda:0-3=0,cuda:4-7=1 --gpu_memory 141GiB");
  INFO(folded.output);
  CHECK(folded.exit_code == 0);
  CHECK(folded.output.find("PHYSICAL GPU") != std::string::npos);
  CHECK(folded.output.find("cuda:0,cuda:1,cuda:2,cuda:3") != std::string::npos);
  CHECK(folded.output.find("cuda:4,cuda:5,cuda:6,cuda:7") != std::string::npos);
  // All eight on one GPU of 8 GiB: over its budget, named, exit 1.
  const auto over = run_switchyard_with_env("", base + " --device_map all=0 --gpu_memory 8GiB", true);
  INFO(over.output);
  CHECK(over.exit_code == 1);
  CHECK(over.output.find("GPU 0 runs cuda:0, cuda:1") != std::string::npos);
}
