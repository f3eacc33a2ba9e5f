// safetensors headers from real files written here (valid, sharded, hostile, randomly mutated),
// and describe_model reading a checkpoint directory against its config.json.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/checkpoint.h"
#include "core/diagnostics.h"
#include "core/input_file.h"
#include "core/mapped_file.h"
#include "core/model_description.h"
#include "core/safetensors.h"
#include "tests/core_test_support.h"

namespace sy = switchyard;
using nlohmann::json;
using sy::core_testing::contains;
using sy::core_testing::input_error_exit_code;
using sy::core_testing::input_error_message;
using sy::core_testing::SeededRng;
using sy::core_testing::TempDir;
using sy::core_testing::write_file;
using Dims = std::vector<std::int64_t>;

namespace {

// Element sizes from the safetensors format description, independent of core/dtype.cpp.
std::uint64_t element_bytes(const std::string& dtype) {
  static const std::map<std::string, std::uint64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},      {"BOOL", 1}};
  const auto it = sizes.find(dtype);
  REQUIRE_MESSAGE(it != sizes.end(), "test uses unknown dtype " << dtype);
  return it->second;
}

struct TensorSpec {
  std::string name;
  std::string dtype;
  Dims shape;
  std::uint64_t bytes() const {
    std::uint64_t n = element_bytes(dtype);
    for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
    return n;
  }
};

// 8-byte little-endian header length, the header, the data.
std::string frame(std::string_view header, std::string_view data, std::uint64_t header_length) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((header_length >> (8 * i)) & 0xff);
  out.append(header);
  out.append(data);
  return out;
}
std::string frame(std::string_view header, std::string_view data) { return frame(header, data, header.size()); }

// Header for `tensors` stored back to back in the given order, padded with spaces to 8 bytes as
// the reference writer does.
std::string header_for(const std::vector<TensorSpec>& tensors, const json& metadata = nullptr) {
  json header = json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::uint64_t data_bytes(const std::vector<TensorSpec>& tensors) {
  std::uint64_t total = 0;
  for (const TensorSpec& t : tensors) total += t.bytes();
  return total;
}

std::string safetensors_file(const std::vector<TensorSpec>& tensors, SeededRng& rng, const json& metadata = nullptr) {
  return frame(header_for(tensors, metadata), rng.bytes(data_bytes(tensors)));
}

// A few tensors of random shapes and assorted dtypes, a scalar among them.
std::vector<TensorSpec> random_tensors(SeededRng& rng) {
  const char* dtypes[] = {"F32", "BF16", "F16", "F8_E4M3", "I64", "U8", "BOOL", "F64"};
  std::vector<TensorSpec> tensors;
  const int count = static_cast<int>(rng.between(3, 8));
  for (int i = 0; i < count; ++i) {
    TensorSpec t{"model.layers." + std::to_string(i) + ".w", dtypes[rng.below(std::size(dtypes))], {}};
    const int rank = static_cast<int>(rng.between(i == 0 ? 0 : 1, 3));
    for (int d = 0; d < rank; ++d) t.shape.push_back(rng.between(1, 17));
    tensors.push_back(t);
  }
  return tensors;
}

std::string diagnostics_text(const sy::Diagnostics& diagnostics) {
  std::string out;
  for (const sy::Diagnostic& d : diagnostics.items()) out += sy::format_diagnostic(d) + "\n";
  return out;
}

// Whether `h`'s tensors tile its data section: in order, each beginning where the one before it
// ends, from byte 0 to the last byte (the reference reader's rule).
bool tiles_data_section(const sy::SafetensorsHeader& h) {
  std::uint64_t end = 0;
  for (const sy::SafetensorsTensor& t : h.tensors) {
    if (t.begin != end || t.end < t.begin) return false;
    end = t.end;
  }
  return h.data_offset <= h.file_bytes && end == h.file_bytes - h.data_offset;
}

std::vector<sy::Diagnostic> with_code(const sy::Diagnostics& diagnostics, const std::string& code) {
  std::vector<sy::Diagnostic> out;
  for (const sy::Diagnostic& d : diagnostics.items())
    if (d.code == code) out.push_back(d);
  return out;
}

}  // namespace

TEST_CASE("core: a valid safetensors file parses with dtype, shape and offsets") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  const std::vector<TensorSpec> tensors = random_tensors(rng);
  const std::string header = header_for(tensors, json{{"format", "pt"}});
  const std::string bytes = frame(header, rng.bytes(data_bytes(tensors)));
  write_file(dir / "model.safetensors", bytes);

  const sy::SafetensorsHeader h = sy::read_safetensors_header(dir / "model.safetensors");
  CHECK(h.file == dir / "model.safetensors");
  CHECK(h.header_bytes == header.size());
  CHECK(h.data_offset == 8 + header.size());
  CHECK(h.file_bytes == bytes.size());
  REQUIRE(h.tensors.size() == tensors.size());  // __metadata__ is no tensor
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {  // written in data order, read back in data order
    INFO("tensor " << tensors[i].name);
    const sy::SafetensorsTensor& t = h.tensors[i];
    CHECK(t.name == tensors[i].name);
    CHECK(t.dtype == sy::dtype_from_safetensors(tensors[i].dtype));
    CHECK(t.shape == tensors[i].shape);
    CHECK(t.begin == offset);
    CHECK(t.end == offset + tensors[i].bytes());
    offset = t.end;
  }
  // The in-memory parser agrees with the file reader.
  const sy::SafetensorsHeader m = sy::parse_safetensors_bytes(bytes, dir / "model.safetensors");
  REQUIRE(m.tensors.size() == h.tensors.size());
  for (std::size_t i = 0; i < m.tensors.size(); ++i) {
    CHECK(m.tensors[i].name == h.tensors[i].name);
    CHECK(m.tensors[i].end == h.tensors[i].end);
  }
}

TEST_CASE("core: empty tensors at a shared offset are accepted whatever their names") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  // The header's keys come back sorted by name, so each order of names below is a different
  // order of equal begin offsets.
  for (const auto& names : {std::pair{"a.weight", "b.empty"}, std::pair{"b.weight", "a.empty"}}) {
    const char* const full = names.first;
    const char* const empty = names.second;
    INFO(full << " with " << empty);
    const json header = {{full, {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                         {empty, {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {0, 0}}}}};
    write_file(dir / "model.safetensors", frame(header.dump(), rng.bytes(16)));
    sy::SafetensorsHeader h;
    REQUIRE_NOTHROW(h = sy::read_safetensors_header(dir / "model.safetensors"));
    REQUIRE(h.tensors.size() == 2);
    CHECK(h.tensors[0].name == empty);
  }
}

TEST_CASE("core: hostile safetensors files throw InputError naming the problem") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  const auto one_tensor = [&](const json& entry, std::size_t data = 64) {
    return frame(json{{"bad.weight", entry}}.dump(), rng.bytes(data));
  };
  const auto f32 = [](json shape, json offsets) {
    return json{{"dtype", "F32"}, {"shape", std::move(shape)}, {"data_offsets", std::move(offsets)}};
  };
  const std::vector<TensorSpec> valid = {{"a.weight", "F32", {3, 5}}, {"b.weight", "BF16", {7, 2}}};
  const std::string valid_header = header_for(valid);
  const std::string valid_data = rng.bytes(data_bytes(valid));
  const std::string valid_file = frame(valid_header, valid_data);
  const std::uint64_t cut = static_cast<std::uint64_t>(rng.between(1, static_cast<std::int64_t>(valid[1].bytes())));
  // A header that ends in spaces still parses when its stated length leaves some of them off: the
  // data section then starts that many bytes early.
  const std::string padded_header = valid_header + std::string(static_cast<std::size_t>(rng.between(1, 8)), ' ');
  const std::uint64_t short_by = static_cast<std::uint64_t>(rng.between(1, static_cast<std::int64_t>(padded_header.size() - valid_header.size())));
  const std::uint64_t trailing = static_cast<std::uint64_t>(rng.between(1, 64));
  const std::uint64_t gap = static_cast<std::uint64_t>(rng.between(1, 12));

  struct Case {
    std::string label;
    std::string bytes;
    std::vector<std::string> expected;  // parts of the message
  };
  const std::vector<Case> cases = {
      {"truncated data", valid_file.substr(0, valid_file.size() - cut), {"tensor 'b.weight'", "truncated file?"}},
      {"header length beyond the file",
       frame(valid_header, valid_data, valid_header.size() + valid_data.size() + 1),
       {"header length exceeds the file"}},
      {"implausible header length",
       frame(valid_header, valid_data,
             sy::kMaxSafetensorsHeaderBytes + 1 + static_cast<std::uint64_t>(rng.between(0, 1 << 20))),
       {"is not plausible"}},
      {"header length of all ones", frame(valid_header, valid_data, UINT64_MAX), {"is not plausible"}},
      {"file shorter than 8 bytes", rng.bytes(static_cast<std::size_t>(rng.between(0, 7))), {"too short"}},
      {"non-JSON header", frame("{\"a.weight\": {\"dtype\": ", rng.bytes(16)), {"not JSON"}},
      {"header not an object", frame("[1, 2, 3]", rng.bytes(16)), {"not a JSON object"}},
      {"entry not an object", one_tensor(5), {"tensor 'bad.weight'", "not an object"}},
      {"unknown dtype", one_tensor({{"dtype", "F128"}, {"shape", {2}}, {"data_offsets", {0, 32}}}),
       {"tensor 'bad.weight'", "unsupported dtype 'F128'"}},
      {"missing dtype", one_tensor({{"shape", {2}}, {"data_offsets", {0, 8}}}), {"has no dtype string"}},
      {"shape and span disagree", one_tensor(f32({3}, {0, 8})), {"tensor 'bad.weight'", "spans 8 bytes", "need 12"}},
      {"begin after end", one_tensor(f32({1}, {8, 4})), {"tensor 'bad.weight'", "end before they begin"}},
      {"offsets not integers", one_tensor(f32({1}, {0.5, 4})), {"needs data_offsets"}},
      {"negative offset", one_tensor(f32({1}, {-4, 0})), {"needs data_offsets"}},
      {"missing offsets", one_tensor({{"dtype", "F32"}, {"shape", {1}}}), {"needs data_offsets"}},
      {"negative dimension", one_tensor(f32({-1, 4}, {0, 16})), {"tensor 'bad.weight'", "not a non-negative integer"}},
      {"fractional dimension", one_tensor(f32({2.5}, {0, 10})), {"not a non-negative integer"}},
      {"string dimension", one_tensor(f32({"3"}, {0, 12})), {"not a non-negative integer"}},
      {"implausible dimension", one_tensor(f32({1ULL << 50}, {0, 4})), {"implausible dimension"}},
      {"shape overflows", one_tensor(f32({1ULL << 40, 1ULL << 40, 1ULL << 40}, {0, 4})), {"shape overflows"}},
      {"nine dimensions", one_tensor(f32({1, 1, 1, 1, 1, 1, 1, 1, 1}, {0, 4})), {"more than 8 dimensions"}},
      {"shape not a list", one_tensor(f32(4, {0, 16})), {"has no shape list"}},
      {"empty tensor name", frame(json{{"", f32({1}, {0, 4})}}.dump(), rng.bytes(4)), {"empty name"}},
      {"overlapping tensors",
       frame(json{{"a.weight", f32({4}, {0, 16})}, {"b.weight", f32({4}, {8, 24})}}.dump(), rng.bytes(24)),
       {"'a.weight' and 'b.weight' overlap"}},
      // The reference reader's tiling rule: the tensors cover the data section exactly.
      {"header length short by the padding it ends in",
       frame(padded_header, valid_data, padded_header.size() - short_by),
       {"holds " + std::to_string(valid_data.size() + short_by) + " bytes but its tensors cover " +
            std::to_string(valid_data.size()),
        "after the last tensor", "header length"}},
      {"bytes after the last tensor", frame(valid_header, valid_data + rng.bytes(trailing)),
       {std::to_string(trailing) + " bytes after the last tensor"}},
      {"data but no tensors", frame("{\"__metadata__\": {\"format\": \"pt\"}}", rng.bytes(trailing)),
       {"holds " + std::to_string(trailing) + " bytes but its tensors cover 0"}},
      {"a gap between tensors",
       frame(json{{"a.weight", f32({4}, {0, 16})}, {"b.weight", f32({4}, {16 + gap, 32 + gap})}}.dump(),
             rng.bytes(32 + gap)),
       {"tensor 'b.weight' begins at byte " + std::to_string(16 + gap), "('a.weight') ends at byte 16",
        "gap of " + std::to_string(gap) + " bytes"}},
      {"first tensor after byte 0", frame(json{{"a.weight", f32({4}, {gap, 16 + gap})}}.dump(), rng.bytes(16 + gap)),
       {"tensor 'a.weight' begins at byte " + std::to_string(gap), "the data section begins at byte 0"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::filesystem::path path = dir / ("case-" + std::to_string(i) + ".safetensors");
    write_file(path, c.bytes);
    const std::string from_file = input_error_message([&] { sy::read_safetensors_header(path); });
    const std::string from_memory = input_error_message([&] { sy::parse_safetensors_bytes(c.bytes, path); });
    INFO(c.label << ": " << from_file);
    CHECK(contains(from_file, path.string()));
    for (const std::string& part : c.expected) CHECK(contains(from_file, part));
    CHECK(from_memory == from_file);
    CHECK(input_error_exit_code([&] { sy::read_safetensors_header(path); }) == sy::kExitBadContent);
  }
  // Files that cannot be read as safetensors files are I/O errors (exit 2), named as such.
  const auto unreadable = [&](const std::filesystem::path& path, const std::string& expected) {
    INFO(path << ": " << input_error_message([&] { sy::read_safetensors_header(path); }));
    CHECK(contains(input_error_message([&] { sy::read_safetensors_header(path); }), expected));
    CHECK(input_error_exit_code([&] { sy::read_safetensors_header(path); }) == sy::kExitUsageOrIo);
  };
  unreadable(dir / "absent.safetensors", "no such file");
  std::filesystem::create_directory(dir / "folder.safetensors");
  unreadable(dir / "folder.safetensors", "is a directory");
  std::filesystem::create_symlink("/dev/zero", dir / "zero.safetensors");
  unreadable(dir / "zero.safetensors", "is a character device");
  std::filesystem::create_symlink(dir / "loop-b.safetensors", dir / "loop-a.safetensors");
  std::filesystem::create_symlink(dir / "loop-a.safetensors", dir / "loop-b.safetensors");
  unreadable(dir / "loop-a.safetensors", "loop-a.safetensors");
}

TEST_CASE("core: random mutations of a valid file never escape as anything but InputError") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  const std::vector<TensorSpec> tensors = random_tensors(rng);
  const std::string header = header_for(tensors, json{{"format", "pt"}});
  const std::string original = frame(header, rng.bytes(data_bytes(tensors)));
  const std::size_t header_end = 8 + header.size();
  const std::string_view json_bytes = "{}[]\":,.-+0123456789eE ";
  const std::filesystem::path path = dir / "mutant.safetensors";

  int rejected = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string mutant = original;
    const std::size_t kind = rng.below(4);
    if (kind != 2) {  // damage the length field or the header
      const std::size_t flips = 1 + rng.below(4);
      for (std::size_t f = 0; f < flips; ++f) {
        char& byte = mutant[rng.below(header_end)];
        if (rng.below(2)) byte = static_cast<char>(byte ^ static_cast<char>(rng.between(1, 255)));
        else byte = json_bytes[rng.below(json_bytes.size())];
      }
    }
    if (kind >= 2) mutant.resize(rng.below(mutant.size()));  // truncate
    write_file(path, mutant);
    const std::string from_file = input_error_message([&] { sy::read_safetensors_header(path); });
    const std::string from_memory = input_error_message([&] { sy::parse_safetensors_bytes(mutant, path); });
    INFO("round " << round << ", mutation kind " << kind << ": " << from_file);
    REQUIRE_FALSE(contains(from_file, "<not an InputError"));
    REQUIRE(from_memory == from_file);
    if (from_file != "<no exception>") {
      ++rejected;
    } else {  // what is accepted obeys the reference reader's tiling rule
      REQUIRE(tiles_data_section(sy::parse_safetensors_bytes(mutant, path)));
    }
  }
  CHECK(rejected > 0);
}

TEST_CASE("core: a sharded checkpoint is read through model.safetensors.index.json") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  const std::vector<TensorSpec> first = {{"model.embed_tokens.weight", "BF16", {32, 8}}, {"model.norm.weight", "F32", {8}}};
  const std::vector<TensorSpec> second = {{"lm_head.weight", "BF16", {32, 8}}};
  const std::string shard1 = "model-00001-of-00002.safetensors", shard2 = "model-00002-of-00002.safetensors";
  write_file(dir / shard1, safetensors_file(first, rng));
  write_file(dir / shard2, safetensors_file(second, rng));
  json weight_map = json::object();
  for (const TensorSpec& t : first) weight_map[t.name] = shard1;
  for (const TensorSpec& t : second) weight_map[t.name] = shard2;
  write_file(dir / "model.safetensors.index.json", json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
  write_file(dir / "config.json", "{}");  // not a shard

  const sy::CheckpointIndex index = sy::read_checkpoint_index(dir.path());
  REQUIRE(index.shards.size() == 2);
  REQUIRE(index.tensors.size() == first.size() + second.size());
  for (const sy::CheckpointTensor& t : index.tensors) {
    INFO(t.tensor.name);
    REQUIRE(t.shard < index.shards.size());
    CHECK(index.shards[t.shard].file.filename() == weight_map[t.tensor.name].get<std::string>());
  }

  SUBCASE("without an index, every *.safetensors file is a shard") {
    std::filesystem::remove(dir / "model.safetensors.index.json");
    const sy::CheckpointIndex listed = sy::read_checkpoint_index(dir.path());
    REQUIRE(listed.shards.size() == 2);
    CHECK(listed.shards[0].file.filename() == shard1);  // in name order
    CHECK(listed.tensors.size() == index.tensors.size());
  }
  SUBCASE("a tensor in two shards") {
    write_file(dir / shard2, safetensors_file({second[0], first[1]}, rng));
    const std::string message = input_error_message([&] { sy::read_checkpoint_index(dir.path()); });
    CHECK(contains(message, "tensor 'model.norm.weight' also appears in another shard"));
  }
  SUBCASE("a shard the index names is missing") {
    std::filesystem::remove(dir / shard2);
    CHECK(contains(input_error_message([&] { sy::read_checkpoint_index(dir.path()); }), shard2));
  }
}

TEST_CASE("core: a shard, an index or a model directory that cannot be read is an InputError naming it (exit 2)") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  const std::string shard1 = "model-00001-of-00002.safetensors", shard2 = "model-00002-of-00002.safetensors";
  write_file(dir / shard1, safetensors_file({{"a.weight", "F32", {2}}}, rng));
  write_file(dir / "model.safetensors.index.json",
             json{{"weight_map", {{"a.weight", shard1}, {"b.weight", shard2}}}}.dump());
  const auto expect = [&](const std::filesystem::path& model_dir, const std::vector<std::string>& parts) {
    const std::string message = input_error_message([&] { sy::read_checkpoint_index(model_dir); });
    INFO(message);
    for (const std::string& part : parts) CHECK(contains(message, part));
    CHECK(input_error_exit_code([&] { sy::read_checkpoint_index(model_dir); }) == sy::kExitUsageOrIo);
  };
  const std::string named = "the shard named in model.safetensors.index.json";
  SUBCASE("a shard the index names is missing") { expect(dir.path(), {shard2, "no such file", named}); }
  SUBCASE("a shard the index names is a directory") {
    std::filesystem::create_directory(dir / shard2);
    expect(dir.path(), {shard2, "is a directory", named});
  }
  SUBCASE("a shard the index names is a link loop") {
    std::filesystem::create_symlink(dir / shard2, dir / shard2);
    expect(dir.path(), {shard2});
  }
  SUBCASE("the index is a directory") {
    std::filesystem::remove(dir / "model.safetensors.index.json");
    std::filesystem::create_directory(dir / "model.safetensors.index.json");
    expect(dir.path(), {"model.safetensors.index.json", "is a directory"});
  }
  SUBCASE("the index is a link loop, or a dangling link, not skipped") {
    std::filesystem::remove(dir / "model.safetensors.index.json");
    std::filesystem::create_symlink(dir / "model.safetensors.index.json", dir / "model.safetensors.index.json");
    expect(dir.path(), {"model.safetensors.index.json"});
    std::filesystem::remove(dir / "model.safetensors.index.json");
    std::filesystem::create_symlink(dir / "gone.json", dir / "model.safetensors.index.json");
    expect(dir.path(), {"model.safetensors.index.json", "no such file"});
  }
  SUBCASE("the index is larger than its cap") {
    write_file(dir / "model.safetensors.index.json", "{");
    std::filesystem::resize_file(dir / "model.safetensors.index.json", sy::kMaxIndexJsonBytes + 1);
    expect(dir.path(), {"model.safetensors.index.json", "larger than 256.0 MiB"});
  }
  SUBCASE("model.safetensors is a link loop") {
    const TempDir single;
    std::filesystem::create_symlink(single / "model.safetensors", single / "model.safetensors");
    expect(single.path(), {"model.safetensors"});
  }
  SUBCASE("the model directory is a link loop: describe_model names it") {
    const TempDir parent;
    std::filesystem::create_symlink(parent / "b", parent / "a");
    std::filesystem::create_symlink(parent / "a", parent / "b");
    sy::ModelSpec spec;
    spec.model_path = parent / "a";
    sy::Diagnostics diagnostics;
    const std::string message = input_error_message([&] { sy::describe_model(spec, diagnostics); });
    CHECK(contains(message, (parent / "a").string()));
    CHECK(contains(message, "cannot read the model directory"));
    CHECK(input_error_exit_code([&] { sy::describe_model(spec, diagnostics); }) == sy::kExitUsageOrIo);
    spec.model_path = parent / "absent";
    CHECK(contains(input_error_message([&] { sy::describe_model(spec, diagnostics); }), "no such directory"));
  }
}

TEST_CASE("core: tensors the format leaves unaligned load with the same values, aligned") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  // Odd-sized U8 tensors between the others, and a header whose length is not a multiple of 8, put
  // elements at offsets the format allows but a typed load must not use as they are.
  std::vector<TensorSpec> tensors;
  const char* dtypes[] = {"F32", "BF16", "F16", "F64", "I64", "I32"};
  for (int i = 0; i < 8; ++i) {
    tensors.push_back({"t" + std::to_string(i) + ".weight", dtypes[rng.below(std::size(dtypes))],
                       {rng.between(1, 5), rng.between(1, 7)}});
    if (rng.below(2)) tensors.push_back({"t" + std::to_string(i) + ".odd", "U8", {2 * rng.between(0, 3) + 1}});
  }
  std::string header = header_for(tensors);
  while (header.back() == ' ') header.pop_back();
  header.append(static_cast<std::size_t>(rng.between(0, 6)), ' ');
  header.append(header.size() % 8 == 0 ? 1 : 0, ' ');  // 8 + header length: not a multiple of 8
  const std::string data = rng.bytes(data_bytes(tensors));
  write_file(dir / "model.safetensors", frame(header, data));
  INFO("header length " << header.size());

  const sy::Checkpoint checkpoint = sy::Checkpoint::open(dir.path());
  std::uint64_t offset = 0;
  int copied = 0;
  for (const TensorSpec& spec : tensors) {
    INFO(spec.name << " (" << spec.dtype << ") at data offset " << offset);
    const sy::DType dtype = *sy::dtype_from_safetensors(spec.dtype);
    const sy::Tensor t = checkpoint.get(spec.name, spec.shape, {dtype});
    REQUIRE(t.bytes() == spec.bytes());
    CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % element_bytes(spec.dtype) == 0);
    CHECK(std::memcmp(t.data(), data.data() + offset, spec.bytes()) == 0);
    // In place in the mapping where the file aligns the tensor; a copy only where it does not.
    const bool aligned_in_file = (8 + header.size() + offset) % element_bytes(spec.dtype) == 0;
    CHECK(t.in_read_only_pages() == aligned_in_file);
    copied += !aligned_in_file;
    offset += spec.bytes();
  }
  CHECK(copied > 0);
}

TEST_CASE("core: MappedFile refuses what is not a regular file without waiting on it") {
  const TempDir dir;
  const std::filesystem::path fifo = dir / "model.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto opening = std::async(std::launch::async, [&] { return input_error_message([&] { sy::MappedFile::open(fifo); }); });
  const bool answered = opening.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  CHECK_MESSAGE(answered, "MappedFile::open waited for a writer of the FIFO");
  if (!answered) ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // lets the blocked open return
  CHECK(contains(opening.get(), "not a regular file"));
  std::filesystem::create_directory(dir / "folder");
  CHECK(contains(input_error_message([&] { sy::MappedFile::open(dir / "folder"); }), "not a regular file"));
}

TEST_CASE("core: hostile or empty checkpoint directories throw InputError") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  CHECK(contains(input_error_message([&] { sy::read_checkpoint_index(dir.path()); }), "holds no .safetensors files"));

  write_file(dir / "model.safetensors", safetensors_file({{"a.weight", "F32", {2}}}, rng));
  for (const std::string shard : {"../elsewhere/model.safetensors", "sub/model.safetensors", "/etc/passwd", "..", ".", ""}) {
    INFO("shard " << shard);
    write_file(dir / "model.safetensors.index.json", json{{"weight_map", {{"a.weight", shard}}}}.dump());
    const std::string message = input_error_message([&] { sy::read_checkpoint_index(dir.path()); });
    CHECK(contains(message, "model.safetensors.index.json"));
    CHECK(contains(message, "shard '" + shard + "' must be a file in the model directory"));
  }
  for (const std::string index : {"not json", "[]", "{\"weight_map\": []}", "{\"weight_map\": {\"a.weight\": 3}}"}) {
    INFO("index " << index);
    write_file(dir / "model.safetensors.index.json", index);
    const std::string message = input_error_message([&] { sy::read_checkpoint_index(dir.path()); });
    CHECK(contains(message, "model.safetensors.index.json"));
    CHECK((contains(message, "needs a \"weight_map\"") || contains(message, "is not a file name") ||
           contains(message, "not JSON")));
    CHECK(input_error_exit_code([&] { sy::read_checkpoint_index(dir.path()); }) == sy::kExitBadContent);
  }
}

TEST_CASE("core: describe_model checks a checkpoint directory against its config.json") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  const sy::ModelConfig config = sy::preset_model_config("tiny-mixtral");
  write_file(dir / "config.json", sy::model_config_to_json(config).dump(2));
  const sy::ModuleTree expected_tree = sy::build_module_tree(config, *sy::find_weight_scheme("bf16"));
  std::vector<TensorSpec> tensors;
  for (const sy::Module& m : expected_tree.modules())
    for (const sy::Parameter& p : m.params)
      tensors.push_back({std::string(m.name) + "." + std::string(p.name), rng.below(2) ? "F32" : "BF16",
                         Dims(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank)});
  REQUIRE(tensors.size() > 4);
  tensors[0].dtype = "F32";  // at least one tensor differs from the bf16 default scheme
  const auto describe = [&](const std::vector<TensorSpec>& stored, sy::Diagnostics& diagnostics) {
    write_file(dir / "model.safetensors", safetensors_file(stored, rng));
    sy::ModelSpec spec;
    spec.model_path = dir.path();
    return sy::describe_model(spec, diagnostics);
  };
  const std::size_t chosen = rng.below(tensors.size());
  INFO("chosen tensor " << tensors[chosen].name);

  SUBCASE("every tensor present: no diagnostics, dtypes from the file") {
    sy::Diagnostics diagnostics;
    const sy::ModuleTree tree = describe(tensors, diagnostics);
    INFO(diagnostics_text(diagnostics));
    CHECK(diagnostics.items().empty());
    for (const TensorSpec& t : tensors) {
      const auto dot = t.name.rfind('.');
      const int module = tree.find(t.name.substr(0, dot));
      REQUIRE(module >= 0);
      const auto& params = tree.at(module).params;
      const auto p = std::find_if(params.begin(), params.end(),
                                  [&](const sy::Parameter& q) { return q.name == t.name.substr(dot + 1); });
      REQUIRE(p != params.end());
      CHECK(p->dtype == sy::dtype_from_safetensors(t.dtype));
    }
  }
  SUBCASE("a missing tensor is an error naming it") {
    std::vector<TensorSpec> stored = tensors;
    stored.erase(stored.begin() + static_cast<std::ptrdiff_t>(chosen));
    sy::Diagnostics diagnostics;
    describe(stored, diagnostics);
    INFO(diagnostics_text(diagnostics));
    REQUIRE(diagnostics.items().size() == 1);
    CHECK(diagnostics.items()[0].code == "missing-tensor");
    CHECK(diagnostics.items()[0].severity == sy::Severity::error);
    CHECK(contains(diagnostics.items()[0].message, "'" + tensors[chosen].name + "'"));
  }
  SUBCASE("a tensor of the wrong shape is an error naming it and its file") {
    std::vector<TensorSpec> stored = tensors;
    REQUIRE_FALSE(stored[chosen].shape.empty());
    stored[chosen].shape[0] += rng.between(1, 3);
    sy::Diagnostics diagnostics;
    describe(stored, diagnostics);
    INFO(diagnostics_text(diagnostics));
    REQUIRE(diagnostics.items().size() == 1);
    const sy::Diagnostic& d = diagnostics.items()[0];
    CHECK(d.code == "tensor-shape-mismatch");
    CHECK(d.severity == sy::Severity::error);
    CHECK(contains(d.message, "'" + tensors[chosen].name + "'"));
    CHECK(d.location.file == (dir / "model.safetensors").string());
  }
  SUBCASE("tensors of layers beyond the model (MTP) are ignored") {
    std::vector<TensorSpec> stored = tensors;
    stored.push_back({"model.layers.99.foo.weight", "BF16", {rng.between(1, 9), rng.between(1, 9)}});
    stored.push_back({"model.layers." + std::to_string(config.num_hidden_layers) + ".self_attn.q_proj.weight", "BF16",
                      {rng.between(1, 9)}});
    sy::Diagnostics diagnostics;
    describe(stored, diagnostics);
    INFO(diagnostics_text(diagnostics));
    CHECK(diagnostics.items().empty());
  }
  SUBCASE("a tensor of no module is a warning naming it") {
    std::vector<TensorSpec> stored = tensors;
    stored.push_back({"model.bogus.weight", "F32", {rng.between(1, 9)}});
    sy::Diagnostics diagnostics;
    describe(stored, diagnostics);
    INFO(diagnostics_text(diagnostics));
    REQUIRE(diagnostics.items().size() == 1);
    CHECK(diagnostics.items()[0].code == "unknown-tensor");
    CHECK(diagnostics.items()[0].severity == sy::Severity::warning);
    CHECK(contains(diagnostics.items()[0].message, "'model.bogus.weight'"));
  }
  SUBCASE("an FP8 block scale joins its module as a block_scale parameter") {
    std::vector<TensorSpec> stored = tensors;
    stored.push_back({"model.layers.0.self_attn.q_proj.weight_scale_inv", "F32", {1, 1}});
    sy::Diagnostics diagnostics;
    const sy::ModuleTree tree = describe(stored, diagnostics);
    INFO(diagnostics_text(diagnostics));
    CHECK(diagnostics.items().empty());
    const auto& params = tree.at(tree.find("model.layers.0.self_attn.q_proj")).params;
    REQUIRE(params.size() == 2);
    CHECK(params[1].name == "weight_scale_inv");
    CHECK(params[1].kind == sy::TensorKind::block_scale);
    CHECK(params[1].dtype == sy::DType::f32);
  }
  SUBCASE("many missing tensors are summarised, not listed one by one") {
    sy::Diagnostics diagnostics;
    describe({tensors[chosen]}, diagnostics);
    const auto missing = with_code(diagnostics, "missing-tensor");
    CHECK(missing.size() < tensors.size() - 1);
    REQUIRE_FALSE(missing.empty());
    CHECK(contains(missing.back().message, std::to_string(tensors.size() - 1 - (missing.size() - 1)) + " more"));
  }
}
