// The command line against hostile and careless input: numeric flags outside their ranges (thread
// counts that crash OpenMP, negative or NaN sampling options, integers CLI11 would read as octal or
// wrap), the one --max_context rule of check and run, the exit status of a checkpoint that does not
// match its config.json, and the writers (split -o, make-model, --trace_out), which never leave a
// half-written file, never replace a file with one that failed its check, and never mix two runs.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/make_model.h"
#include "tests/core_test_support.h"
#include "cli/model_options.h"
#include "operators/model/generator.h"
#include "tests/test_support.h"

namespace sy = switchyard;
namespace fs = std::filesystem;
using sy::core_testing::contains;
using sy::core_testing::input_error_message;
using sy::core_testing::SeededRng;
using sy::core_testing::TempDir;
using sy::core_testing::write_file;
using sy::testing::CommandResult;
using sy::testing::run_switchyard;
using sy::testing::run_switchyard_with_env;
using sy::testing::source_path;

namespace {

// switchyard with `arguments`, stdout and stderr together.
CommandResult run_both(const std::string& arguments) { return run_switchyard_with_env("", arguments, true); }

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Names in `dir` that start with '.': the temporaries AtomicFile writes beside a target.
std::vector<std::string> hidden_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string()[0] == '.') names.push_back(entry.path().filename().string());
  return names;
}

// Every file of a directory, by name, with its bytes.
std::map<std::string, std::string> directory_bytes(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files[entry.path().filename().string()] = read_bytes(entry.path());
  return files;
}

// switchyard in a child process whose files may grow to `max_file_bytes` (RLIMIT_FSIZE; switchyard
// ignores SIGXFSZ, so a write past it fails with EFBIG), stdout and stderr together.
CommandResult run_switchyard_with_file_limit(const std::string& arguments, rlim_t max_file_bytes) {
  // Everything the child needs is made before fork: after it, only async-signal-safe calls.
  const std::string command = "exec " + std::string(SWITCHYARD_BINARY) + " " + arguments;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const rlimit limit{max_file_bytes, max_file_bytes};
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  CommandResult result;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) result.output.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A make-model checkpoint in a fresh directory, removed at scope exit.
struct TempModel {
  TempDir dir;
  fs::path path() const { return dir / "model"; }
  explicit TempModel(const std::string& preset, std::uint64_t seed = 5) {
    sy::MakeModelOptions options;
    options.preset = preset;
    options.out_dir = path();
    options.seed = seed;
    sy::make_model(options);
  }
};

std::string cpu_profile(const std::string& name) { return " --optimize_config_path " + source_path("optimize_rules/" + name); }

}  // namespace

TEST_CASE("command line: CPU thread counts outside 1 to the machine's cap are usage errors naming the cap") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const int cap = sy::cli::max_cpu_threads();
  REQUIRE(cap >= 1);
  REQUIRE(cap <= std::max(1024, static_cast<int>(std::thread::hardware_concurrency())));
  const std::string range = "1 to " + std::to_string(cap);
  // Each command that takes a thread count, with what it needs besides so that only the count is wrong.
  const std::pair<std::string, std::string> commands[] = {
      {"run", "--cpu_infer"},
      {"bench decode --model_path /nonexistent --optimize_config_path x.yaml", "--cpu_infer"},
      {"bench experts --shape tiny-mixtral", "--threads"}};
  const std::vector<std::string> bad = {"-3", "0", std::to_string(cap + 1), "50000", "70000", "100000",
                                        std::to_string(rng.between(cap + 1, 1'000'000'000)),
                                        std::to_string(-rng.between(1, 1'000'000'000)), "99999999999999999999",
                                        "four", "1.5", ""};
  // Not a structured binding: clang 14 cannot capture one in INFO's lambda.
  for (const auto& command_flag : commands)
    for (const std::string& value : bad) {
      const std::string& command = command_flag.first;
      const std::string& flag = command_flag.second;
      const CommandResult refused = run_both(command + " " + flag + " '" + value + "'");
      INFO(command << " " << flag << " '" << value << "': " << refused.output);
      CHECK(refused.exit_code == 2);
      CHECK(contains(refused.output, flag));
      if (!value.empty()) CHECK(contains(refused.output, range));
      CHECK_FALSE(contains(refused.output, "eval count"));
    }
  // The cap itself and a count below it run, with that many threads.
  for (const int threads : {cap, static_cast<int>(rng.between(1, cap))}) {
    const CommandResult ran = run_both("run --max_new_tokens 2 --cpu_infer " + std::to_string(threads));
    INFO(ran.output);
    CHECK(ran.exit_code == 0);
    CHECK(contains(ran.output, "threads: " + std::to_string(threads) + ","));
  }
}

TEST_CASE("command line: OMP_NUM_THREADS past the cap is refused by name; an explicit thread count overrides it") {
  const int cap = sy::cli::max_cpu_threads();
  const TempDir dir;
  for (const std::string& count : {std::to_string(cap + 1), std::string("100000")}) {
    for (const std::string& command :
         {std::string("run --max_new_tokens 2"), std::string("bench experts --shape tiny-mixtral --stream_mib 1"),
          "make-model --preset tiny-mixtral --out " + (dir / "m").string()}) {
      const CommandResult refused = run_switchyard_with_env("OMP_NUM_THREADS=" + count, command, true);
      INFO(command << " with OMP_NUM_THREADS=" << count << ": " << refused.output);
      CHECK(refused.exit_code == 2);
      CHECK(contains(refused.output, "OMP_NUM_THREADS=" + count));
      CHECK(contains(refused.output, "more than " + std::to_string(cap)));
    }
  }
  const CommandResult overridden = run_switchyard_with_env("OMP_NUM_THREADS=100000", "run --max_new_tokens 2 --cpu_infer 1", true);
  INFO(overridden.output);
  CHECK(overridden.exit_code == 0);
  CHECK(contains(overridden.output, "threads: 1,"));
}

TEST_CASE("run: generation options outside their ranges are usage errors naming the flag, before any work") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--max_new_tokens", "-5"},  {"--max_new_tokens", "0"},
      {"--max_new_tokens", std::to_string(-rng.between(1, 1'000'000))},
      {"--temperature", "-1"},     {"--temperature", "nan"},  {"--temperature", "NaN"}, {"--temperature", "-nan"},
      {"--temperature", "inf"},    {"--temperature", "-inf"}, {"--temperature", "1e999"},
      {"--temperature", std::to_string(-0.001 - static_cast<double>(rng.below(1000)))},
      {"--top_k", "-1"},           {"--top_k", std::to_string(-rng.between(1, 1'000'000))},
      {"--top_p", "-0.5"},         {"--top_p", "2"},          {"--top_p", "nan"}, {"--top_p", "inf"},
      {"--top_p", "1.001"},        {"--top_p", std::to_string(1.01 + static_cast<double>(rng.below(1000)))}};
  for (const auto& flag_value : bad) {
    const std::string& flag = flag_value.first;
    const std::string& value = flag_value.second;
    const CommandResult refused = run_both("run " + flag + " " + value);
    INFO(flag << " " << value << ": " << refused.output);
    CHECK(refused.exit_code == 2);
    CHECK(contains(refused.output, "error: " + flag));
    CHECK_FALSE(contains(refused.output, "model: built-in"));  // refused before the model is made
  }
  // The edges of each range run.
  for (const char* edge : {"--max_new_tokens 1", "--max_new_tokens 3 --temperature 0",
                                  "--max_new_tokens 3 --top_k 0 --temperature 0.7",
                                  "--max_new_tokens 3 --top_p 0 --temperature 0.7",
                                  "--max_new_tokens 3 --top_p 1 --temperature 0.7"}) {
    const CommandResult ran = run_both(std::string("run ") + edge);
    INFO(edge << ": " << ran.output);
    CHECK(ran.exit_code == 0);
  }
}

TEST_CASE("generation options: the library refuses what the command line refuses, NaN included") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto message_for = [](auto change) {
    sy::GenerationOptions options;
    change(options);
    return input_error_message([&] { sy::check_generation_options(options); });
  };
  for (const float t : {-1.0f, nan, inf, -inf, -std::uniform_real_distribution<float>(1e-6f, 1e6f)(rng.engine)})
    CHECK(contains(message_for([t](auto& o) { o.sampling.temperature = t; }), "--temperature"));
  for (const float p : {-0.5f, 2.0f, nan, inf, 1.0f + std::uniform_real_distribution<float>(1e-6f, 1e6f)(rng.engine)})
    CHECK(contains(message_for([p](auto& o) { o.sampling.top_p = p; }), "--top_p"));
  const int negative = -static_cast<int>(rng.between(1, 1'000'000));
  CHECK(contains(message_for([negative](auto& o) { o.sampling.top_k = negative; }), "--top_k"));
  CHECK(contains(message_for([negative](auto& o) { o.max_new_tokens = negative; }), "--max_new_tokens"));
  CHECK(contains(message_for([](auto& o) { o.max_new_tokens = 0; }), "--max_new_tokens"));
  for (const float p : {-0.1f, 1.5f, nan, inf})
    CHECK(contains(message_for([p](auto& o) { o.sampling.min_p = p; }), "--min_p"));
  for (const float p : {0.0f, -1.0f, nan, inf, -inf})
    CHECK(contains(message_for([p](auto& o) { o.sampling.repetition_penalty = p; }), "--repetition_penalty"));
  // In range: no error.
  for (int i = 0; i < 100; ++i) {
    sy::GenerationOptions options;
    options.max_new_tokens = static_cast<int>(rng.between(1, 1 << 30));
    options.sampling.temperature = std::uniform_real_distribution<float>(0.0f, 1e6f)(rng.engine);
    options.sampling.top_k = static_cast<int>(rng.between(0, 1 << 30));
    options.sampling.top_p = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng.engine);
    INFO(options.max_new_tokens << " " << options.sampling.temperature << " " << options.sampling.top_k << " "
                                << options.sampling.top_p);
    CHECK(input_error_message([&] { sy::check_generation_options(options); }) == "<no exception>");
  }
}

TEST_CASE("CLI11 reads nan and inf into a float option, so the range checks must refuse them") {
  for (const char* text : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e999", "-1e999"}) {
    CLI::App app;
    float value = 0.5f;
    app.add_option("--x", value);
    const std::vector<std::string> arguments = {"--x", text};
    std::vector<const char*> argv = {"test"};
    for (const std::string& a : arguments) argv.push_back(a.c_str());
    INFO(text);
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
    CHECK_FALSE(std::isfinite(value));
  }
}

TEST_CASE("integer flags: base-10 whole numbers in their range; no octal, no wrapped negatives") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  // The value `text` gives an option of type T checked by `validator`, or the error.
  auto parse = [](auto value, const CLI::Validator& validator, const std::string& text) -> std::string {
    CLI::App app;
    app.add_option("--n", value)->transform(validator);
    std::vector<const char*> argv = {"test", "--n", text.c_str()};
    try {
      app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
    } catch (const CLI::ParseError& e) {
      return std::string("error: ") + e.what();
    }
    return std::to_string(value);
  };
  const CLI::Validator tokens = sy::cli::integer_range(1, 1 << 20);
  CHECK(parse(0, tokens, "010") == "10");  // CLI11 alone reads 8
  CHECK(parse(0, tokens, "0000000000000000000000007") == "7");
  CHECK(parse(0, tokens, "1048576") == "1048576");
  for (const char* bad : {"0", "-1", "1048577", "0x10", "1e3", "12abc", " ", "99999999999999999999", "--5"}) {
    INFO(bad);
    const std::string result = parse(0, tokens, bad);
    CHECK(contains(result, "error: --n: "));
    CHECK(contains(result, "1 to 1048576"));
  }
  CHECK(contains(parse(0, tokens, "-1"), "is outside"));
  CHECK(contains(parse(0, tokens, "0x10"), "is not a whole number"));
  // An unsigned flag: CLI11 alone reads "-1" as 2^64 - 1.
  const CLI::Validator seed = sy::cli::whole_number<std::uint64_t>();
  CHECK(contains(parse(std::uint64_t{0}, seed, "-1"), "is outside 0 to 18446744073709551615"));
  CHECK(parse(std::uint64_t{0}, seed, "18446744073709551615") == "18446744073709551615");
  CHECK(contains(parse(std::uint64_t{0}, seed, "18446744073709551616"), "is outside"));
  // A megabyte argument is quoted in part.
  const std::string huge(1 << 20, '7');
  CHECK(parse(0, tokens, huge).size() < 200);
  // Random values land where their range says.
  for (int i = 0; i < 200; ++i) {
    const std::int64_t low = rng.between(-1'000'000, 1'000'000), high = low + rng.between(0, 1'000'000);
    const std::int64_t value = rng.between(low - 1000, high + 1000);
    const std::string result = parse(std::int64_t{0}, sy::cli::integer_range<std::int64_t>(low, high), std::to_string(value));
    INFO(low << " " << high << " " << value << ": " << result);
    if (value >= low && value <= high) CHECK(result == std::to_string(value));
    else CHECK(contains(result, "is outside " + std::to_string(low) + " to " + std::to_string(high)));
  }
}

TEST_CASE("command line: the benches' and make-model's numeric flags have ranges, checked before any work") {
  const TempDir dir;
  const std::string experts = "bench experts --shape tiny-mixtral --stream_mib 1";
  const std::string decode = "bench decode --model_path /nonexistent --optimize_config_path x.yaml";
  const std::string make = "make-model --preset tiny-mixtral --out " + (dir / "m").string();
  // Each command with the flag whose value is wrong.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"bench experts --shape tiny-mixtral --stream_mib abc", "--stream_mib"},
      {"bench experts --shape tiny-mixtral --stream_mib -1", "--stream_mib"},
      {"bench experts --shape tiny-mixtral --stream_mib 0", "--stream_mib"},
      {"bench experts --shape tiny-mixtral --stream_mib 16385", "--stream_mib"},
      {experts + " --repeat -5", "--repeat"},
      {experts + " --repeat 0", "--repeat"},
      {experts + " --prefill_tokens -1", "--prefill_tokens"},
      {experts + " --prefill_tokens 0", "--prefill_tokens"},
      {experts + " --prefill_tokens 16385", "--prefill_tokens"},
      {"bench experts --stream_mib 1 --shape no-such-preset", "--shape"},
      {"bench gemv --tokens 0", "--tokens"},
      {"bench gemv --tokens 9", "--tokens"},
      {"bench gemv --device -1", "--device"},
      {decode + " --seed -1", "--seed"},
      {decode + " --prompt_tokens 04000000", "--prompt_tokens"},  // octal 2^20 to CLI11 alone
      {make + " --seed -1", "--seed"},
      {make + " --layers 0x10", "--layers"},
      {"run --seed -1", "--seed"},
      {"run --prefill_chunk 0", "--prefill_chunk"},
      {"run --cpu_prefetch_bytes 63", "--cpu_prefetch_bytes"},
      {"run --cpu_prefetch_bytes 65537", "--cpu_prefetch_bytes"},
      {"serve --cpu_tile_block_rows -1", "--cpu_tile_block_rows"},
      {"chat --cpu_panels_by_row yes", "--cpu_panels_by_row"},
      {experts + " --cpu_tile_block_rows 1048577", "--cpu_tile_block_rows"},
      {experts + " --ab_option cpu_prefetch_bytes=1", "--ab_option"},
      {experts + " --ab_option cpu_tile_block_rows", "--ab_option"},
      {decode + " --ab_option prefetch=0", "--ab_option"},
      {"run --gpus -1", "--gpus"}};
  for (const auto& command_flag : refused) {
    const std::string& command = command_flag.first;
    const std::string& flag = command_flag.second;
    const CommandResult result = run_both(command);
    INFO(command << ": " << result.output);
    CHECK(result.exit_code == 2);
    CHECK(contains(result.output, flag));
    CHECK_FALSE(contains(result.output, "internal error"));
    CHECK_FALSE(contains(result.output, "ceiling:"));  // no STREAM run first
    CHECK_FALSE(contains(result.output, "model: built-in"));
  }
  CHECK_FALSE(fs::exists(dir / "m"));
  // In range, a small bench experts runs; with an A/B, each decode row once a side.
  const CommandResult ran = run_both(experts + " --repeat 1 --prefill_tokens 1 --threads 1");
  INFO(ran.output);
  CHECK(ran.exit_code == 0);
  CHECK(contains(ran.output, "bench experts: 1 threads"));
  const CommandResult ab = run_both(experts + " --repeat 1 --prefill_tokens 1 --threads 1 --cpu_panels_by_row false "
                                              "--ab_option cpu_prefetch_bytes=0,cpu_panels_by_row=true");
  INFO(ab.output);
  CHECK(ab.exit_code == 0);
  CHECK(contains(ab.output, " A |"));
  CHECK(contains(ab.output, " B: cpu_prefetch_bytes=0,cpu_panels_by_row=true |"));
  CHECK(contains(ab.output, "prefill with cpu_prefetch_bytes=0,cpu_panels_by_row=true: "));
}

TEST_CASE("check and run: one --max_context rule, 1 to 2^32 tokens") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempModel model("tiny-mixtral");
  const std::string check = "check --model_path " + model.path().string() + cpu_profile("Mixtral-cpu.yaml");
  const std::string run = "run --max_new_tokens 2 --model_path " + model.path().string() + cpu_profile("Mixtral-cpu.yaml");
  for (const std::string& value : {std::string("0"), std::string("-1"), std::to_string(-rng.between(2, 1LL << 40)),
                                   std::to_string((1LL << 32) + 1), std::to_string((1LL << 32) + rng.between(1, 1LL << 40))}) {
    for (const std::string& command : {check, run, check + " --format json"}) {
      const CommandResult refused = run_both(command + " --max_context " + value);
      INFO(command << " --max_context " << value << ": " << refused.output);
      CHECK(refused.exit_code == 2);
      CHECK(contains(refused.output, "--max_context " + value + " is outside 1 to 2^32"));
    }
  }
  CHECK(run_both(check + " --max_context 1").exit_code == 0);
  CHECK(run_both(check + " --max_context 4294967296").exit_code == 0);  // 2^32: an estimate, no allocation
  CHECK(run_both(run + " --max_context " + std::to_string(rng.between(8, 64))).exit_code == 0);
}

TEST_CASE("run: a checkpoint that does not match its config.json is a model error (exit 1)") {
  // One layer more than the checkpoint has (missing tensors), or a wider MLP (shapes that differ).
  for (const char* field : {"num_hidden_layers", "intermediate_size"}) {
    const TempModel model("tiny-mixtral");
    nlohmann::json config = nlohmann::json::parse(read_bytes(model.path() / "config.json"));
    config[field] = config[field].get<int>() + 8;
    write_file(model.path() / "config.json", config.dump(2));
    const CommandResult result = run_both("run --model_path " + model.path().string());
    INFO(field << ": " << result.output);
    CHECK(result.exit_code == 1);
    CHECK(contains(result.output, "does not match its config.json"));
  }
}

TEST_CASE("run --trace_out: written whole or not at all; a path it cannot write fails before the run") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempModel model("tiny-mixtral");
  const std::string run = "run --max_new_tokens 4 --model_path " + model.path().string();
  const TempDir dir;
  const std::string old_trace = rng.bytes(100 + rng.below(1000));
  write_file(dir / "trace.json", old_trace);

  // Nowhere to write: refused before anything runs.
  for (const fs::path& nowhere : {dir / "no-such-folder" / "t.json", dir.path()}) {
    const CommandResult refused = run_both(run + " --trace_out " + nowhere.string());
    INFO(refused.output);
    CHECK(refused.exit_code == 2);
    CHECK(contains(refused.output, nowhere.string()));
    CHECK_FALSE(contains(refused.output, "eval count"));
  }
  // A FIFO is refused, not replaced by a regular file. (A reader holds it open, so that a writer
  // that opened it anyway would not block.)
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  const int reader = ::open((dir / "fifo").c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  const CommandResult fifo = run_both(run + " --trace_out " + (dir / "fifo").string());
  ::close(reader);
  CHECK(fifo.exit_code == 2);
  CHECK(contains(fifo.output, "is a FIFO"));
  CHECK(fs::is_fifo(dir / "fifo"));
  // A run that fails after the trace was opened (a token outside the vocabulary) leaves the old file.
  CHECK(run_both(run + " --prompt_ids 1,999999 --trace_out " + (dir / "trace.json").string()).exit_code == 2);
  CHECK(read_bytes(dir / "trace.json") == old_trace);
  // A write past the file-size limit: an error, and the old file survives.
  if (!sy::testing::kAddressSanitizer) {  // ASan's runtime writes its own files past such a limit
    const CommandResult limited =
        run_switchyard_with_file_limit(run + " --profile --trace_out " + (dir / "trace.json").string(), 512);
    INFO(limited.output);
    CHECK(limited.exit_code == 2);
    CHECK(contains(limited.output, "not written"));
    CHECK(read_bytes(dir / "trace.json") == old_trace);
  }
  CHECK(hidden_files(dir.path()).empty());
  // And a run that ends well replaces it with a whole trace.
  const CommandResult ran = run_both(run + " --trace_out " + (dir / "trace.json").string());
  CHECK(ran.exit_code == 0);
  const nlohmann::json trace = nlohmann::json::parse(read_bytes(dir / "trace.json"));
  CHECK(trace["traceEvents"].size() > 2);
  CHECK(hidden_files(dir.path()).empty());
}

TEST_CASE("split -o: a profile that fails its check is not written, and a failed write leaves the old file") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  const fs::path out = dir / "out.yaml";
  const std::string old_bytes = rng.bytes(10 + rng.below(5000));
  write_file(out, old_bytes);
  const std::string base =
      "split --arch deepseek-v3 --optimize_config_path " + source_path("optimize_rules/DeepSeek-V3-Chat.yaml");

  // 30 GiB of GPU-side weights on two cards of 1 to 12 GiB: the split fails its check.
  const std::string tight = base + " --gpus 2 --gpu_memory " + std::to_string(rng.between(1, 12)) + "GiB";
  const CommandResult failed = run_both(tight + " -o " + out.string());
  INFO(failed.output);
  CHECK(failed.exit_code == 1);
  CHECK(contains(failed.output, "over-budget"));
  CHECK(contains(failed.output, out.string() + " not written"));
  CHECK_FALSE(contains(failed.output, "wrote"));
  CHECK(read_bytes(out) == old_bytes);
  CHECK(hidden_files(dir.path()).empty());

  // One that passes: the file holds exactly the profile `-o -` prints.
  const int gpus = static_cast<int>(rng.between(1, 8));
  const std::string fits = base + " --gpus " + std::to_string(gpus);
  const CommandResult printed = run_switchyard(fits + " -o -");  // stdout only: the profile
  REQUIRE(printed.exit_code == 0);
  REQUIRE(contains(printed.output, "transfer_map"));
  // Under a file-size limit below its size the write fails: exit 2, the old file whole.
  const auto limit = static_cast<rlim_t>(rng.between(1, static_cast<std::int64_t>(printed.output.size()) - 1));
  INFO("limit " << limit << " of " << printed.output.size() << " bytes");
  const CommandResult limited = run_switchyard_with_file_limit(fits + " -o " + out.string(), limit);
  INFO(limited.output);
  CHECK(limited.exit_code == 2);
  CHECK(contains(limited.output, "write failed"));
  CHECK(contains(limited.output, "not written"));
  CHECK(read_bytes(out) == old_bytes);
  CHECK(hidden_files(dir.path()).empty());

  const CommandResult wrote = run_both(fits + " -o " + out.string());
  INFO(wrote.output);
  CHECK(wrote.exit_code == 0);
  CHECK(contains(wrote.output, "wrote " + out.string()));
  CHECK(read_bytes(out) == printed.output);
  CHECK(hidden_files(dir.path()).empty());

  // A directory or a FIFO at -o is refused and stays what it is.
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  const int reader = ::open((dir / "fifo").c_str(), O_RDONLY | O_NONBLOCK);  // so that no writer blocks
  REQUIRE(reader >= 0);
  CHECK(run_both(fits + " -o " + (dir / "fifo").string()).exit_code == 2);
  ::close(reader);
  CHECK(fs::is_fifo(dir / "fifo"));
  CHECK(run_both(fits + " -o " + dir.path().string()).exit_code == 2);
}

TEST_CASE("make-model: two runs started together into one folder: one wins whole, the other exits 2") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  for (int trial = 0; trial < 4; ++trial) {
    const std::uint64_t first_seed = rng.engine();
    const std::uint64_t seeds[2] = {first_seed, first_seed + 1 + rng.below(1000)};
    const fs::path out = dir / ("m" + std::to_string(trial));
    // Enough layers that the two runs overlap in time; the folder does not exist before.
    const auto command = [&](std::uint64_t seed) {
      return std::string(SWITCHYARD_BINARY) + " make-model --preset tiny-deepseek-v3 --layers 24 --seed " +
             std::to_string(seed) + " --out " + out.string() + " 2>&1";
    };
    FILE* runs[2] = {popen(command(seeds[0]).c_str(), "r"), popen(command(seeds[1]).c_str(), "r")};
    REQUIRE(runs[0] != nullptr);
    REQUIRE(runs[1] != nullptr);
    CommandResult results[2];
    for (int i = 0; i < 2; ++i) {
      char buffer[4096];
      std::size_t n;
      while ((n = fread(buffer, 1, sizeof buffer, runs[i])) > 0) results[i].output.append(buffer, n);
      const int status = pclose(runs[i]);
      results[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    INFO("trial " << trial << "\nfirst: " << results[0].output << "\nsecond: " << results[1].output);
    REQUIRE(((results[0].exit_code == 0) != (results[1].exit_code == 0)));
    const int winner = results[0].exit_code == 0 ? 0 : 1;
    const CommandResult& loser = results[1 - winner];
    CHECK(loser.exit_code == 2);
    CHECK((contains(loser.output, "another make-model is writing") || contains(loser.output, "not empty")));
    // The folder holds exactly the checkpoint the winner's seed writes into a fresh folder.
    const fs::path reference = dir / ("reference" + std::to_string(trial));
    REQUIRE(run_switchyard(std::string("make-model --preset tiny-deepseek-v3 --layers 24 --seed ") +
                           std::to_string(seeds[winner]) + " --out " + reference.string())
                .exit_code == 0);
    const auto written = directory_bytes(out), expected = directory_bytes(reference);
    CHECK(written.size() == 2);
    std::set<std::string> names;
    for (const auto& [name, bytes] : written) names.insert(name);
    CHECK(names == std::set<std::string>{"config.json", "model.safetensors"});
    CHECK(written == expected);
  }
}

TEST_CASE("make-model: a folder another run holds is refused at once and left as it was") {
  const TempDir dir;
  write_file(dir / "notes.txt", "keep");
  // This test holds the lock a make-model run takes: flock on the directory itself.
  const int fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  for (const char* force : {"", " --force"}) {
    const CommandResult refused = run_both("make-model --preset tiny-mixtral --out " + dir.path().string() + force);
    INFO(refused.output);
    CHECK(refused.exit_code == 2);
    CHECK(contains(refused.output, dir.path().string() + ": another make-model is writing a checkpoint into this directory"));
    CHECK(directory_bytes(dir.path()) == std::map<std::string, std::string>{{"notes.txt", "keep"}});
  }
  ::close(fd);  // the lock goes with the descriptor
  const CommandResult ran = run_both("make-model --preset tiny-mixtral --force --out " + dir.path().string());
  INFO(ran.output);
  CHECK(ran.exit_code == 0);
  CHECK(fs::exists(dir / "config.json"));
  CHECK(hidden_files(dir.path()).empty());  // and no lock file
}

TEST_CASE("make-model: a write that fails leaves no file of the run behind") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  // tiny-mixtral's model.safetensors is about 0.66 MB; any limit below it fails the write.
  const auto limit = static_cast<rlim_t>(rng.between(1, 300'000));
  INFO("limit " << limit);
  const fs::path fresh = dir / "fresh";
  const CommandResult failed = run_switchyard_with_file_limit("make-model --preset tiny-mixtral --out " + fresh.string(), limit);
  INFO(failed.output);
  CHECK(failed.exit_code == 2);
  CHECK(contains(failed.output, "model.safetensors: write failed"));
  CHECK_FALSE(fs::exists(fresh));  // made by the run, so removed with it
  // Into a folder that was there (with --force over an old checkpoint): the failed run leaves the
  // old checkpoint whole and every other file as it was.
  const fs::path kept = dir / "kept";
  fs::create_directories(kept);
  const std::map<std::string, std::string> before = {
      {"notes.txt", "keep"}, {"config.json", "{}"}, {"model.safetensors", "old"}};
  for (const auto& [name, bytes] : before) write_file(kept / name, bytes);
  const CommandResult forced =
      run_switchyard_with_file_limit("make-model --preset tiny-mixtral --force --out " + kept.string(), limit);
  INFO(forced.output);
  CHECK(forced.exit_code == 2);
  CHECK(directory_bytes(kept) == before);
}

TEST_CASE("make-model --force: a run killed while writing leaves the old checkpoint; the next run replaces it whole") {
  const TempDir dir;
  const fs::path out = dir / "model";
  // 40 layers: a file of about 10 MB, which takes a good fraction of a second to write.
  const std::string make = "make-model --preset tiny-deepseek-v3 --layers 40 --force --out " + out.string();
  REQUIRE(run_both(make).exit_code == 0);
  const std::map<std::string, std::string> old = directory_bytes(out);
  REQUIRE(old.count("config.json") == 1);
  // A second run with another seed, killed as soon as it has begun writing.
  const std::string command = "exec " + std::string(SWITCHYARD_BINARY) + " " + make + " --seed 7 > /dev/null 2>&1";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool writing = false;
  while (!writing && std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(out, ec))
      if (entry.is_directory(ec)) writing = writing || !fs::is_empty(entry.path(), ec);
    if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE_MESSAGE(writing, "the second run never began writing");
  REQUIRE_MESSAGE(WIFSIGNALED(status), "the second run ended before it was killed: nothing was tested");
  // The old files all there, byte for byte, beside what the killed run left in its staging folder.
  for (const auto& file : old) {
    const std::string& name = file.first;  // INFO captures it: not a structured binding (clang 14)
    INFO(name);
    REQUIRE(fs::exists(out / name));
    CHECK(read_bytes(out / name) == file.second);
  }
  // The next forced run clears the leftovers and writes its checkpoint whole.
  const CommandResult again = run_both(make + " --seed 7");
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  const std::map<std::string, std::string> now = directory_bytes(out);
  REQUIRE(now.size() == old.size());
  CHECK(now.at("config.json") == old.at("config.json"));
  CHECK(now.at("model.safetensors") != old.at("model.safetensors"));  // another seed: other weights
}

TEST_CASE("command line: a megabyte argument is quoted in part in its error") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  // Arguments near the system's limit for one (128 KiB on Linux), of random digits.
  std::string digits(100'000 + rng.below(20'000), '0');
  for (char& c : digits) c = static_cast<char>('0' + rng.below(10));
  digits[0] = '1';
  for (const std::string& arguments :
       {"run --prompt_ids " + digits, "run --max_new_tokens " + digits, "run --cpu_infer " + digits,
        "check --arch tiny-mixtral --optimize_config_path x.yaml --gpu_memory " + digits + "x",
        "check --arch tiny-mixtral --optimize_config_path x.yaml --default_device " + digits,
        "bench experts --shape " + digits}) {
    const CommandResult refused = run_both(arguments);
    INFO(arguments.substr(0, 60) << ": " << refused.output.substr(0, 300));
    CHECK(refused.exit_code == 2);
    CHECK(contains(refused.output, digits.substr(0, 40) + "..."));
    CHECK(refused.output.size() < 2000);
  }
}
