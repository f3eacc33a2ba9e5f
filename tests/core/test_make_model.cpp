// make-model: random-weight checkpoints (read back by describe_model, deterministic per seed and
// independent of thread count and chunking, normal(0, 0.02) weights and unit norms, sharding past a
// size limit, refusing to overwrite), the streaming safetensors writer and bf16 rounding.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/error.h"
#include "core/make_model.h"
#include "core/model_description.h"
#include "core/random_weights.h"
#include "core/safetensors.h"
#include "core/safetensors_writer.h"
#include "core/text.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

namespace sy = switchyard;
using nlohmann::json;
using sy::core_testing::contains;
using sy::core_testing::input_error_message;
using sy::core_testing::SeededRng;
using sy::core_testing::TempDir;
using sy::core_testing::read_file;
using sy::core_testing::write_file;

namespace {

sy::MakeModelSummary make(const std::string& preset, const std::filesystem::path& out, std::uint64_t seed = 1,
                          const std::string& dtype = "bf16") {
  sy::MakeModelOptions options;
  options.preset = preset;
  options.out_dir = out;
  options.seed = seed;
  options.dtype = dtype;
  return sy::make_model(options);
}

std::vector<std::string> tiny_presets() {
  std::vector<std::string> names;
  for (const sy::ArchPreset& p : sy::arch_presets())
    if (sy::starts_with(p.name, "tiny-")) names.push_back(p.name);
  REQUIRE(names.size() >= 4);
  return names;
}

// Every tensor of a checkpoint directory by name: its values as floats (f32 or bf16 data).
std::map<std::string, std::vector<float>> read_tensor_values(const std::filesystem::path& dir) {
  const sy::CheckpointIndex index = sy::read_checkpoint_index(dir);
  std::map<std::string, std::string> files;
  std::map<std::string, std::vector<float>> values;
  for (const sy::CheckpointTensor& ct : index.tensors) {
    const sy::SafetensorsHeader& shard = index.shards[ct.shard];
    std::string& bytes = files[shard.file.string()];
    if (bytes.empty()) bytes = read_file(shard.file);
    const char* data = bytes.data() + shard.data_offset + ct.tensor.begin;
    const std::uint64_t size = ct.tensor.end - ct.tensor.begin;
    std::vector<float>& out = values[ct.tensor.name];
    if (ct.tensor.dtype == sy::DType::f32) {
      out.resize(size / 4);
      std::memcpy(out.data(), data, size);
    } else {
      REQUIRE(ct.tensor.dtype == sy::DType::bf16);
      for (std::uint64_t i = 0; i < size; i += 2) {
        std::uint16_t bits;
        std::memcpy(&bits, data + i, 2);
        out.push_back(sy::f32_from_bf16_bits(bits));
      }
    }
  }
  return values;
}

// The raw bytes of every tensor, by name, whichever shard holds it.
std::map<std::string, std::string> read_tensor_bytes(const std::filesystem::path& dir) {
  const sy::CheckpointIndex index = sy::read_checkpoint_index(dir);
  std::map<std::string, std::string> out;
  for (const sy::CheckpointTensor& ct : index.tensors) {
    const sy::SafetensorsHeader& shard = index.shards[ct.shard];
    const std::string bytes = read_file(shard.file);
    out[ct.tensor.name] = bytes.substr(shard.data_offset + ct.tensor.begin, ct.tensor.end - ct.tensor.begin);
  }
  return out;
}

// Mean and standard deviation of `values` lie within 5 standard errors of normal(0, std).
void check_normal(const std::vector<float>& values, double std) {
  const double n = static_cast<double>(values.size());
  double sum = 0, sum_squares = 0, within_one_std = 0;
  for (float v : values) {
    sum += v;
    sum_squares += static_cast<double>(v) * v;
    within_one_std += std::fabs(v) <= std ? 1 : 0;
  }
  const double mean = sum / n;
  const double sample_std = std::sqrt(sum_squares / n - mean * mean);
  INFO("n " << n << ", mean " << mean << ", std " << sample_std);
  CHECK(std::fabs(mean) < 5 * std / std::sqrt(n));                   // standard error of the mean: std / sqrt(n)
  CHECK(std::fabs(sample_std - std) < 5 * std / std::sqrt(2 * n));   // of the std, for normal data: std / sqrt(2n)
  const double p = 0.6826894921370859;                               // P(|z| <= 1)
  CHECK(std::fabs(within_one_std / n - p) < 5 * std::sqrt(p * (1 - p) / n));
}

}  // namespace

TEST_CASE("make-model: every tiny preset reads back with no diagnostics and the requested dtype") {
  for (const std::string& dtype : std::vector<std::string>{"bf16", "f32"})
    for (const std::string& preset : tiny_presets()) {
      INFO(preset << " " << dtype);
      const TempDir dir;
      const sy::MakeModelSummary summary = make(preset, dir.path(), 3, dtype);
      CHECK(summary.files.size() == 1);
      CHECK(summary.files.front().filename() == "model.safetensors");
      CHECK(summary.has_moe_layer);
      sy::Diagnostics diagnostics;
      sy::ModelSpec spec;
      spec.model_path = dir.path();
      const sy::ModuleTree tree = sy::describe_model(spec, diagnostics);
      for (const sy::Diagnostic& d : diagnostics.items()) INFO(sy::format_diagnostic(d));
      CHECK(diagnostics.items().empty());
      CHECK(tree.total_parameter_count() == summary.parameters);

      const sy::CheckpointIndex index = sy::read_checkpoint_index(dir.path());
      CHECK(index.tensors.size() == summary.tensors);
      for (const sy::CheckpointTensor& t : index.tensors) {
        INFO(t.tensor.name);
        // The bf16 scheme keeps DeepSeek-V3's e_score_correction_bias in f32, as the release does.
        const bool f32_in_bf16 = t.tensor.name.ends_with("e_score_correction_bias");
        CHECK(t.tensor.dtype == (dtype == "f32" || f32_in_bf16 ? sy::DType::f32 : sy::DType::bf16));
      }
    }
}

TEST_CASE("make-model: config.json names the transformers class and keeps the preset") {
  const TempDir dir;
  make("tiny-deepseek-v3", dir.path());
  const json config = json::parse(read_file(dir / "config.json"));
  CHECK(config["architectures"] == json::array({"DeepseekV3ForCausalLM"}));
  CHECK(config["initializer_range"] == 0.02);
  CHECK(config["hidden_act"] == "silu");
  CHECK(config["use_cache"] == true);
  CHECK(config["bos_token_id"] == 0);
  CHECK(config["eos_token_id"] == 1);
  CHECK(config["torch_dtype"] == "bfloat16");
  CHECK(sy::model_config_to_json(sy::parse_model_config(config, "config.json")) == config);

  const TempDir v2;
  make("tiny-deepseek-v2", v2.path(), 1, "f32");
  const json v2_config = json::parse(read_file(v2 / "config.json"));
  CHECK(v2_config["architectures"] == json::array({"DeepseekV2ForCausalLM"}));
  CHECK(v2_config["torch_dtype"] == "float32");
  CHECK_FALSE(v2_config.contains("bos_token_id"));  // DeepSeek-V2's id 100000 is past the tiny vocabulary
}

TEST_CASE("make-model: the same seed writes the same bytes, another seed other bytes") {
  const TempDir a, b, c;
  make("tiny-deepseek-v3", a.path(), 42);
  make("tiny-deepseek-v3", b.path(), 42);
  make("tiny-deepseek-v3", c.path(), 43);
  CHECK(read_file(a / "model.safetensors") == read_file(b / "model.safetensors"));
  CHECK(read_file(a / "config.json") == read_file(b / "config.json"));
  CHECK(read_file(a / "model.safetensors") != read_file(c / "model.safetensors"));
  const auto tensors_a = read_tensor_bytes(a.path());
  const auto tensors_c = read_tensor_bytes(c.path());
  for (const auto& tensor : tensors_a) {
    const auto& name = tensor.first;
    const auto& bytes = tensor.second;
    INFO(name);
    const bool constant = contains(name, "norm.weight");
    CHECK((bytes == tensors_c.at(name)) == constant);  // every random tensor changes with the seed
  }
}

TEST_CASE("make-model: weights are normal(0, 0.02), norms exactly 1, the router bias random") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  for (const std::string& dtype : std::vector<std::string>{"bf16", "f32"}) {
    INFO(dtype);
    const TempDir dir;
    make("tiny-deepseek-v3", dir.path(), rng.engine(), dtype);
    const auto values = read_tensor_values(dir.path());
    check_normal(values.at("model.embed_tokens.weight"), 0.02);               // [512, 64]
    check_normal(values.at("lm_head.weight"), 0.02);                          // [512, 64]
    check_normal(values.at("model.layers.1.self_attn.q_b_proj.weight"), 0.02);  // [96, 48]
    std::vector<float> experts;  // routed experts of layer 1 together: 16 x 3 x [32, 64]
    for (const auto& [name, v] : values)
      if (sy::starts_with(name, "model.layers.1.mlp.experts.")) experts.insert(experts.end(), v.begin(), v.end());
    check_normal(experts, 0.02);

    std::size_t norms = 0;
    for (const auto& value : values)
      if (const std::string& name = value.first; contains(name, "norm.weight")) {
        const auto& v = value.second;
        INFO(name);
        ++norms;
        for (float x : v) REQUIRE(x == 1.0f);
      }
    CHECK(norms == 4 * 4 + 1);  // per layer: q_a, kv_a, input, post_attention; then model.norm

    const std::vector<float>& bias = values.at("model.layers.1.mlp.gate.e_score_correction_bias");
    CHECK(std::set<float>(bias.begin(), bias.end()).size() == bias.size());  // random, not zeros
    for (float x : bias) CHECK(std::fabs(x) < 6 * 0.02);
  }
}

TEST_CASE("make-model: --head_tokens keeps N evenly spaced head rows, the rest exactly 64x smaller; greedy picks those") {
  const TempDir plain_dir, peaked_dir;
  make("tiny-deepseek-v3", plain_dir.path(), 5, "f32");
  sy::MakeModelOptions options;
  options.preset = "tiny-deepseek-v3";
  options.out_dir = peaked_dir.path();
  options.seed = 5;
  options.dtype = "f32";
  options.head_tokens = 8;
  sy::make_model(options);
  const auto plain = read_tensor_values(plain_dir.path());
  const auto peaked = read_tensor_values(peaked_dir.path());
  for (const auto& tensor : plain) {
    // Named copies, not structured bindings: clang 14 cannot capture those in INFO's lambda.
    const std::string& name = tensor.first;
    const std::vector<float>& values = tensor.second;
    INFO(name);
    if (name != "lm_head.weight") {
      CHECK(peaked.at(name) == values);  // only the head differs
      continue;
    }
    const std::vector<float>& head = peaked.at(name);  // [512, 64]: every 64th row keeps its scale
    REQUIRE(head.size() == values.size());
    int kept = 0;
    for (std::size_t i = 0; i < head.size(); ++i) {
      const bool peak = i / 64 % 64 == 0;
      kept += peak && i % 64 == 0;
      REQUIRE(head[i] == (peak ? values[i] : values[i] * sy::kOffPeakScale));
    }
    CHECK(kept == 8);
  }
  // Greedy decoding picks among the 8 full-scale rows, not always the same one.
  const auto r = sy::testing::run_switchyard("run --model_path " + peaked_dir.path().string() +
                                             " --prompt_ids 3,141,59,26,5 --max_new_tokens 16 --format json");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::set<int> chosen;
  int count = 0;
  const nlohmann::json doc = sy::testing::run_json(r.output);
  for (const auto& generated : doc["generated_ids"]) {
    const int id = generated.get<int>();
    CHECK(id % 64 == 0);
    chosen.insert(id);
    ++count;
  }
  CHECK(count == 16);
  CHECK(chosen.size() >= 2);
  // Bad values are refused.
  options.out_dir = (peaked_dir / "again").string();
  options.head_tokens = 513;
  CHECK_THROWS_WITH_AS(sy::make_model(options), doctest::Contains("--head_tokens 513 is outside [0, the vocabulary's 512]"),
                       sy::InputError);
}

TEST_CASE("make-model: the generator follows the standard normal CDF, tails included") {
  constexpr std::size_t kSamples = 1 << 20;
  std::vector<float> z(kSamples);
  sy::generate_weight_bytes(sy::WeightInit{sy::WeightInit::Kind::normal, 1.0f}, sy::tensor_stream_key(3, "cdf"),
                            sy::DType::f32, 0, std::as_writable_bytes(std::span(z)));
  float largest = 0;
  for (float v : z) largest = std::max(largest, std::fabs(v));
  CHECK(largest < 8.6f);  // u1 >= 2^-53 bounds the radius at sqrt(2 * 53 * ln 2)
  CHECK(largest > 4.0f);  // P(|z| > 4) = 6.3e-5: about 66 of 2^20 samples pass it
  for (double x : {-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0}) {
    const double expected = 0.5 * std::erfc(-x / std::sqrt(2.0));
    double below = 0;
    for (float v : z) below += v <= x ? 1 : 0;
    INFO("P(z <= " << x << ") = " << below / kSamples << ", expected " << expected);
    CHECK(std::fabs(below / kSamples - expected) < 5 * std::sqrt(expected * (1 - expected) / kSamples));
  }
}

TEST_CASE("make-model: generation does not depend on thread count or chunking") {
  const int threads_before = omp_get_max_threads();
  const std::uint64_t key = sy::tensor_stream_key(9, "model.layers.0.mlp.experts.0.down_proj.weight");
  constexpr std::size_t kElements = 300'001;  // several OpenMP blocks, and odd
  const sy::WeightInit init;
  for (sy::DType dtype : {sy::DType::bf16, sy::DType::f32}) {
    const std::size_t element_bytes = dtype == sy::DType::f32 ? 4 : 2;
    std::vector<std::byte> one_thread(kElements * element_bytes), two_threads(one_thread.size()),
        chunked(one_thread.size());
    omp_set_num_threads(1);
    sy::generate_weight_bytes(init, key, dtype, 0, one_thread);
    omp_set_num_threads(2);
    sy::generate_weight_bytes(init, key, dtype, 0, two_threads);
    CHECK(one_thread == two_threads);
    // Chunks that start on odd elements split Box-Muller pairs.
    const std::size_t cuts[] = {0, 1, 12'346, 12'347, 200'000, kElements};
    for (std::size_t i = 0; i + 1 < std::size(cuts); ++i)
      sy::generate_weight_bytes(init, key, dtype, cuts[i],
                                std::span(chunked).subspan(cuts[i] * element_bytes, (cuts[i + 1] - cuts[i]) * element_bytes));
    CHECK(chunked == one_thread);
  }
  CHECK(sy::standard_normal_at(key, 7) == sy::standard_normal_at(key, 7));
  CHECK(sy::standard_normal_at(key, 7) != sy::standard_normal_at(sy::tensor_stream_key(10, "x"), 7));

  const TempDir a, b;
  omp_set_num_threads(1);
  make("tiny-qwen3-moe", a.path(), 5);
  omp_set_num_threads(2);
  make("tiny-qwen3-moe", b.path(), 5);
  omp_set_num_threads(threads_before);
  CHECK(read_file(a / "model.safetensors") == read_file(b / "model.safetensors"));
}

TEST_CASE("make-model: shards past max_shard_bytes with an index, same tensors as one file") {
  const TempDir single, sharded;
  const sy::MakeModelSummary whole = make("tiny-deepseek-v3", single.path(), 11);
  sy::MakeModelOptions options;
  options.preset = "tiny-deepseek-v3";
  options.out_dir = sharded.path();
  options.seed = 11;
  options.max_shard_bytes = 200'000;  // the tiny model holds a few MB of bf16
  const sy::MakeModelSummary summary = sy::make_model(options);
  REQUIRE(summary.files.size() > 2);
  const std::size_t n = summary.files.size();
  for (std::size_t i = 0; i < n; ++i) {
    char expected[64];
    std::snprintf(expected, sizeof expected, "model-%05zu-of-%05zu.safetensors", i + 1, n);
    CHECK(summary.files[i].filename() == expected);
  }
  CHECK_FALSE(std::filesystem::exists(sharded / "model.safetensors"));
  CHECK(summary.tensor_bytes == whole.tensor_bytes);

  const json index = json::parse(read_file(sharded / "model.safetensors.index.json"));
  CHECK(index["metadata"]["total_size"] == whole.tensor_bytes);
  const sy::CheckpointIndex checkpoint = sy::read_checkpoint_index(sharded.path());
  CHECK(index["weight_map"].size() == checkpoint.tensors.size());
  std::map<std::string, std::uint64_t> shard_bytes;
  for (const sy::CheckpointTensor& t : checkpoint.tensors) {
    const std::string file = checkpoint.shards[t.shard].file.filename().string();
    CHECK(index["weight_map"][t.tensor.name] == file);
    shard_bytes[file] += t.tensor.end - t.tensor.begin;
  }
  for (const auto& shard : shard_bytes) {
    const auto& file = shard.first;
    const auto& bytes = shard.second;
    INFO(file);
    // Only a tensor larger than the limit (the 64 KiB embedding is not) may overflow a shard.
    CHECK(bytes <= options.max_shard_bytes);
  }
  CHECK(read_tensor_bytes(sharded.path()) == read_tensor_bytes(single.path()));

  sy::Diagnostics diagnostics;
  sy::ModelSpec spec;
  spec.model_path = sharded.path();
  sy::describe_model(spec, diagnostics);
  CHECK(diagnostics.items().empty());
}

TEST_CASE("make-model: --layers overrides the depth; all-dense is noted") {
  const TempDir dir;
  sy::MakeModelOptions options;
  options.preset = "tiny-deepseek-v3";  // first_k_dense_replace = 1
  options.out_dir = dir.path();
  options.layers = 1;
  const sy::MakeModelSummary summary = sy::make_model(options);
  CHECK_FALSE(summary.has_moe_layer);
  CHECK(json::parse(read_file(dir / "config.json"))["num_hidden_layers"] == 1);
  sy::Diagnostics diagnostics;
  sy::ModelSpec spec;
  spec.model_path = dir.path();
  CHECK(sy::describe_model(spec, diagnostics).num_layers() == 1);
  CHECK(diagnostics.items().empty());

  const TempDir cli;
  const auto result = sy::testing::run_switchyard("make-model --preset tiny-deepseek-v3 --layers 1 --out " +
                                                  (cli / "m").string());
  CHECK(result.exit_code == 0);
  CHECK(contains(result.output, "note: "));
  CHECK(contains(result.output, "no MoE layer"));
}

TEST_CASE("make-model: refuses a non-empty directory unless forced; bad usage exits 2") {
  const TempDir dir;
  write_file(dir / "notes.txt", "keep me");
  sy::MakeModelOptions options;
  options.preset = "tiny-mixtral";
  options.out_dir = dir.path();
  const std::string message = input_error_message([&] { sy::make_model(options); });
  CHECK(contains(message, dir.path().string()));
  CHECK(contains(message, "not empty"));
  CHECK(contains(message, "--force"));
  CHECK_FALSE(std::filesystem::exists(dir / "config.json"));

  // A sharded checkpoint, then a forced single-file one: the old shards and index must go.
  options.force = true;
  options.max_shard_bytes = 100'000;
  REQUIRE(sy::make_model(options).files.size() > 1);
  options.max_shard_bytes = 5'000'000'000;
  REQUIRE(sy::make_model(options).files.size() == 1);
  std::set<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left.insert(entry.path().filename().string());
  CHECK(left == std::set<std::string>{"config.json", "model.safetensors", "notes.txt"});

  const std::string out = (dir / "cli").string();
  CHECK(sy::testing::run_switchyard("make-model --preset tiny-mixtral --out " + dir.path().string()).exit_code == 2);
  CHECK(sy::testing::run_switchyard("make-model --preset tiny-mixtral --force --out " + dir.path().string()).exit_code == 0);
  CHECK(sy::testing::run_switchyard("make-model --preset no-such-model --out " + out).exit_code == 2);
  CHECK(sy::testing::run_switchyard("make-model --preset tiny-mixtral --dtype f16 --out " + out).exit_code == 2);
  CHECK_FALSE(std::filesystem::exists(out));  // nothing is created for bad usage
  CHECK(contains(input_error_message([&] {
                   options.preset = "tiny-mixtrl";
                   sy::make_model(options);
                 }),
                 "tiny-mixtral"));  // did-you-mean and the list of presets

  const auto ok = sy::testing::run_switchyard("make-model --preset tiny-mixtral --seed 3 --dtype f32 --out " + out);
  CHECK(ok.exit_code == 0);
  CHECK(contains(ok.output, "parameters"));
  CHECK(contains(ok.output, "MB/s"));
}

TEST_CASE("make-model: the safetensors writer checks every tensor's byte count") {
  const TempDir dir;
  const auto file = dir / "w.safetensors";
  const std::vector<sy::SafetensorsEntry> entries = {{"b.weight", sy::DType::bf16, {3, 2}},  // 12 bytes
                                                     {"a.bias", sy::DType::f32, {5}}};       // 20 bytes
  const std::vector<std::byte> bytes(64, std::byte{0x11});
  const auto some = [&](std::size_t n) { return std::span<const std::byte>(bytes.data(), n); };

  SUBCASE("too many bytes") {
    sy::SafetensorsWriter writer(file, entries);
    writer.begin_tensor("b.weight");
    writer.write(some(8));
    const std::string message = input_error_message([&] { writer.write(some(8)); });
    CHECK(contains(message, file.string()));
    CHECK(contains(message, "'b.weight'"));
    CHECK(contains(message, "12"));
  }
  SUBCASE("too few bytes, then the next tensor") {
    sy::SafetensorsWriter writer(file, entries);
    writer.begin_tensor("b.weight");
    writer.write(some(10));
    const std::string message = input_error_message([&] { writer.begin_tensor("a.bias"); });
    CHECK(contains(message, "'b.weight' got 10 bytes"));
  }
  SUBCASE("a missing tensor at finish") {
    sy::SafetensorsWriter writer(file, entries);
    writer.begin_tensor("b.weight");
    writer.write(some(12));
    CHECK(contains(input_error_message([&] { writer.finish(); }), "'a.bias'"));
  }
  SUBCASE("out of order") {
    sy::SafetensorsWriter writer(file, entries);
    CHECK(contains(input_error_message([&] { writer.begin_tensor("a.bias"); }), "'b.weight' comes next"));
  }
  SUBCASE("cannot create the file") {
    const auto nowhere = dir / "no-such-dir" / "x.safetensors";
    CHECK(contains(input_error_message([&] { sy::SafetensorsWriter(nowhere, entries); }), nowhere.string()));
  }
  SUBCASE("a complete file reads back: padded, sorted header with format pt") {
    {
      sy::SafetensorsWriter writer(file, entries);
      writer.begin_tensor("b.weight");
      writer.write(some(5));  // chunks of any size
      writer.write(some(7));
      writer.begin_tensor("a.bias");
      writer.write(some(20));
      writer.finish();
      CHECK(writer.data_bytes() == 32);
    }
    const sy::SafetensorsHeader header = sy::read_safetensors_header(file);
    CHECK(header.header_bytes % 8 == 0);
    CHECK(header.file_bytes == header.data_offset + 32);
    REQUIRE(header.tensors.size() == 2);
    CHECK(header.tensors[0].name == "b.weight");  // data order is the order given
    CHECK(header.tensors[0].begin == 0);
    CHECK(header.tensors[1].begin == 12);
    const std::string text = read_file(file).substr(8, header.header_bytes);
    CHECK(text.find("\"a.bias\"") < text.find("\"b.weight\""));  // keys sorted
    CHECK(json::parse(text)["__metadata__"] == json{{"format", "pt"}});
  }
}

TEST_CASE("make-model: bf16 rounds to nearest, ties to even") {
  const auto bits = [](std::uint32_t f32_bits) { return sy::bf16_bits_from_f32(std::bit_cast<float>(f32_bits)); };
  CHECK(bits(0x3f800000u) == 0x3f80);  // 1.0
  CHECK(bits(0x3f808000u) == 0x3f80);  // halfway, even below: down
  CHECK(bits(0x3f818000u) == 0x3f82);  // halfway, odd below: up
  CHECK(bits(0x3f808001u) == 0x3f81);  // past halfway: up
  CHECK(bits(0x3f807fffu) == 0x3f80);  // short of halfway: down
  CHECK(bits(0xbf818000u) == 0xbf82);  // the sign does not change the rule
  CHECK(bits(0x7f800000u) == 0x7f80);  // +inf
  CHECK(bits(0x7f7fffffu) == 0x7f80);  // FLT_MAX rounds to inf
  const std::uint16_t nan = bits(0x7f800001u);  // a NaN whose payload is all in the dropped half
  CHECK((nan & 0x7f80) == 0x7f80);
  CHECK((nan & 0x007f) != 0);  // still a NaN, not inf
  CHECK(sy::f32_from_bf16_bits(0x3f80) == 1.0f);
}

TEST_CASE("make-model: the safetensors writer writes beside its file and renames it in finish()") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  const auto file = dir / "w.safetensors";
  const std::string old_bytes = rng.bytes(1 + rng.below(4096));
  write_file(file, old_bytes);
  const std::vector<sy::SafetensorsEntry> entries = {{"a.weight", sy::DType::bf16, {4, 8}}, {"b.bias", sy::DType::f32, {3}}};
  const std::string data = rng.bytes(64 + 12);
  const auto bytes = [&](std::size_t offset, std::size_t n) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()) + offset, n);
  };
  const auto hidden = [&] {
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) n += entry.path().filename().string()[0] == '.';
    return n;
  };
  {
    sy::SafetensorsWriter writer(file, entries);
    writer.begin_tensor("a.weight");
    writer.write(bytes(0, 64));
    CHECK(read_file(file) == old_bytes);  // nothing visible before finish
    CHECK(hidden() == 1);
  }  // destroyed unfinished: an error path
  CHECK(read_file(file) == old_bytes);
  CHECK(hidden() == 0);
  {
    sy::SafetensorsWriter writer(file, entries);
    writer.begin_tensor("a.weight");
    writer.write(bytes(0, 64));
    CHECK_FALSE(contains(input_error_message([&] { writer.finish(); }), "<no exception>"));  // b.bias missing
  }
  CHECK(read_file(file) == old_bytes);
  CHECK(hidden() == 0);
  {
    sy::SafetensorsWriter writer(file, entries);
    writer.begin_tensor("a.weight");
    writer.write(bytes(0, 64));
    writer.begin_tensor("b.bias");
    writer.write(bytes(64, 12));
    writer.finish();
  }
  const std::string written = read_file(file);
  CHECK(written.size() == sy::read_safetensors_header(file).data_offset + 76);
  CHECK(written.substr(written.size() - 76) == data);
  CHECK(hidden() == 0);
}

TEST_CASE("make-model: a failed run takes back the files it placed; config.json comes last") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  // A sharded tiny-mixtral, to learn its shards' names.
  const TempDir reference;
  sy::MakeModelOptions options;
  options.preset = "tiny-mixtral";
  options.out_dir = reference.path();
  options.max_shard_bytes = 100'000;
  options.seed = rng.engine();
  const sy::MakeModelSummary summary = sy::make_model(options);
  REQUIRE(summary.files.size() >= 3);
  // A directory where one of its files goes (a later shard, the index, or config.json) fails the
  // run there, after the files before it were renamed into place.
  std::vector<std::string> names;
  for (std::size_t s = 1; s < summary.files.size(); ++s) names.push_back(summary.files[s].filename().string());
  names.push_back("model.safetensors.index.json");
  names.push_back("config.json");
  const std::string blocked = names[rng.below(names.size())];
  INFO("blocked: " << blocked);
  const TempDir dir;
  std::filesystem::create_directory(dir / blocked);
  write_file(dir / "notes.txt", "keep");
  options.out_dir = dir.path();
  options.force = true;
  const std::string message = input_error_message([&] { sy::make_model(options); });
  CHECK(contains(message, blocked));
  CHECK(contains(message, "is a directory"));
  std::set<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left.insert(entry.path().filename().string());
  CHECK(left == std::set<std::string>{blocked, "notes.txt"});
  // (Into a folder the run creates, the folder goes too: test_hostile_command_line.cpp.)
}

TEST_CASE("make-model: temporaries a killed run left make the folder non-empty; --force clears them") {
  const TempDir dir;
  write_file(dir / ".model.safetensors.tmp-4242-0", "half a shard");
  write_file(dir / ".config.json.tmp-4242-1", "{");
  write_file(dir / ".notes.txt.tmp-1-1", "not a checkpoint's");
  sy::MakeModelOptions options;
  options.preset = "tiny-qwen3-moe";
  options.out_dir = dir.path();
  CHECK(contains(input_error_message([&] { sy::make_model(options); }), "not empty"));
  options.force = true;
  sy::make_model(options);
  std::set<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left.insert(entry.path().filename().string());
  CHECK(left == std::set<std::string>{".notes.txt.tmp-1-1", "config.json", "model.safetensors"});
}
