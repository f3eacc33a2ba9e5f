// GGUF files: the writer and the reader against each other and against an encoding written here
// from the format description (RawGguf), on random metadata and tensors; split sets; and hostile
// files made by changing one field of a good one, each refused with an error that names the file
// and the item.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "core/gguf.h"
#include "core/gguf_writer.h"
#include "text/byte_level.h"
#include "tests/core_test_support.h"

namespace sy = switchyard;
using sy::core_testing::contains;
using sy::core_testing::input_error_exit_code;
using sy::core_testing::input_error_message;
using sy::core_testing::read_file;
using sy::core_testing::SeededRng;
using sy::core_testing::TempDir;
using sy::core_testing::write_file;
using sy::GgufValueType;

namespace {

// ggml's block sizes (elements, bytes) by ggml_type number, from the format description,
// independent of core/dtype.cpp.
struct GgmlBlock {
  std::uint64_t elements;
  std::uint64_t bytes;
};
const std::map<std::uint32_t, GgmlBlock>& ggml_blocks() {
  static const std::map<std::uint32_t, GgmlBlock> blocks = {
      {0, {1, 4}},    {1, {1, 2}},    {30, {1, 2}},   {28, {1, 8}},   {24, {1, 1}},  {25, {1, 2}},
      {26, {1, 4}},   {27, {1, 8}},   {2, {32, 18}},  {3, {32, 20}},  {6, {32, 22}}, {7, {32, 24}},
      {8, {32, 34}},  {10, {256, 84}}, {11, {256, 110}}, {12, {256, 144}}, {13, {256, 176}}, {14, {256, 210}}};
  return blocks;
}
std::uint64_t ggml_bytes(std::uint32_t type, std::uint64_t elements) {
  const GgmlBlock b = ggml_blocks().at(type);
  return elements / b.elements * b.bytes;
}

// A GGUF file encoded byte by byte, with each field's start recorded and what an error about a
// file cut inside that field must name.
struct RawGguf {
  std::string bytes;
  std::vector<std::pair<std::size_t, std::string>> fields;  // (start, fragment the error names)

  void mark(std::string fragment) { fields.emplace_back(bytes.size(), std::move(fragment)); }
  template <typename T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes.append(b, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<std::uint64_t>(s.size());
    bytes.append(s);
  }
};

struct RawKv {
  std::string key;
  std::uint32_t type;
  std::string value;  // encoded value after the type
};
struct RawTensor {
  std::string name;
  std::vector<std::uint64_t> ne;  // innermost first
  std::uint32_t type;
  std::uint64_t offset;
};
struct RawSpec {
  std::string magic = "GGUF";
  std::uint32_t version = 3;
  std::optional<std::uint64_t> tensor_count;    // the true count when unset
  std::optional<std::uint64_t> metadata_count;
  std::vector<RawKv> kvs;
  std::vector<RawTensor> tensors;
  std::uint64_t alignment = 32;                 // for the padding; the key is one of `kvs`
  std::optional<std::uint64_t> data_bytes;      // the tensors' extent when unset
};

template <typename T>
std::string encoded(T v) {
  RawGguf r;
  r.put(v);
  return r.bytes;
}
std::string encoded_string(std::string_view s) {
  RawGguf r;
  r.put_string(s);
  return r.bytes;
}
std::string encoded_strings(const std::vector<std::string>& items) {
  RawGguf r;
  r.put<std::uint32_t>(8);
  r.put<std::uint64_t>(items.size());
  for (const std::string& s : items) r.put_string(s);
  return r.bytes;
}

RawGguf encode(const RawSpec& spec, SeededRng& rng) {
  RawGguf r;
  r.mark("not a GGUF file");
  r.bytes += spec.magic;
  r.mark("the header");
  r.put(spec.version);
  r.put<std::uint64_t>(spec.tensor_count.value_or(spec.tensors.size()));
  r.put<std::uint64_t>(spec.metadata_count.value_or(spec.kvs.size()));
  for (std::size_t i = 0; i < spec.kvs.size(); ++i) {
    r.mark("metadata entry " + std::to_string(i) + " of " + std::to_string(spec.kvs.size()));
    r.put_string(spec.kvs[i].key);
    r.mark("metadata key '" + spec.kvs[i].key + "'");
    r.put(spec.kvs[i].type);
    r.bytes += spec.kvs[i].value;
  }
  std::uint64_t extent = 0;
  for (std::size_t i = 0; i < spec.tensors.size(); ++i) {
    const RawTensor& t = spec.tensors[i];
    r.mark("tensor info " + std::to_string(i) + " of " + std::to_string(spec.tensors.size()));
    r.put_string(t.name);
    r.mark("tensor '" + t.name + "'");
    r.put<std::uint32_t>(static_cast<std::uint32_t>(t.ne.size()));
    std::uint64_t n = 1;
    for (std::uint64_t d : t.ne) {
      r.put(d);
      n *= d;
    }
    r.put(t.type);
    r.put(t.offset);
    if (ggml_blocks().count(t.type) && n < (1ULL << 40)) extent = std::max(extent, t.offset + ggml_bytes(t.type, n));
  }
  r.mark("tensor '");  // past the infos, a cut leaves some tensor's data (or the data section) short
  r.bytes.resize((r.bytes.size() + spec.alignment - 1) / spec.alignment * spec.alignment, '\0');
  r.bytes += rng.bytes(static_cast<std::size_t>(spec.data_bytes.value_or(extent)));
  return r;
}

// A small good file: three keys (a string, the alignment, a token list) and an f32 and a q8_0 tensor.
RawSpec good_spec() {
  RawSpec s;
  s.kvs = {{"general.architecture", 8, encoded_string("deepseek2")},
           {"general.alignment", 4, encoded<std::uint32_t>(32)},
           {"tokenizer.ggml.tokens", 9, encoded_strings({"<s>", "hello", ""})}};
  s.tensors = {{"token_embd.weight", {8, 2}, 0, 0}, {"blk.0.ffn_down.weight", {32, 3}, 8, 64}};
  return s;
}

std::string parse_error(const std::string& bytes) {
  return input_error_message([&] { sy::parse_gguf_bytes(bytes, "model.gguf"); });
}

// The error of `spec` encoded; checks that it is exit 1 and names the file.
std::string hostile(const RawSpec& spec) {
  SeededRng rng;
  const std::string bytes = encode(spec, rng).bytes;
  const std::string message = parse_error(bytes);
  CHECK_MESSAGE(message.rfind("model.gguf: ", 0) == 0, message);
  CHECK(input_error_exit_code([&] { sy::parse_gguf_bytes(bytes, "model.gguf"); }) == sy::kExitBadContent);
  return message;
}

std::vector<std::int64_t> random_shape(SeededRng& rng, std::int64_t block) {
  std::vector<std::int64_t> shape(rng.below(4) + 1);
  for (std::int64_t& d : shape) d = rng.between(1, 5);
  shape.back() = block * rng.between(1, 3) + (block == 1 ? rng.between(0, 6) : 0);
  return shape;
}

}  // namespace

TEST_CASE("gguf metadata of every type comes back as written, in order, a key set twice replaced in place") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const auto u64 = [&] { return std::uniform_int_distribution<std::uint64_t>()(rng.engine); };
  const auto real = [&] { return std::uniform_real_distribution<double>(-1e6, 1e6)(rng.engine); };
  const std::uint8_t u8 = static_cast<std::uint8_t>(u64());
  const std::int8_t i8 = static_cast<std::int8_t>(u64());
  const std::uint16_t u16 = static_cast<std::uint16_t>(u64());
  const std::int16_t i16 = static_cast<std::int16_t>(u64());
  const std::uint32_t u32 = static_cast<std::uint32_t>(u64());
  const std::int32_t i32 = static_cast<std::int32_t>(u64());
  const std::uint64_t u64v = u64() >> 1;  // fits int64
  const std::int64_t i64 = static_cast<std::int64_t>(u64());
  const float f32 = static_cast<float>(real());
  const double f64 = real();
  const bool flag = rng.below(2) == 1;
  std::vector<std::string> words(rng.below(50) + 1);
  for (std::string& w : words) {
    w = rng.bytes(rng.below(12));
  }
  std::vector<std::int32_t> i32s(rng.below(40));
  for (auto& v : i32s) v = static_cast<std::int32_t>(u64());
  std::vector<std::uint32_t> u32s(rng.below(40) + 1);
  for (auto& v : u32s) v = static_cast<std::uint32_t>(u64());
  std::vector<float> f32s(rng.below(40) + 1);
  for (auto& v : f32s) v = static_cast<float>(real());
  std::vector<double> f64s(rng.below(40) + 1);
  for (auto& v : f64s) v = real();
  std::vector<std::int8_t> i8s(rng.below(40) + 1);
  for (auto& v : i8s) v = static_cast<std::int8_t>(u64());
  std::vector<std::uint16_t> u16s(rng.below(40) + 1);
  for (auto& v : u16s) v = static_cast<std::uint16_t>(u64());
  std::vector<std::int64_t> i64s(rng.below(40) + 1);
  for (auto& v : i64s) v = static_cast<std::int64_t>(u64());
  std::vector<bool> bools(rng.below(40) + 1);
  for (std::size_t i = 0; i < bools.size(); ++i) bools[i] = rng.below(2) == 1;

  sy::GgufWriter w;
  w.set_string("general.name", "placeholder");
  w.set_u8("t.u8", u8);
  w.set_i8("t.i8", i8);
  w.set_u16("t.u16", u16);
  w.set_i16("t.i16", i16);
  w.set_u32("t.u32", u32);
  w.set_i32("t.i32", i32);
  w.set_u64("t.u64", u64v);
  w.set_i64("t.i64", i64);
  w.set_f32("t.f32", f32);
  w.set_f64("t.f64", f64);
  w.set_bool("t.bool", flag);
  w.set_strings("t.strings", words);
  w.set_i32s("t.i32s", i32s);
  w.set_u32s("t.u32s", u32s);
  w.set_f32s("t.f32s", f32s);
  w.set_f64s("t.f64s", f64s);
  w.set_i8s("t.i8s", i8s);
  w.set_u16s("t.u16s", u16s);
  w.set_i64s("t.i64s", i64s);
  w.set_bools("t.bools", bools);
  w.set_u64("t.big", std::numeric_limits<std::uint64_t>::max());
  w.set_string("general.name", "tiny");  // replaces the first value, keeps its place
  TempDir dir;
  w.write(dir / "m.gguf");
  const sy::GgufFile g = sy::GgufFile::open(dir / "m.gguf");

  REQUIRE(g.metadata().size() == 22);
  CHECK(g.metadata()[0].key() == "general.name");
  CHECK(g.metadata()[1].key() == "t.u8");
  CHECK(g.string("general.name") == "tiny");
  CHECK(g.integer("t.u8") == u8);
  CHECK(g.integer("t.i8") == i8);
  CHECK(g.integer("t.u16") == u16);
  CHECK(g.integer("t.i16") == i16);
  CHECK(g.integer("t.u32") == u32);
  CHECK(g.integer("t.i32") == i32);
  CHECK(g.integer("t.u64") == static_cast<std::int64_t>(u64v));
  CHECK(g.integer("t.i64") == i64);
  CHECK(g.number("t.f32") == static_cast<double>(f32));
  CHECK(g.number("t.f64") == f64);
  CHECK(g.number("t.i32") == static_cast<double>(i32));
  CHECK(g.flag("t.bool") == flag);
  CHECK(g.find("t.u16")->type() == GgufValueType::u16);
  CHECK(g.find("t.u16")->size() == 0);
  CHECK_FALSE(g.find("t.big")->as_int().has_value());
  CHECK(g.find("t.big")->as_number() == static_cast<double>(std::numeric_limits<std::uint64_t>::max()));
  CHECK(!g.find("absent"));
  CHECK(!g.integer("absent").has_value());

  const sy::GgufValue& strings = *g.find("t.strings");
  CHECK(strings.type() == GgufValueType::array);
  CHECK(strings.element_type() == GgufValueType::string);
  REQUIRE(strings.size() == words.size());
  const std::vector<std::string_view> got = strings.strings();
  for (std::size_t i = 0; i < words.size(); ++i) CHECK(got[i] == words[i]);
  CHECK(g.find("t.i32s")->ints() == std::vector<std::int64_t>(i32s.begin(), i32s.end()));
  CHECK(g.find("t.u32s")->ints() == std::vector<std::int64_t>(u32s.begin(), u32s.end()));
  CHECK(g.find("t.i8s")->ints() == std::vector<std::int64_t>(i8s.begin(), i8s.end()));
  CHECK(g.find("t.u16s")->ints() == std::vector<std::int64_t>(u16s.begin(), u16s.end()));
  CHECK(g.find("t.i64s")->ints() == i64s);
  CHECK(g.find("t.f32s")->numbers() == std::vector<double>(f32s.begin(), f32s.end()));
  CHECK(g.find("t.f64s")->numbers() == f64s);
  CHECK(g.find("t.u32s")->numbers() == std::vector<double>(u32s.begin(), u32s.end()));
  CHECK(g.find("t.bools")->element_type() == GgufValueType::boolean);
  CHECK(g.find("t.bools")->size() == bools.size());

  // A present key of the wrong kind names the key, the file and both types.
  const std::string wrong = input_error_message([&] { g.integer("general.name"); });
  CHECK_MESSAGE(contains(wrong, "m.gguf: metadata key 'general.name' is string, but an integer is expected"), wrong);
  CHECK(contains(input_error_message([&] { g.string("t.u32"); }), "'t.u32' is u32, but a string is expected"));
  CHECK(contains(input_error_message([&] { g.flag("t.u8"); }), "is u8, but a bool"));
  CHECK(contains(input_error_message([&] { g.number("t.strings"); }), "is an array of string, but a number"));
  CHECK(contains(input_error_message([&] { g.integer("t.big"); }), "'t.big' is a u64 above 2^63 - 1"));
  CHECK(contains(input_error_message([&] { g.find("t.f32s")->ints(); }), "'t.f32s' is an array of f32, not an array of integers"));
  CHECK(contains(input_error_message([&] { g.find("t.i32s")->strings(); }), "not an array of strings"));
  CHECK(contains(input_error_message([&] { g.find("t.u8")->numbers(); }), "'t.u8' is u8, not an array of numbers"));
}

TEST_CASE("gguf overrides (--override-kv) replace or add metadata values in a copy; bad ones are usage errors") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  TempDir dir;
  const std::int64_t count = static_cast<std::int64_t>(rng.below(1000)) + 1;
  sy::GgufWriter writer;
  writer.set_string("general.architecture", "qwen3moe");
  writer.set_string("tokenizer.ggml.pre", "starcoder");
  writer.set_u32("qwen3moe.expert_used_count", static_cast<std::uint32_t>(count));
  writer.write(dir / "m.gguf");
  const sy::GgufFile file = sy::GgufFile::open(dir / "m.gguf");

  const std::string value = "w" + std::to_string(rng.below(1u << 30));
  const std::vector<sy::GgufOverride> overrides = {
      sy::parse_gguf_override("tokenizer.ggml.pre=str:" + value), sy::parse_gguf_override("qwen3moe.expert_used_count=int:-3"),
      sy::parse_gguf_override("new.flag=bool:true"), sy::parse_gguf_override("new.scale=float:0.125")};
  const sy::GgufFile changed = file.with_overrides(overrides);
  CHECK(changed.string("tokenizer.ggml.pre") == value);
  CHECK(changed.integer("qwen3moe.expert_used_count") == -3);
  CHECK(changed.flag("new.flag") == true);
  CHECK(changed.number("new.scale") == 0.125);
  CHECK(changed.metadata().size() == file.metadata().size() + 2);
  CHECK(changed.string("general.architecture") == "qwen3moe");
  // The file's own values are untouched, and the copy outlives the file it came from.
  CHECK(file.string("tokenizer.ggml.pre") == "starcoder");
  CHECK(file.integer("qwen3moe.expert_used_count") == count);
  CHECK_FALSE(file.find("new.flag"));
  const sy::GgufFile alone = sy::GgufFile::open(dir / "m.gguf").with_overrides(overrides);
  CHECK(alone.string("tokenizer.ggml.pre") == value);
  // A value of another type than the reader wants is the usual typed error, naming the key.
  CHECK(contains(input_error_message([&] { (void)changed.string("qwen3moe.expert_used_count"); }), "qwen3moe.expert_used_count"));

  for (const char* bad : {"novalue", "=str:x", "key=str", "key=int:1.5", "key=int:", "key=float:nan", "key=bool:yes", "key=string:x"}) {
    INFO(bad);
    CHECK(input_error_exit_code([&] { sy::parse_gguf_override(bad); }) == sy::kExitUsageOrIo);
    CHECK(contains(input_error_message([&] { sy::parse_gguf_override(bad); }), "KEY=TYPE:VALUE"));
  }
  CHECK(sy::parse_gguf_override("k=str:a=b:c").text == "a=b:c");  // the value is everything after the first colon
}

TEST_CASE("gguf writer bytes are the format's encoding, and the reader's offsets honour the alignment") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  for (const std::uint32_t alignment : {32u, 64u, 1u}) {
    CAPTURE(alignment);
    RawSpec spec;
    spec.alignment = alignment;
    if (alignment != 32) spec.kvs.push_back({"general.alignment", 4, encoded<std::uint32_t>(alignment)});
    spec.kvs.push_back({"general.architecture", 8, encoded_string("qwen3moe")});
    spec.kvs.push_back({"qwen3moe.expert_count", 4, encoded<std::uint32_t>(128)});
    spec.kvs.push_back({"tokenizer.ggml.tokens", 9, encoded_strings({"a", "bc"})});
    // f32 [3, 5] (60 bytes), q8_0 [2, 64] (136 bytes): each at the next multiple of the alignment.
    const std::uint64_t second = (60 + alignment - 1) / alignment * alignment;
    spec.tensors = {{"a.weight", {5, 3}, 0, 0}, {"b.weight", {64, 2}, 8, second}};
    const RawGguf raw = encode(spec, rng);
    const std::string data = raw.bytes.substr(raw.bytes.size() - static_cast<std::size_t>(second + 136));

    sy::GgufWriter w(alignment);
    w.set_string("general.architecture", "qwen3moe");
    w.set_u32("qwen3moe.expert_count", 128);
    w.set_strings("tokenizer.ggml.tokens", {"a", "bc"});
    w.add_tensor("a.weight", sy::DType::f32, {3, 5}, [&](std::byte* out) { std::memcpy(out, data.data(), 60); });
    w.add_tensor("b.weight", sy::DType::q8_0, {2, 64}, [&](std::byte* out) { std::memcpy(out, data.data() + second, 136); });
    TempDir dir;
    const std::uint64_t written = w.write(dir / "m.gguf");
    const std::string bytes = read_file(dir / "m.gguf");
    CHECK(written == bytes.size());
    // The writer pads between tensors with zeros; the encoding here has random bytes there.
    std::string expected = raw.bytes;
    std::memset(expected.data() + expected.size() - (second + 136) + 60, 0, static_cast<std::size_t>(second - 60));
    CHECK(bytes == expected);

    const sy::GgufFile g = sy::GgufFile::open(dir / "m.gguf");
    CHECK(g.alignment() == alignment);
    CHECK(g.version() == 3);
    CHECK(g.data_offset(0) % alignment == 0);
    for (const sy::GgufTensorInfo& t : g.tensors()) CHECK((t.offset - g.data_offset(0)) % alignment == 0);
  }
}

TEST_CASE("gguf tensors of every dtype and odd shapes come back byte for byte, as zero-copy views of the mapping") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const sy::DType dtypes[] = {sy::DType::f32,  sy::DType::f16,  sy::DType::bf16, sy::DType::f64,  sy::DType::i32,
                              sy::DType::i8,   sy::DType::q8_0, sy::DType::q4_0, sy::DType::q4_1, sy::DType::q5_0,
                              sy::DType::q5_1, sy::DType::q2_k, sy::DType::q3_k, sy::DType::q4_k, sy::DType::q5_k,
                              sy::DType::q6_k};
  for (const std::uint32_t alignment : {32u, 64u}) {
    CAPTURE(alignment);
    sy::GgufWriter w(alignment);
    struct Expected {
      std::string name;
      sy::DType dtype;
      std::vector<std::int64_t> shape;
      std::string bytes;
    };
    std::vector<Expected> expected;
    expected.reserve(2 * std::size(dtypes));  // the fill callbacks point at the elements' bytes
    for (int round = 0; round < 2; ++round)
      for (const sy::DType d : dtypes) {
        const auto ggml_type = static_cast<std::uint32_t>(sy::dtype_info(d).ggml_type);
        Expected e{"t" + std::to_string(expected.size()) + "." + sy::dtype_name(d), d,
                   random_shape(rng, static_cast<std::int64_t>(ggml_blocks().at(ggml_type).elements)), ""};
        std::uint64_t n = 1;
        for (std::int64_t s : e.shape) n *= static_cast<std::uint64_t>(s);
        e.bytes = rng.bytes(static_cast<std::size_t>(ggml_bytes(ggml_type, n)));
        const std::string* source = &(expected.emplace_back(std::move(e)).bytes);
        w.add_tensor(expected.back().name, d, expected.back().shape,
                     [source](std::byte* out) { std::memcpy(out, source->data(), source->size()); });
      }
    TempDir dir;
    w.write(dir / "m.gguf");
    const sy::GgufFile g = sy::GgufFile::open(dir / "m.gguf");
    REQUIRE(g.tensors().size() == expected.size());
    const std::string file = read_file(dir / "m.gguf");
    CHECK(g.total_file_bytes() == file.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const Expected& e = expected[i];
      CAPTURE(e.name);
      const sy::GgufTensorInfo* info = g.find_tensor(e.name);
      REQUIRE(info != nullptr);
      CHECK(info == &g.tensors()[i]);
      CHECK(info->dtype == e.dtype);
      CHECK(info->shape == e.shape);
      CHECK(info->bytes == e.bytes.size());
      CHECK(info->file == 0);
      CHECK(file.compare(static_cast<std::size_t>(info->offset), e.bytes.size(), e.bytes) == 0);
      const sy::Tensor t = g.tensor(*info);
      CHECK(t.dtype() == e.dtype);
      CHECK(t.shape() == e.shape);
      CHECK(t.bytes() == e.bytes.size());
      CHECK(t.in_read_only_pages());
      CHECK(std::memcmp(t.data(), e.bytes.data(), e.bytes.size()) == 0);
      // Zero copy: the data lies in the mapping, at the tensor's offset from its start.
      const sy::Tensor whole = g.tensor(g.tensors()[0]);
      const auto base = reinterpret_cast<std::uintptr_t>(whole.data()) - g.tensors()[0].offset;
      CHECK(reinterpret_cast<std::uintptr_t>(t.data()) == base + info->offset);
      // Rows of a block-quantised tensor are whole blocks: rows() steps by one row's storage.
      if (e.shape.size() >= 2 && e.shape[0] >= 2) {
        const std::uint64_t row_bytes = e.bytes.size() / static_cast<std::uint64_t>(e.shape[0]);
        const sy::Tensor row = t.rows(1, 1);
        CHECK(row.data_as<std::byte>() == t.data_as<std::byte>() + row_bytes);
        CHECK(row.bytes() == row_bytes);
      }
    }
    CHECK(!g.find_tensor("absent"));
  }
}

TEST_CASE("gguf writer refuses what GGUF cannot hold") {
  sy::GgufWriter w;
  const auto nothing = [](std::byte*) {};
  w.add_tensor("a", sy::DType::f32, {2, 3}, nothing);
  CHECK_THROWS_AS(w.add_tensor("a", sy::DType::f32, {2}, nothing), std::invalid_argument);
  CHECK_THROWS_AS(w.add_tensor("b", sy::DType::q8_0, {2, 33}, nothing), std::invalid_argument);
  CHECK_THROWS_AS(w.add_tensor("c", sy::DType::f32, {}, nothing), std::invalid_argument);
  CHECK_THROWS_AS(w.add_tensor("d", sy::DType::f32, {1, 1, 1, 1, 1}, nothing), std::invalid_argument);
  CHECK_THROWS_AS(w.add_tensor("e", sy::DType::f32, {0, 3}, nothing), std::invalid_argument);
  CHECK_THROWS_AS(w.add_tensor("f", sy::DType::f8_e4m3, {3}, nothing), std::invalid_argument);
  CHECK_THROWS_AS(sy::GgufWriter(48), std::invalid_argument);
  CHECK_THROWS_AS(w.set_u32("general.alignment", 64), std::invalid_argument);
  // An unwritable target is an I/O error naming it, and leaves nothing behind.
  TempDir dir;
  const std::string message = input_error_message([&] { w.write(dir / "missing-folder" / "m.gguf"); });
  CHECK_MESSAGE(contains(message, "missing-folder"), message);
}

TEST_CASE("gguf split sets open from any of their files or their folder, and their split keys must agree") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  sy::GgufWriter w(64);
  w.set_string("general.architecture", "mixtral");
  std::vector<std::string> payloads;
  payloads.reserve(7);
  for (int i = 0; i < 7; ++i) {
    const std::string* p = &payloads.emplace_back(rng.bytes(static_cast<std::size_t>(4 * 16 * (i + 1))));
    w.add_tensor("blk." + std::to_string(i) + ".weight", sy::DType::f32, {i + 1, 16},
                 [p](std::byte* out) { std::memcpy(out, p->data(), p->size()); });
  }
  TempDir dir;
  const std::vector<std::filesystem::path> files = w.write_split(dir / "model", 600);
  REQUIRE(files.size() >= 3);
  CHECK(files[0].filename() == "model-00001-of-0000" + std::to_string(files.size()) + ".gguf");
  for (const std::filesystem::path& from : {files[0], files[1], dir.path()}) {
    CAPTURE(from);
    const sy::GgufFile g = sy::GgufFile::open(from);
    CHECK(g.files() == files);
    CHECK(g.string("general.architecture") == "mixtral");
    CHECK(g.integer("split.count") == static_cast<std::int64_t>(files.size()));
    CHECK(g.alignment() == 64);
    REQUIRE(g.tensors().size() == 7);
    std::uint64_t total = 0;
    for (const auto& f : files) total += std::filesystem::file_size(f);
    CHECK(g.total_file_bytes() == total);
    for (int i = 0; i < 7; ++i) {
      const sy::GgufTensorInfo& t = g.tensors()[static_cast<std::size_t>(i)];
      CHECK(t.name == "blk." + std::to_string(i) + ".weight");
      CHECK(t.file < files.size());
      CHECK(std::memcmp(g.tensor(t).data(), payloads[static_cast<std::size_t>(i)].data(), t.bytes) == 0);
    }
    CHECK(g.tensors().back().file == files.size() - 1);
  }

  // A missing file of the set is an I/O error naming it.
  std::filesystem::rename(files[1], dir / "elsewhere");
  std::string message = input_error_message([&] { sy::GgufFile::open(files[0]); });
  CHECK_MESSAGE(contains(message, files[1].filename().string() + ": file 2 of the split set"), message);
  CHECK(input_error_exit_code([&] { sy::GgufFile::open(files[0]); }) == sy::kExitUsageOrIo);
  std::filesystem::rename(dir / "elsewhere", files[1]);

  // A file from another set in its place: its split.no and split.tensors.count disagree.
  sy::GgufWriter other;
  other.add_tensor("x", sy::DType::f32, {4}, [](std::byte* out) { std::memset(out, 1, 16); });
  other.add_tensor("y", sy::DType::f32, {4}, [](std::byte* out) { std::memset(out, 2, 16); });
  TempDir other_dir;
  const std::vector<std::filesystem::path> other_files = other.write_split(other_dir / "o", 16);
  REQUIRE(other_files.size() == 2);
  std::filesystem::copy_file(other_files[0], files[1], std::filesystem::copy_options::overwrite_existing);
  message = input_error_message([&] { sy::GgufFile::open(files[0]); });
  CHECK_MESSAGE(contains(message, files[1].string() + ": metadata says split.count 2, but the file names say the set has " + std::to_string(files.size()) + " files"), message);

  // A lone file whose metadata says it is part of a set.
  std::filesystem::copy_file(other_files[0], other_dir / "renamed.gguf");
  message = input_error_message([&] { sy::GgufFile::open(other_dir / "renamed.gguf"); });
  CHECK_MESSAGE(contains(message, "renamed.gguf: metadata says split.count 2, but the file is not named as the first of a split set"), message);

  // The second file of a set moved to the first place: split.no says so.
  TempDir swapped;
  std::filesystem::copy_file(other_files[1], swapped / "o-00001-of-00002.gguf");
  std::filesystem::copy_file(other_files[0], swapped / "o-00002-of-00002.gguf");
  message = input_error_message([&] { sy::GgufFile::open(swapped.path()); });
  CHECK_MESSAGE(contains(message, "o-00001-of-00002.gguf: metadata says split.no 1, but this is file 1 of 2"), message);

  // A folder of two unrelated files, and one with none.
  message = input_error_message([&] { sy::GgufFile::open(other_dir.path()); });
  CHECK_MESSAGE(contains(message, "holds 3 .gguf files that are not one split set"), message);
  TempDir empty;
  CHECK(contains(input_error_message([&] { sy::GgufFile::open(empty.path()); }), "holds no .gguf file"));
  CHECK(input_error_exit_code([&] { sy::GgufFile::open(empty.path()); }) == sy::kExitUsageOrIo);
  CHECK(input_error_exit_code([&] { sy::GgufFile::open(empty / "nothing.gguf"); }) == sy::kExitUsageOrIo);
}

TEST_CASE("gguf split name counting 99999999 files is refused at its first missing file, before any other name is made") {
  sy::GgufWriter w;
  w.add_tensor("x", sy::DType::f32, {4}, [](std::byte* out) { std::memset(out, 1, 16); });
  TempDir dir;
  // A lone file (no split keys) named as the first of a set of 99999999: the second is looked for.
  const std::filesystem::path lone = dir / "m-00001-of-99999999.gguf";
  w.write(lone);
  const auto started = std::chrono::steady_clock::now();
  const std::string message = input_error_message([&] { sy::GgufFile::open(lone); });
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
  CHECK_MESSAGE(contains(message, "m-00002-of-99999999.gguf: file 2 of the split set of m-00001-of-99999999.gguf is missing"),
                message);
  CHECK(input_error_exit_code([&] { sy::GgufFile::open(lone); }) == sy::kExitUsageOrIo);
  // The first file of a real set of 2 under that name: its split.count disagrees, before any other is sought.
  TempDir set_dir;
  const std::vector<std::filesystem::path> parts = [&] {
    sy::GgufWriter two;
    two.add_tensor("x", sy::DType::f32, {4}, [](std::byte* out) { std::memset(out, 1, 16); });
    two.add_tensor("y", sy::DType::f32, {4}, [](std::byte* out) { std::memset(out, 2, 16); });
    return two.write_split(set_dir / "o", 16);
  }();
  REQUIRE(parts.size() == 2);
  const std::filesystem::path renamed = dir / "n-00001-of-99999999.gguf";
  std::filesystem::copy_file(parts[0], renamed);
  CHECK_MESSAGE(contains(input_error_message([&] { sy::GgufFile::open(renamed); }),
                         "metadata says split.count 2, but the file names say the set has 99999999 files"),
                input_error_message([&] { sy::GgufFile::open(renamed); }));
  CHECK(input_error_exit_code([&] { sy::GgufFile::open(renamed); }) == sy::kExitBadContent);
}

TEST_CASE("gguf split set with a tensor in two files or a wrong tensor count is refused") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  TempDir dir;
  // Two files written by hand: both hold tensor "w"; the first says split.tensors.count 2.
  for (int k = 0; k < 2; ++k) {
    RawSpec s;
    s.kvs = {{"split.no", 2, encoded<std::uint16_t>(static_cast<std::uint16_t>(k))},
             {"split.count", 2, encoded<std::uint16_t>(2)},
             {"split.tensors.count", 5, encoded<std::int32_t>(2)}};
    s.tensors = {{"w", {4}, 0, 0}};
    write_file(dir / ("m-0000" + std::to_string(k + 1) + "-of-00002.gguf"), encode(s, rng).bytes);
  }
  std::string message = input_error_message([&] { sy::GgufFile::open(dir / "m-00001-of-00002.gguf"); });
  CHECK_MESSAGE(contains(message, "m-00002-of-00002.gguf: tensor 'w' is also in "), message);
  RawSpec s;
  s.kvs = {{"split.no", 2, encoded<std::uint16_t>(1)}, {"split.count", 2, encoded<std::uint16_t>(2)},
           {"split.tensors.count", 5, encoded<std::int32_t>(3)}};
  s.tensors = {{"v", {4}, 0, 0}};
  write_file(dir / "m-00002-of-00002.gguf", encode(s, rng).bytes);
  message = input_error_message([&] { sy::GgufFile::open(dir.path()); });
  CHECK_MESSAGE(contains(message, "m-00002-of-00002.gguf: metadata says split.tensors.count 3, but the 2 file(s) hold 2 tensors"), message);
}

TEST_CASE("gguf file cut at any byte is refused with an error naming the field it ends in") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const RawSpec spec = good_spec();
  const RawGguf raw = encode(spec, rng);
  REQUIRE_NOTHROW(sy::parse_gguf_bytes(raw.bytes, "model.gguf"));
  // Where the counts alone show that the bytes left cannot hold the entries (13 bytes at least per
  // metadata entry, 32 per tensor info), the error says so instead.
  const std::size_t metadata_start = 24;
  std::size_t infos_start = 0;
  for (const auto& field : raw.fields)
    if (field.second.rfind("tensor info 0", 0) == 0) infos_start = field.first;
  for (std::size_t cut = 0; cut < raw.bytes.size(); ++cut) {
    CAPTURE(cut);
    std::string fragment;
    for (const auto& field : raw.fields)
      if (field.first <= cut) fragment = field.second;
    const std::string message = parse_error(raw.bytes.substr(0, cut));
    const bool counts_say_so = (cut >= metadata_start && cut - metadata_start < 3 * 13) ||
                               (cut >= infos_start && cut - infos_start < 2 * 32);
    CHECK_MESSAGE(message.rfind("model.gguf: ", 0) == 0, message);
    CHECK_MESSAGE((contains(message, fragment) || (counts_say_so && contains(message, "the header counts")) ||
                   (fragment == "tensor '" && contains(message, "data section"))), message << " (expected " << fragment << ")");
  }
}

TEST_CASE("gguf hostile headers: magic, version, counts and lengths larger than the file") {
  RawSpec s = good_spec();
  s.magic = "GGUG";
  CHECK(contains(hostile(s), "not a GGUF file: it begins with \"GGUG\""));
  s = good_spec();
  s.version = 1;
  CHECK(contains(hostile(s), "GGUF version 1 (32-bit counts) is not supported"));
  s.version = 4;
  CHECK(contains(hostile(s), "unknown GGUF version 4"));
  s.version = 3u << 24;
  CHECK(contains(hostile(s), "a big-endian GGUF file (version 3)"));
  s = good_spec();
  s.version = 2;
  SeededRng rng;
  CHECK(sy::parse_gguf_bytes(encode(s, rng).bytes, "model.gguf").version() == 2);

  s = good_spec();
  s.metadata_count = 1ULL << 60;
  CHECK(contains(hostile(s), "the header counts 1152921504606846976 metadata entries, more than the"));
  s = good_spec();
  s.tensor_count = 1ULL << 60;
  CHECK(contains(hostile(s), "the header counts 1152921504606846976 tensors"));
  s = good_spec();
  s.kvs[0].value = encoded<std::uint64_t>(1ULL << 60);  // a string length past the end
  CHECK(contains(hostile(s), "metadata key 'general.architecture': its string value is 1152921504606846976 bytes long, but the file ends"));
  s = good_spec();
  s.kvs[2].value = encoded<std::uint32_t>(8) + encoded<std::uint64_t>(1ULL << 60);  // 2^60 strings
  CHECK(contains(hostile(s), "metadata key 'tokenizer.ggml.tokens': an array of 1152921504606846976 string elements, more than"));
  s.kvs[2].value = encoded<std::uint32_t>(10) + encoded<std::uint64_t>(1ULL << 61);  // 2^61 u64s
  CHECK(contains(hostile(s), "an array of 2305843009213693952 u64 elements"));
  s.kvs[2].value = encoded_strings({"a", "b"});
  s.kvs[2].value[19] = '\x7f';  // the first string's length's top byte: about 2^62
  CHECK(contains(hostile(s), "'tokenizer.ggml.tokens': string element 0 of 2 runs past the end of the file"));
}

TEST_CASE("gguf hostile metadata: unknown types, nested arrays, bools, duplicate keys, alignment") {
  RawSpec s = good_spec();
  s.kvs[0].type = 13;
  CHECK(contains(hostile(s), "metadata key 'general.architecture': unknown value type 13"));
  s = good_spec();
  s.kvs[2].value = encoded<std::uint32_t>(9) + encoded<std::uint64_t>(1) + encoded<std::uint32_t>(0) + encoded<std::uint64_t>(0);
  CHECK(contains(hostile(s), "'tokenizer.ggml.tokens': an array of arrays, which this reader does not support"));
  s.kvs[2].value = encoded<std::uint32_t>(77) + encoded<std::uint64_t>(0);
  CHECK(contains(hostile(s), "'tokenizer.ggml.tokens': an array of unknown value type 77"));
  s = good_spec();
  s.kvs.push_back({"flag", 7, encoded<std::uint8_t>(2)});
  CHECK(contains(hostile(s), "metadata key 'flag': a bool of value 2 (only 0 and 1 are valid)"));
  s.kvs.back().value = encoded<std::uint32_t>(7) + encoded<std::uint64_t>(3) + std::string("\x01\x00\x05", 3);
  s.kvs.back().type = 9;
  CHECK(contains(hostile(s), "metadata key 'flag': bool element 2 has value 5"));
  s = good_spec();
  s.kvs.push_back(s.kvs[0]);
  CHECK(contains(hostile(s), "metadata key 'general.architecture' appears twice"));
  for (const std::uint32_t bad : {0u, 3u, 48u}) {
    s = good_spec();
    s.kvs[1].value = encoded<std::uint32_t>(bad);
    CHECK(contains(hostile(s), "metadata key 'general.alignment' is " + std::to_string(bad) + "; it must be a power of two"));
  }
  s = good_spec();
  s.kvs[1] = {"general.alignment", 8, encoded_string("32")};
  CHECK(contains(hostile(s), "'general.alignment' is string; it must be an integer"));
}

TEST_CASE("gguf hostile tensor infos: duplicates, dimensions, types, blocks, offsets, overlaps, data past the end") {
  RawSpec s = good_spec();
  s.tensors[1].name = s.tensors[0].name;
  CHECK(contains(hostile(s), "tensor 'token_embd.weight' appears twice"));
  s = good_spec();
  s.tensors[0].ne = {};
  CHECK(contains(hostile(s), "tensor 'token_embd.weight' has 0 dimensions; GGUF tensors have 1 to 4"));
  s.tensors[0].ne = {8, 1, 1, 1, 1};
  CHECK(contains(hostile(s), "has 5 dimensions"));
  s.tensors[0].ne = {8, 0};
  CHECK(contains(hostile(s), "tensor 'token_embd.weight': dimension ne[1] is 0"));
  s.tensors[0].ne = {8, 1ULL << 63};
  CHECK(contains(hostile(s), "tensor 'token_embd.weight': its element count overflows 64 bits (dimension ne[1]"));
  s.tensors[0].ne = {1ULL << 32, 1ULL << 32};
  CHECK(contains(hostile(s), "its element count overflows 64 bits"));
  s = good_spec();
  s.tensors[1].ne = {48, 2};
  CHECK(contains(hostile(s), "tensor 'blk.0.ffn_down.weight': its rows hold 48 elements, not a whole number of q8_0 blocks of 32"));
  s = good_spec();
  s.tensors[1].type = 34;
  CHECK(contains(hostile(s), "tensor 'blk.0.ffn_down.weight': type 34 (TQ1_0) is not supported"));
  s.tensors[1].type = 16;  // IQ2_XXS is read, in whole 256-weight blocks
  CHECK(contains(hostile(s), "tensor 'blk.0.ffn_down.weight': its rows hold 32 elements, not a whole number of iq2_xxs blocks of 256"));
  s.tensors[1].type = 9;
  CHECK(contains(hostile(s), "type 9 (Q8_1) is not supported"));
  s.tensors[1].type = 99;
  CHECK(contains(hostile(s), "type 99 is not a ggml type this reader knows"));
  s = good_spec();
  s.tensors[1].offset = 48;
  CHECK(contains(hostile(s), "tensor 'blk.0.ffn_down.weight': offset 48 is not a multiple of the alignment 32"));
  s.tensors[1].offset = 32;  // [32, 134) overlaps token_embd.weight [0, 64)
  CHECK(contains(hostile(s), "tensor 'blk.0.ffn_down.weight' (bytes 32 to 134) overlaps tensor 'token_embd.weight' (bytes 0 to 64)"));
  s = good_spec();
  s.data_bytes = 64 + 101;
  CHECK(contains(hostile(s), "tensor 'blk.0.ffn_down.weight': its 102 bytes at offset 64 run past the end of the data section (165 bytes)"));
  s.tensors[1].offset = 1ULL << 62;
  CHECK(contains(hostile(s), "at offset 4611686018427387904 run past the end"));
  // No data at all, and the padding before it cut short: the data section would begin past the end.
  s = good_spec();
  s.data_bytes = 0;
  SeededRng rng;
  for (std::string filler;; filler += 'x') {
    s.kvs.push_back({"general.filler", 8, encoded_string(filler)});
    const RawGguf raw = encode(s, rng);
    s.kvs.pop_back();
    if (raw.bytes.size() == raw.fields.back().first) continue;  // no padding to cut
    const std::string message = parse_error(raw.bytes.substr(0, raw.bytes.size() - 1));
    CHECK_MESSAGE(contains(message, "model.gguf: the data section would begin at byte " + std::to_string(raw.bytes.size())), message);
    break;
  }
}

TEST_CASE("gguf good file from the hand encoding reads as written, and misaligned data is copied to aligned memory") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const RawGguf raw = encode(good_spec(), rng);
  const sy::GgufFile g = sy::parse_gguf_bytes(raw.bytes, "model.gguf");
  CHECK(g.string("general.architecture") == "deepseek2");
  CHECK(g.find("tokenizer.ggml.tokens")->strings() == std::vector<std::string_view>{"<s>", "hello", ""});
  REQUIRE(g.tensors().size() == 2);
  CHECK(g.tensors()[0].shape == std::vector<std::int64_t>{2, 8});
  CHECK(g.tensors()[1].shape == std::vector<std::int64_t>{3, 32});
  CHECK(g.tensors()[1].dtype == sy::DType::q8_0);
  CHECK(g.tensors()[1].bytes == 3 * 34);
  CHECK_FALSE(g.tensor(g.tensors()[0]).in_read_only_pages());  // the caller's bytes, not a mapping

  // Alignment 1: an f32 tensor at an odd address gets an aligned copy with the same bytes.
  RawSpec s;
  s.alignment = 1;
  s.kvs = {{"general.alignment", 4, encoded<std::uint32_t>(1)}};
  s.tensors = {{"b", {3}, 24, 0}, {"f", {5}, 0, 3}};  // i8 [3] at 0, f32 [5] after it
  // The data section starts where the infos end; f moves by a byte where that would align it.
  const std::size_t data_start = encode(s, rng).fields.back().first;
  if ((data_start + 3) % 4 == 0) s.tensors[1].offset = 4;
  const RawGguf odd = encode(s, rng);
  std::vector<std::uint64_t> aligned_storage(odd.bytes.size() / 8 + 1);  // 8-aligned, so offset 1 is odd
  std::memcpy(aligned_storage.data(), odd.bytes.data(), odd.bytes.size());
  const std::string_view view(reinterpret_cast<const char*>(aligned_storage.data()), odd.bytes.size());
  const sy::GgufFile o = sy::parse_gguf_bytes(view, "odd.gguf");
  const sy::GgufTensorInfo& f = *o.find_tensor("f");
  CHECK(f.offset % 4 != 0);
  const sy::Tensor t = o.tensor(f);
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 4 == 0);
  CHECK(std::memcmp(t.data(), view.data() + f.offset, 20) == 0);
}

TEST_CASE("gguf string array of 200k tokens parses in time linear in its length") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const auto parse_time = [&](std::size_t count, std::vector<std::string>& tokens) {
    tokens.resize(count);
    for (std::string& t : tokens) t = rng.bytes(rng.below(10) + 1);
    sy::GgufWriter w;
    w.set_strings("tokenizer.ggml.tokens", tokens);
    w.set_i32s("tokenizer.ggml.token_type", std::vector<std::int32_t>(count, 1));
    TempDir dir;
    w.write(dir / "t.gguf");
    const auto start = std::chrono::steady_clock::now();
    const sy::GgufFile g = sy::GgufFile::open(dir / "t.gguf");
    const std::vector<std::string_view> got = g.find("tokenizer.ggml.tokens")->strings();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE(got.size() == count);
    for (std::size_t i = 0; i < count; i += 997) CHECK(got[i] == tokens[i]);
    CHECK(got.back() == tokens.back());
    CHECK(g.find("tokenizer.ggml.token_type")->size() == count);
    return seconds;
  };
  std::vector<std::string> tokens;
  const double small = parse_time(20000, tokens);
  const double large = parse_time(200000, tokens);
  MESSAGE("open + strings(): 20k tokens " << small * 1e3 << " ms, 200k tokens " << large * 1e3 << " ms");
}

// The fuzz target's seeds (tests/fuzz/corpus/gguf/): small valid files, made here. With
// SWITCHYARD_WRITE_GGUF_SEEDS=1 the test writes them into the source tree first; either way each
// committed seed must be a file the reader accepts.
TEST_CASE("gguf fuzz seeds are valid GGUF files") {
  const std::filesystem::path corpus = std::filesystem::path(SWITCHYARD_SOURCE_DIR) / "tests/fuzz/corpus/gguf";
  if (std::getenv("SWITCHYARD_WRITE_GGUF_SEEDS")) {
    std::mt19937 engine(21);  // fixed: the seeds are committed bytes
    const auto fill_random = [&engine](std::byte* out, std::size_t bytes) {
      for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>(engine());
    };
    {
      sy::GgufWriter w;
      w.set_string("general.architecture", "deepseek2");
      w.set_u32("deepseek2.block_count", 2);
      w.set_f32("deepseek2.rope.freq_base", 10000.0f);
      w.set_bool("deepseek2.expert_weights_norm", true);
      w.set_strings("tokenizer.ggml.tokens", {"<s>", "</s>", "a", "b", "ab"});
      w.set_i32s("tokenizer.ggml.token_type", {3, 3, 1, 1, 1});
      w.add_tensor("token_embd.weight", sy::DType::f32, {5, 4}, [&](std::byte* o) { fill_random(o, 80); });
      w.add_tensor("blk.0.ffn_down_exps.weight", sy::DType::q8_0, {2, 32}, [&](std::byte* o) { fill_random(o, 68); });
      w.write(corpus / "tiny-deepseek2.gguf");
    }
    {
      sy::GgufWriter w(64);
      w.set_string("general.architecture", "qwen3moe");
      w.add_tensor("blk.0.ffn_gate_exps.weight", sy::DType::q4_k, {1, 256}, [&](std::byte* o) { fill_random(o, 144); });
      w.add_tensor("output_norm.weight", sy::DType::f16, {7}, [&](std::byte* o) { fill_random(o, 14); });
      w.add_tensor("blk.0.attn_q.weight", sy::DType::bf16, {3, 2}, [&](std::byte* o) { fill_random(o, 12); });
      w.write(corpus / "aligned64-q4k-f16-bf16.gguf");
    }
    {
      sy::GgufWriter w;
      w.set_u8("u8", 200);
      w.set_i8("i8", -3);
      w.set_u16("u16", 60000);
      w.set_i16("i16", -30000);
      w.set_u32("u32", 4000000000u);
      w.set_i32("i32", -2000000000);
      w.set_u64("u64", 1ULL << 63);
      w.set_i64("i64", -(1LL << 62));
      w.set_f32("f32", 0.5f);
      w.set_f64("f64", -2.25);
      w.set_bool("bool", false);
      w.set_string("string", "text");
      w.set_bools("bools", {true, false});
      w.set_u64s("u64s", {1, 1ULL << 63});
      w.set_f64s("f64s", {1.5, -0.0});
      w.write(corpus / "metadata-every-type.gguf");
    }
    {
      sy::GgufWriter w(1);
      w.add_tensor("i8", sy::DType::i8, {3}, [&](std::byte* o) { fill_random(o, 3); });
      w.add_tensor("f32", sy::DType::f32, {2, 3}, [&](std::byte* o) { fill_random(o, 24); });
      w.add_tensor("q6_k", sy::DType::q6_k, {256}, [&](std::byte* o) { fill_random(o, 210); });
      w.write(corpus / "alignment1-unaligned-offsets.gguf");
    }
    {
      // A vocabulary (text/gguf_vocabulary.h): the 256 byte-level symbols, a few merges and a BOS.
      sy::GgufWriter w;
      w.set_string("general.architecture", "deepseek2");
      w.set_string("tokenizer.ggml.model", "gpt2");
      w.set_string("tokenizer.ggml.pre", "deepseek-v3");
      std::vector<std::string> tokens;
      for (int b = 0; b < 256; ++b) tokens.emplace_back(sy::text::byte_symbol(static_cast<std::uint8_t>(b)));
      const std::vector<std::string> merges = {"H e", "l l", "He ll", "Hell o", "o r"};
      for (const std::string& m : merges) tokens.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1));
      tokens.emplace_back("<|bos|>");
      w.set_strings("tokenizer.ggml.tokens", tokens);
      w.set_strings("tokenizer.ggml.merges", merges);
      w.set_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(tokens.size() - 1));
      w.set_bool("tokenizer.ggml.add_bos_token", true);
      w.write(corpus / "vocabulary-deepseek-v3.gguf");
    }
    // Hostile seeds: a deepseek2 file with every key a config needs, and one thing wrong.
    const auto deepseek2 = [&](const std::function<void(sy::GgufWriter&)>& wrong) {
      sy::GgufWriter w;
      w.set_string("general.architecture", "deepseek2");
      w.set_u32("deepseek2.block_count", 2);
      w.set_u32("deepseek2.embedding_length", 64);
      w.set_u32("deepseek2.feed_forward_length", 128);
      w.set_u32("deepseek2.attention.head_count", 4);
      w.set_f32("deepseek2.attention.layer_norm_rms_epsilon", 1e-6f);
      w.set_u32("deepseek2.attention.kv_lora_rank", 32);
      w.set_u32("deepseek2.rope.dimension_count", 16);
      w.set_u32("deepseek2.attention.key_length", 48);
      w.set_u32("deepseek2.attention.value_length", 32);
      w.set_u32("deepseek2.expert_count", 16);
      w.set_u32("deepseek2.expert_used_count", 2);
      w.set_u32("deepseek2.expert_feed_forward_length", 32);
      w.set_u32("deepseek2.expert_gating_func", 2);
      w.set_u32("deepseek2.vocab_size", 8);
      w.add_tensor("output.weight", sy::DType::f32, {8, 4}, [&](std::byte* o) { fill_random(o, 128); });
      wrong(w);
      return w;
    };
    deepseek2([](sy::GgufWriter& w) { w.set_i32("deepseek2.block_count", -1); }).write(corpus / "hostile-block-count-negative.gguf");
    deepseek2([](sy::GgufWriter& w) { w.set_u32s("deepseek2.block_count", {2, 2}); }).write(corpus / "hostile-block-count-array.gguf");
    deepseek2([](sy::GgufWriter& w) { w.set_u64("deepseek2.block_count", ~0ULL); }).write(corpus / "hostile-block-count-u64-max.gguf");
    deepseek2([](sy::GgufWriter& w) { w.set_u32("deepseek2.expert_gating_func", 99); }).write(corpus / "hostile-gating-func-99.gguf");
    deepseek2([&](sy::GgufWriter& w) {
      w.add_tensor("blk.0.ffn_up_exps.weight", sy::DType::f32, {32, 2, 8}, [&](std::byte* o) { fill_random(o, 2048); });
    }).write(corpus / "hostile-experts-32-of-16.gguf");
    deepseek2([&](sy::GgufWriter& w) {
      w.add_tensor("blk.0.attn_norm.weight", sy::DType::i32, {64}, [&](std::byte* o) { fill_random(o, 256); });
    }).write(corpus / "hostile-i32-weight.gguf");
    deepseek2([&](sy::GgufWriter& w) {
      std::string name = "\x1b[31m\x1b]0;title\x07";
      name += std::string(3000 - name.size(), 'n');
      w.add_tensor(name, sy::DType::f32, {1}, [&](std::byte* o) { fill_random(o, 4); });
    }).write(corpus / "hostile-escape-tensor-name.gguf");
    {
      // A vocabulary whose token 7 repeats the spelling of token 5.
      sy::GgufWriter w;
      w.set_string("general.architecture", "deepseek2");
      w.set_string("tokenizer.ggml.model", "gpt2");
      w.set_string("tokenizer.ggml.pre", "qwen2");
      std::vector<std::string> tokens;
      for (int b = 0; b < 256; ++b) tokens.emplace_back(sy::text::byte_symbol(static_cast<std::uint8_t>(b)));
      tokens[7] = tokens[5];
      w.set_strings("tokenizer.ggml.tokens", tokens);
      w.write(corpus / "hostile-vocabulary-repeated-spelling.gguf");
    }
  }
  std::size_t seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const std::filesystem::path seed = entry.path();
    CAPTURE(seed);
    const std::string bytes = read_file(seed);
    CHECK(bytes.size() <= 4096);  // scripts/ci-fuzz.sh's max_len for fuzz_gguf
    CHECK_NOTHROW(sy::parse_gguf_bytes(bytes, seed));
    ++seeds;
  }
  CHECK(seeds >= 3);
}
