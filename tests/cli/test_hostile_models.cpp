// Hostile and careless model directories, through the built `switchyard` binary: config.json values
// that `run` cannot use, safetensors files that break the format's tiling rule or leave tensors
// misaligned, files that are not regular files, link loops. Each must give a clear error with the
// right exit status (1: the model's content is wrong; 2: usage and I/O), `check` must refuse first
// whatever `run` refuses, `check --format json` must print one JSON document, and nothing may hang:
// every command runs under `timeout`, so a regression fails instead of blocking the suite.
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/gguf.h"
#include "core/gguf_writer.h"
#include "core/make_model.h"
#include "text/byte_level.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using switchyard::core_testing::contains;
using switchyard::core_testing::SeededRng;
using switchyard::testing::CommandResult;
using switchyard::testing::run_switchyard_with_env;
using switchyard::testing::source_path;

namespace {

// Seconds a command may take; the tiny models check and run in well under one.
constexpr const char* kTimeout = "timeout 20";
constexpr int kTimedOut = 124;

CommandResult switchyard_cmd(const std::string& arguments) { return run_switchyard_with_env(kTimeout, arguments, /*with_stderr=*/true); }
CommandResult switchyard_stdout(const std::string& arguments) { return run_switchyard_with_env(kTimeout, arguments, false); }

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

const char* cpu_profile(const std::string& preset) {
  if (preset == "tiny-deepseek-v3") return "optimize_rules/DeepSeek-V3-Chat-cpu.yaml";
  if (preset == "tiny-deepseek-v2") return "optimize_rules/DeepSeek-V2-Lite-Chat-cpu.yaml";
  if (preset == "tiny-qwen3-moe") return "optimize_rules/Qwen3-MoE-cpu.yaml";
  return "optimize_rules/Mixtral-cpu.yaml";
}

std::string check_args(const fs::path& dir, const std::string& preset) {
  return "check --model_path " + quoted(dir) + " --optimize_config_path " + source_path(cpu_profile(preset));
}
std::string run_args(const fs::path& dir) {
  return "run --model_path " + quoted(dir) + " --prompt_ids 3,1,4,1,5 --max_new_tokens 3 --format json";
}

// A make-model checkpoint in a fresh directory, removed at scope exit.
struct TempModel {
  fs::path dir;
  // `format` "gguf": one model.gguf of f32 weights.
  TempModel(const std::string& preset, std::uint64_t seed, const std::string& name = "model",
            const std::string& format = "safetensors") {
    dir = fs::temp_directory_path() / ("switchyard-hostile-" + std::to_string(std::random_device{}()) + "-" +
                                       std::to_string(std::random_device{}())) / name;
    switchyard::MakeModelOptions options;
    options.preset = preset;
    options.out_dir = dir;
    options.seed = seed;
    options.format = format;
    if (format == "gguf") options.dtype = "f32";
    switchyard::make_model(options);
  }
  ~TempModel() {
    std::error_code ignored;
    fs::remove_all(dir.parent_path(), ignored);
  }
  fs::path operator/(const std::string& name) const { return dir / name; }
};

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void edit_config(const fs::path& dir, const std::function<void(json&)>& edit) {
  json config = json::parse(read_bytes(dir / "config.json"));
  edit(config);
  write_bytes(dir / "config.json", config.dump(2));
}

// A safetensors file split into its parts: the JSON header (as stored, padding included) and the data.
struct SafetensorsParts {
  std::string header;
  std::string data;
};
SafetensorsParts split_safetensors(const std::string& file) {
  REQUIRE(file.size() >= 8);
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(file[static_cast<std::size_t>(i)]);
  REQUIRE(8 + length <= file.size());
  return {file.substr(8, length), file.substr(8 + length)};
}
std::string join_safetensors(const std::string& header, const std::string& data, std::uint64_t stated_length) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((stated_length >> (8 * i)) & 0xff);
  return out + header + data;
}

// stdout must be exactly one JSON document; its first diagnostic is returned.
json only_document(const CommandResult& result) {
  const json doc = json::parse(result.output, nullptr, /*allow_exceptions=*/false);
  REQUIRE_MESSAGE(!doc.is_discarded(), "stdout is not one JSON document:\n" << result.output);
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("diagnostics"));
  REQUIRE(doc["diagnostics"].is_array());
  REQUIRE_FALSE(doc["diagnostics"].empty());
  return doc["diagnostics"][0];
}


}  // namespace

TEST_CASE("hostile models: config.json values run cannot use are refused by check and run alike, naming the field") {
  struct Case {
    const char* preset;
    const char* field;  // named in the message
    std::function<void(json&)> edit;
  };
  const std::vector<Case> cases = {
      // run stopped on these with "internal error" after check had passed them.
      {"tiny-deepseek-v3", "n_group", [](json& j) { j["n_group"] = j["n_routed_experts"]; }},
      {"tiny-deepseek-v3", "topk_group",
       [](json& j) { j["n_group"] = 8; j["topk_group"] = 1; j["num_experts_per_tok"] = 3; }},
      {"tiny-deepseek-v3", "rope_type", [](json& j) { j["rope_scaling"]["rope_type"] = "linear"; }},
      {"tiny-mixtral", "head_dim", [](json& j) { j["head_dim"] = 15; }},
      {"tiny-mixtral", "head_dim",  // the default, hidden_size / num_attention_heads, is not whole
       [](json& j) { j.erase("head_dim"); j["num_attention_heads"] = 6; j["num_key_value_heads"] = 2; }},
      {"tiny-qwen3-moe", "head_dim", [](json& j) { j["head_dim"] = 2048; }},
      {"tiny-mixtral", "tie_word_embeddings", [](json& j) { j["tie_word_embeddings"] = true; }},
      // These ran to NaN: every generated id 0, exit 0.
      {"tiny-mixtral", "rms_norm_eps", [](json& j) { j["rms_norm_eps"] = 0; }},
      {"tiny-qwen3-moe", "rms_norm_eps", [](json& j) { j["rms_norm_eps"] = 1e300; }},
      {"tiny-qwen3-moe", "rope_theta", [](json& j) { j["rope_theta"] = 0; }},
      {"tiny-mixtral", "rope_theta", [](json& j) { j["rope_theta"] = -1e6; }},
      {"tiny-deepseek-v3", "factor", [](json& j) { j["rope_scaling"]["factor"] = 0; }},
      {"tiny-deepseek-v3", "beta_fast", [](json& j) { j["rope_scaling"]["beta_fast"] = 0; }},
      {"tiny-deepseek-v3", "routed_scaling_factor", [](json& j) { j["routed_scaling_factor"] = -1e308; }},
      // These were accepted silently.
      {"tiny-deepseek-v3", "scoring_func", [](json& j) { j["scoring_func"] = "relu"; }},
      {"tiny-deepseek-v2", "scoring_func", [](json& j) { j["scoring_func"] = "sigmoid"; }},
      {"tiny-qwen3-moe", "rope_theta",
       [](json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", "1000000"}}; }},
      {"tiny-qwen3-moe", "mlp_only_layers", [](json& j) { j["mlp_only_layers"] = {-1, 1000000000000LL}; }},
      {"tiny-qwen3-moe", "mlp_only_layers", [](json& j) { j["mlp_only_layers"] = {3}; }},
  };
  std::map<std::string, std::unique_ptr<TempModel>> originals;
  for (const Case& c : cases)
    if (!originals.count(c.preset)) originals[c.preset] = std::make_unique<TempModel>(c.preset, 11);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const TempModel& original = *originals.at(c.preset);
    const fs::path dir = original.dir.parent_path() / ("case-" + std::to_string(i));
    fs::copy(original.dir, dir);
    edit_config(dir, c.edit);
    const std::string field = "field '" + std::string(c.field) + "'";
    INFO(std::string(c.preset) << ", " << field << ": " << read_bytes(dir / "config.json"));

    const CommandResult check = switchyard_cmd(check_args(dir, c.preset));
    INFO("check said: " << check.output);
    CHECK(check.exit_code == 1);
    CHECK(contains(check.output, (dir / "config.json").string()));
    CHECK(contains(check.output, field));

    const CommandResult json_check = switchyard_stdout(check_args(dir, c.preset) + " --format json");
    CHECK(json_check.exit_code == 1);
    CHECK(contains(only_document(json_check)["message"].get<std::string>(), field));

    const CommandResult run = switchyard_cmd(run_args(dir));
    INFO("run said: " << run.output);
    CHECK(run.exit_code == 1);
    CHECK(contains(run.output, field));
    CHECK_FALSE(contains(run.output, "internal error"));
    CHECK_FALSE(contains(run.output, "generated_ids"));
  }
}

TEST_CASE("hostile models: a safetensors header length a few bytes off, or bytes after the last tensor, are refused") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempModel model("tiny-mixtral", 5);
  const fs::path weights = model / "model.safetensors";
  const SafetensorsParts parts = split_safetensors(read_bytes(weights));
  // Spaces after the JSON, as writers pad it: the stated length can leave some off and still parse.
  const std::string padded = parts.header + std::string(8, ' ');

  SUBCASE("padded to the same alignment, the file is still valid") {
    write_bytes(weights, join_safetensors(padded, parts.data, padded.size()));
    CHECK(switchyard_cmd(check_args(model.dir, "tiny-mixtral")).exit_code == 0);
    CHECK(switchyard_cmd(run_args(model.dir)).exit_code == 0);
  }
  SUBCASE("a stated length short by 1 to 8 bytes shifts every tensor: refused, naming the file") {
    const std::uint64_t short_by = static_cast<std::uint64_t>(rng.between(1, 8));
    INFO("short by " << short_by);
    write_bytes(weights, join_safetensors(padded, parts.data, padded.size() - short_by));
    for (const std::string& command : {check_args(model.dir, "tiny-mixtral"), run_args(model.dir)}) {
      const CommandResult result = switchyard_cmd(command);
      INFO(command << ": " << result.output);
      CHECK(result.exit_code == 1);
      CHECK(contains(result.output, weights.string()));
      CHECK(contains(result.output, std::to_string(short_by) + " bytes after the last tensor"));
    }
  }
  SUBCASE("bytes appended after the last tensor: refused") {
    const std::size_t extra = static_cast<std::size_t>(rng.between(1, 4096));
    write_bytes(weights, join_safetensors(parts.header, parts.data + rng.bytes(extra), parts.header.size()));
    for (const std::string& command : {check_args(model.dir, "tiny-mixtral"), run_args(model.dir)}) {
      const CommandResult result = switchyard_cmd(command);
      INFO(command << ": " << result.output);
      CHECK(result.exit_code == 1);
      CHECK(contains(result.output, std::to_string(extra) + " bytes after the last tensor"));
    }
    const CommandResult json_check = switchyard_stdout(check_args(model.dir, "tiny-mixtral") + " --format json");
    CHECK(json_check.exit_code == 1);
    CHECK(contains(only_document(json_check)["message"].get<std::string>(), "after the last tensor"));
  }
}

TEST_CASE("hostile models: a header length that leaves tensors misaligned runs and generates the same ids") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  for (const char* preset : {"tiny-mixtral", "tiny-deepseek-v3"}) {
    INFO(std::string(preset));
    const TempModel model(preset, 7);
    const std::string expected = switchyard::testing::generated_ids(switchyard_cmd(run_args(model.dir)).output);
    const fs::path weights = model / "model.safetensors";
    const SafetensorsParts parts = split_safetensors(read_bytes(weights));
    // 8 + header length, the data section's offset in the file: 1 to 7 past a multiple of 8.
    const std::string header = parts.header + std::string(static_cast<std::size_t>(rng.between(1, 7)), ' ');
    INFO("data section at byte " << 8 + header.size());
    write_bytes(weights, join_safetensors(header, parts.data, header.size()));
    CHECK(switchyard_cmd(check_args(model.dir, preset)).exit_code == 0);
    const CommandResult run = switchyard_cmd(run_args(model.dir));
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(switchyard::testing::generated_ids(run.output) == expected);
  }
}

TEST_CASE("hostile models: files that are not regular files are named, never waited on or read forever (exit 2)") {
  const TempModel original("tiny-mixtral", 3);
  struct Case {
    const char* label;
    std::function<void(const fs::path&)> break_model;
    std::vector<std::string> expected;  // parts of the message
  };
  const auto fifo = [](const fs::path& path) {
    fs::remove(path);
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  };
  const auto sharded = [](const fs::path& dir, const std::string& shard) {
    fs::rename(dir / "model.safetensors", dir / "model-00001-of-00002.safetensors");
    json weight_map = json::object();
    weight_map["model.norm.weight"] = "model-00001-of-00002.safetensors";
    weight_map["lm_head.weight"] = shard;
    write_bytes(dir / "model.safetensors.index.json", json{{"weight_map", weight_map}}.dump());
  };
  const std::vector<Case> cases = {
      {"config.json is a directory",
       [](const fs::path& dir) {
         fs::remove(dir / "config.json");
         fs::create_directory(dir / "config.json");
       },
       {"config.json: is a directory"}},
      {"config.json is a FIFO", [&](const fs::path& dir) { fifo(dir / "config.json"); }, {"config.json: is a FIFO"}},
      {"config.json links to /dev/zero",
       [](const fs::path& dir) {
         fs::remove(dir / "config.json");
         fs::create_symlink("/dev/zero", dir / "config.json");
       },
       {"config.json: is a character device"}},
      {"the index is a FIFO", [&](const fs::path& dir) { fifo(dir / "model.safetensors.index.json"); },
       {"model.safetensors.index.json: is a FIFO"}},
      {"model.safetensors is a FIFO", [&](const fs::path& dir) { fifo(dir / "model.safetensors"); },
       {"model.safetensors: is a FIFO"}},
      {"a shard the index names is missing", [&](const fs::path& dir) { sharded(dir, "model-00002-of-00002.safetensors"); },
       {"model-00002-of-00002.safetensors: no such file", "named in model.safetensors.index.json"}},
      {"a shard the index names is a FIFO",
       [&](const fs::path& dir) {
         sharded(dir, "model-00002-of-00002.safetensors");
         fifo(dir / "model-00002-of-00002.safetensors");
       },
       {"model-00002-of-00002.safetensors: is a FIFO"}},
      {"a shard the index names is a directory",
       [&](const fs::path& dir) {
         sharded(dir, "model-00002-of-00002.safetensors");
         fs::create_directory(dir / "model-00002-of-00002.safetensors");
       },
       {"model-00002-of-00002.safetensors: is a directory"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const fs::path dir = original.dir.parent_path() / ("case-" + std::to_string(i));
    fs::copy(original.dir, dir);
    c.break_model(dir);
    for (const std::string& command : {check_args(dir, "tiny-mixtral"), run_args(dir)}) {
      const CommandResult result = switchyard_cmd(command);
      INFO(std::string(c.label) << ": " << command << ": " << result.output);
      CHECK(result.exit_code != kTimedOut);
      CHECK(result.exit_code == 2);
      for (const std::string& part : c.expected) CHECK(contains(result.output, part));
      CHECK_FALSE(contains(result.output, "internal error"));
    }
  }
}

TEST_CASE("hostile models: check --format json prints one JSON document for every failure") {
  const TempModel original("tiny-qwen3-moe", 9);
  const fs::path root = original.dir.parent_path();
  SUBCASE("link loops: the model directory, config.json, model.safetensors (exit 2)") {
    fs::create_symlink(root / "loop-b", root / "loop-a");
    fs::create_symlink(root / "loop-a", root / "loop-b");
    fs::copy(original.dir, root / "config-loop");
    fs::remove(root / "config-loop" / "config.json");
    fs::create_symlink(root / "config-loop" / "config.json", root / "config-loop" / "config.json");
    fs::copy(original.dir, root / "weights-loop");
    fs::remove(root / "weights-loop" / "model.safetensors");
    fs::create_symlink(root / "weights-loop" / "model.safetensors", root / "weights-loop" / "model.safetensors");
    // Not a structured binding: clang 14 cannot capture one in INFO's lambda.
    for (const auto& dir_named : {std::pair{root / "loop-a", root / "loop-a"},
                                  std::pair{root / "config-loop", root / "config-loop" / "config.json"},
                                  std::pair{root / "weights-loop", root / "weights-loop" / "model.safetensors"}}) {
      const fs::path& dir = dir_named.first;
      const fs::path& named = dir_named.second;
      const CommandResult json_check = switchyard_stdout(check_args(dir, "tiny-qwen3-moe") + " --format json");
      INFO(dir << ": " << json_check.output);
      CHECK(json_check.exit_code == 2);
      const json diagnostic = only_document(json_check);
      CHECK(diagnostic["severity"] == "error");
      CHECK(contains(diagnostic["message"].get<std::string>(), named.string()));
      const CommandResult table = switchyard_cmd(check_args(dir, "tiny-qwen3-moe"));
      INFO(table.output);
      CHECK(table.exit_code == 2);
      CHECK(contains(table.output, "error: " + named.string()));
      CHECK_FALSE(contains(table.output, "internal error"));
      CHECK(switchyard_cmd(run_args(dir)).exit_code == 2);
    }
  }
  SUBCASE("a model directory whose name is not UTF-8, with a broken config.json (exit 1)") {
    const fs::path dir = root / "model-\xff\xfe";
    fs::copy(original.dir, dir);
    edit_config(dir, [](json& j) { j["rms_norm_eps"] = -1; });
    const CommandResult json_check = switchyard_stdout(check_args(dir, "tiny-qwen3-moe") + " --format json");
    CHECK(json_check.exit_code == 1);
    CHECK(contains(only_document(json_check)["message"].get<std::string>(), "field 'rms_norm_eps'"));
  }
  SUBCASE("a valid model in a directory whose name is not UTF-8 (exit 0)") {
    const fs::path dir = root / "model-\xc3\x28";
    fs::copy(original.dir, dir);
    const CommandResult json_check = switchyard_stdout(check_args(dir, "tiny-qwen3-moe") + " --format json");
    CHECK(json_check.exit_code == 0);
    const json doc = json::parse(json_check.output, nullptr, false);
    REQUIRE_MESSAGE(!doc.is_discarded(), json_check.output);
    CHECK(doc["modules"].size() > 0);
  }
}

TEST_CASE("hostile models: exit 1 when the model's content is wrong, 2 for usage and I/O") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempModel original("tiny-deepseek-v2", 13);
  const fs::path root = original.dir.parent_path();
  struct Case {
    const char* label;
    std::function<void(const fs::path&)> break_model;
    int exit_code;
  };
  const std::vector<Case> cases = {
      {"config.json is not JSON", [](const fs::path& dir) { write_bytes(dir / "config.json", "{\"model_type\": "); }, 1},
      {"config.json holds a number past a double's range",
       [](const fs::path& dir) { write_bytes(dir / "config.json", "{\"rope_theta\": 1e999}"); }, 1},
      {"config.json has a field of the wrong type",
       [](const fs::path& dir) { edit_config(dir, [](json& j) { j["hidden_size"] = "wide"; }); }, 1},
      {"the safetensors header is not JSON",
       [&](const fs::path& dir) {
         const SafetensorsParts parts = split_safetensors(read_bytes(dir / "model.safetensors"));
         std::string header = parts.header;
         header[rng.below(header.size() / 2)] = '\x01';
         write_bytes(dir / "model.safetensors", join_safetensors(header, parts.data, header.size()));
       },
       1},
      {"the safetensors file is truncated",
       [&](const fs::path& dir) {
         const std::string file = read_bytes(dir / "model.safetensors");
         write_bytes(dir / "model.safetensors", file.substr(0, file.size() - 1 - rng.below(64)));
       },
       1},
      {"the safetensors file is shorter than its 8-byte length field",
       [](const fs::path& dir) { write_bytes(dir / "model.safetensors", std::string(5, '\x05')); }, 1},
      {"config.json is missing", [](const fs::path& dir) { fs::remove(dir / "config.json"); }, 2},
      {"the weights are missing", [](const fs::path& dir) { fs::remove(dir / "model.safetensors"); }, 2},
      {"the model directory is missing", [](const fs::path& dir) { fs::remove_all(dir); }, 2},
      {"the model directory is a file", [](const fs::path& dir) {
         fs::remove_all(dir);
         write_bytes(dir, "not a directory");
       }, 2},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const fs::path dir = root / ("case-" + std::to_string(i));
    fs::copy(original.dir, dir);
    c.break_model(dir);
    for (const std::string& command : {check_args(dir, "tiny-deepseek-v2"), run_args(dir)}) {
      const CommandResult result = switchyard_cmd(command);
      INFO(std::string(c.label) << ": " << command << ": " << result.output);
      CHECK(result.exit_code == c.exit_code);
      CHECK(contains(result.output, dir.string()));
      CHECK_FALSE(contains(result.output, "internal error"));
    }
  }
}

namespace {

// GGUF models: a make-model file rewritten with one thing changed.
std::string gguf_check_args(const fs::path& file) {
  return "check --gguf_path " + quoted(file) + " --optimize_config_path " + source_path(cpu_profile("tiny-deepseek-v3"));
}
std::string gguf_run_args(const fs::path& file) {
  return "run --gguf_path " + quoted(file) + " --optimize_config_path " + source_path(cpu_profile("tiny-deepseek-v3")) +
         " --prompt_ids 3,1,4,1,5 --max_new_tokens 3 --format json";
}

void copy_value(switchyard::GgufWriter& w, const switchyard::GgufValue& v) {
  using T = switchyard::GgufValueType;
  std::string key(v.key());
  switch (v.type()) {
    case T::u8: w.set_u8(key, static_cast<std::uint8_t>(*v.as_int())); return;
    case T::i8: w.set_i8(key, static_cast<std::int8_t>(*v.as_int())); return;
    case T::u16: w.set_u16(key, static_cast<std::uint16_t>(*v.as_int())); return;
    case T::i16: w.set_i16(key, static_cast<std::int16_t>(*v.as_int())); return;
    case T::u32: w.set_u32(key, static_cast<std::uint32_t>(*v.as_int())); return;
    case T::i32: w.set_i32(key, static_cast<std::int32_t>(*v.as_int())); return;
    case T::u64: w.set_u64(key, static_cast<std::uint64_t>(*v.as_int())); return;
    case T::i64: w.set_i64(key, *v.as_int()); return;
    case T::f32: w.set_f32(key, static_cast<float>(*v.as_number())); return;
    case T::f64: w.set_f64(key, *v.as_number()); return;
    case T::boolean: w.set_bool(key, *v.as_bool()); return;
    case T::string: w.set_string(key, std::string(*v.as_string())); return;
    case T::array: break;
  }
  const auto converted = [&](auto element) {
    std::vector<decltype(element)> out;
    for (std::int64_t n : v.ints()) out.push_back(static_cast<decltype(element)>(n));
    return out;
  };
  switch (v.element_type()) {
    case T::string: {
      std::vector<std::string> strings;
      for (std::string_view s : v.strings()) strings.emplace_back(s);
      w.set_strings(key, strings);
      return;
    }
    case T::i32: w.set_i32s(key, converted(std::int32_t{})); return;
    case T::u32: w.set_u32s(key, converted(std::uint32_t{})); return;
    case T::i64: w.set_i64s(key, converted(std::int64_t{})); return;
    case T::f32: {
      std::vector<float> floats;
      for (double x : v.numbers()) floats.push_back(static_cast<float>(x));
      w.set_f32s(key, floats);
      return;
    }
    default: FAIL("rewrite_gguf: an array of " << switchyard::gguf_value_type_name(v.element_type()) << " in " << key);
  }
}

// `from`'s keys and tensors written to `to`, all but the tensor named `skip`; then `edit` may set keys
// again (replaced in place) and add tensors.
void rewrite_gguf(const fs::path& from, const fs::path& to,
                  const std::function<void(switchyard::GgufWriter&, const switchyard::GgufFile&)>& edit,
                  const std::string& skip = "") {
  const switchyard::GgufFile file = switchyard::GgufFile::open(from);
  switchyard::GgufWriter w(static_cast<std::uint32_t>(file.alignment()));
  for (const switchyard::GgufValue& v : file.metadata())
    if (v.key() != "general.alignment") copy_value(w, v);
  for (const switchyard::GgufTensorInfo& t : file.tensors())
    if (t.name != skip)
      w.add_tensor(t.name, t.dtype, t.shape, [&file, &t](std::byte* out) { std::memcpy(out, file.tensor(t).data(), t.bytes); });
  edit(w, file);
  w.write(to);
}

const switchyard::GgufTensorInfo& first_tensor_ending(const switchyard::GgufFile& file, const std::string& suffix) {
  for (const switchyard::GgufTensorInfo& t : file.tensors())
    if (t.name.size() >= suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0) return t;
  FAIL("no tensor ends in " << suffix);
  throw std::logic_error("unreachable");
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

void fill_zero(std::byte* out, std::size_t bytes) { std::memset(out, 0, bytes); }

}  // namespace

TEST_CASE("hostile models: GGUF keys and tensors run cannot use are refused by check and run alike (exit 1), naming them") {
  using switchyard::GgufFile;
  using switchyard::GgufWriter;
  using switchyard::DType;
  const TempModel source("tiny-deepseek-v3", 17, "source", "gguf");
  const fs::path original = source / "model.gguf";
  struct Case {
    const char* label;
    std::function<void(GgufWriter&, const GgufFile&)> edit;
    std::string skip;                   // a tensor the edit replaces
    std::vector<std::string> expected;  // parts of the message
    std::vector<std::string> unexpected;
  };
  const GgufFile made = GgufFile::open(original);
  const switchyard::GgufTensorInfo& up = first_tensor_ending(made, "ffn_up_exps.weight");
  const std::int64_t experts = up.shape[0];
  const std::vector<std::int64_t> doubled{2 * experts, up.shape[1], up.shape[2]};
  const std::vector<std::int64_t> norm_shape = made.find_tensor("output_norm.weight")->shape;
  std::vector<Case> cases = {
      {"block_count -1", [](GgufWriter& w, const GgufFile&) { w.set_i32("deepseek2.block_count", -1); }, "",
       {"deepseek2.block_count is -1; it must be from 1 to"}, {"nextn_predict_layers"}},
      {"block_count an array", [](GgufWriter& w, const GgufFile&) { w.set_u32s("deepseek2.block_count", {4, 4}); }, "",
       {"deepseek2.block_count is an array of u32, but an integer is expected"}, {"missing"}},
      {"block_count past INT64_MAX", [](GgufWriter& w, const GgufFile&) { w.set_u64("deepseek2.block_count", ~0ULL); }, "",
       {"deepseek2.block_count is a u64 above 2^63 - 1, but an integer is expected"}, {"missing"}},
      {"expert_gating_func 99", [](GgufWriter& w, const GgufFile&) { w.set_u32("deepseek2.expert_gating_func", 99); }, "",
       {"deepseek2.expert_gating_func is 99", "valid: 1 (softmax), 2 (sigmoid)"}, {}},
      {"ffn_up_exps holding twice expert_count experts",
       [&](GgufWriter& w, const GgufFile&) {
         const std::uint64_t bytes = static_cast<std::uint64_t>(2 * experts * up.shape[1] * up.shape[2]) * 4;
         w.add_tensor(up.name, DType::f32, doubled, [bytes](std::byte* out) { fill_zero(out, bytes); });
       },
       up.name,
       {"tensor '" + up.name + "' has shape " + shape_text(doubled), "(" + std::to_string(experts) + " experts: deepseek2.expert_count)"},
       {}},
  };
  for (DType type : {DType::i8, DType::i16, DType::i32, DType::i64, DType::f64}) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(norm_shape[0] * switchyard::dtype_info(type).block_bytes);
    cases.push_back({"output_norm.weight stored as a type run does not take",
                     [=](GgufWriter& w, const GgufFile&) {
                       w.add_tensor("output_norm.weight", type, norm_shape, [bytes](std::byte* out) { fill_zero(out, bytes); });
                     },
                     "output_norm.weight",
                     {"tensor 'output_norm.weight' is stored as " + std::string(switchyard::dtype_name(type)) + "; run takes"},
                     {}});
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const fs::path file = source.dir.parent_path() / ("case-" + std::to_string(i) + ".gguf");
    rewrite_gguf(original, file, c.edit, c.skip);
    for (const std::string& command : {gguf_check_args(file), gguf_run_args(file)}) {
      const CommandResult result = switchyard_cmd(command);
      INFO(c.label << ": " << command << ": " << result.output);
      CHECK(result.exit_code == 1);
      CHECK(contains(result.output, file.string()));
      for (const std::string& part : c.expected) CHECK(contains(result.output, part));
      for (const std::string& part : c.unexpected) CHECK_FALSE(contains(result.output, part));
      CHECK_FALSE(contains(result.output, "internal error"));
      CHECK_FALSE(contains(result.output, "generated_ids"));
    }
  }
}

TEST_CASE("hostile models: a GGUF named the first of 99999999 files fails at once at the missing second (exit 2)") {
  const TempModel source("tiny-deepseek-v3", 17, "source", "gguf");
  const fs::path file = source / "m-00001-of-99999999.gguf";
  fs::rename(source / "model.gguf", file);
  for (const std::string& command : {gguf_check_args(file), gguf_run_args(file)}) {
    const CommandResult result = switchyard_cmd(command);
    INFO(command << ": " << result.output);
    CHECK(result.exit_code != kTimedOut);
    CHECK(result.exit_code == 2);
    CHECK(contains(result.output, "m-00002-of-99999999.gguf: file 2 of the split set of m-00001-of-99999999.gguf is missing"));
    CHECK_FALSE(contains(result.output, "out of memory"));
  }
}

TEST_CASE("hostile models: a GGUF tensor name of 1 MB with terminal escapes is quoted short, escaped") {
  const TempModel source("tiny-deepseek-v3", 17, "source", "gguf");
  const fs::path file = source.dir.parent_path() / "long-name.gguf";
  std::string name = "\x1b[2J\x1b]0;owned\x07";
  name += std::string((1 << 20) - name.size(), 'x');
  rewrite_gguf(source / "model.gguf", file, [&](switchyard::GgufWriter& w, const switchyard::GgufFile&) {
    w.add_tensor(name, switchyard::DType::f32, {4}, [](std::byte* out) { fill_zero(out, 16); });
  });
  const CommandResult check = switchyard_cmd(gguf_check_args(file));
  INFO(check.output.substr(0, 4000));
  CHECK(check.exit_code == 0);
  CHECK(contains(check.output, "tensor '\\x1B[2J\\x1B]0;owned\\x07xxx"));
  CHECK(contains(check.output, "(1048576 characters) belongs to no module"));
  // Nothing of the name reaches a terminal raw, nor at length, whatever the command.
  for (const std::string& command : {gguf_check_args(file), gguf_check_args(file) + " --format json", gguf_run_args(file)}) {
    const CommandResult result = switchyard_cmd(command);
    INFO(command << ": " << result.output.substr(0, 4000));
    CHECK(result.exit_code == 0);
    CHECK(result.output.find('\x1b') == std::string::npos);
    CHECK(result.output.size() < 64 * 1024);
  }
}

TEST_CASE("hostile models: a GGUF vocabulary spelling two ids alike names both ids and the spelling (exit 1)") {
  const TempModel source("tiny-deepseek-v3", 17, "source", "gguf");
  const fs::path file = source.dir.parent_path() / "repeated.gguf";
  std::int64_t vocab = 0;
  rewrite_gguf(source / "model.gguf", file, [&](switchyard::GgufWriter& w, const switchyard::GgufFile& from) {
    vocab = from.find_tensor("token_embd.weight")->shape[0];
    REQUIRE(vocab > 300);
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(switchyard::text::byte_symbol(static_cast<std::uint8_t>(b)));
    for (std::int64_t i = 256; i < vocab; ++i) tokens.push_back("t" + std::to_string(i));
    tokens[280] = tokens[270];
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_strings("tokenizer.ggml.tokens", tokens);
  });
  const CommandResult result = switchyard_cmd("run --gguf_path " + quoted(file) + " --optimize_config_path " +
                                              source_path(cpu_profile("tiny-deepseek-v3")) + " --prompt hello --max_new_tokens 2");
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK(contains(result.output, "tokenizer.ggml.tokens: tokens 270 and 280 are both spelled 't270'"));
  CHECK_FALSE(contains(result.output, "[PAD"));
}
