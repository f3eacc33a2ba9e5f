// Checkpoint: memory-mapped, zero-copy weights with dtype and shape checked on every request.
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/random_weights.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

using namespace switchyard;

namespace {

std::vector<char> read_all(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("core: checkpoint tensors are zero-copy views of the mapped file") {
  const auto dir = std::filesystem::path(testing::source_path("tests/fixtures/fidelity/mixtral"));
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const std::vector<char> file = read_all(dir / "model.safetensors");
  // Every tensor's bytes are exactly where the header says, and nothing was copied.
  std::size_t checked = 0;
  for (const CheckpointTensor& ct : checkpoint.index().tensors) {
    const Tensor t = checkpoint.get(ct.tensor.name, ct.tensor.shape, {DType::f32});
    const std::size_t offset = checkpoint.index().shards[ct.shard].data_offset + ct.tensor.begin;
    REQUIRE(t.bytes() == ct.tensor.end - ct.tensor.begin);
    CHECK(std::memcmp(t.data(), file.data() + offset, t.bytes()) == 0);
    ++checked;
  }
  CHECK(checked == checkpoint.index().tensors.size());
  const Tensor a = checkpoint.get("model.embed_tokens.weight", {256, 32}, {DType::f32});
  const Tensor b = checkpoint.get("model.embed_tokens.weight", {256, 32}, {DType::f32, DType::bf16});
  CHECK(a.data() == b.data());
  // Weights are random, not zero.
  const float* w = a.data_as<float>();
  CHECK(std::any_of(w, w + a.numel(), [](float v) { return v != 0.0f; }));
  // A row view shares the storage.
  CHECK(a.rows(3, 2).data_as<float>() == w + 3 * 32);
}

TEST_CASE("core: checkpoint requests that disagree with the file name the tensor") {
  const auto dir = std::filesystem::path(testing::source_path("tests/fixtures/fidelity/mixtral"));
  const Checkpoint checkpoint = Checkpoint::open(dir);
  auto message = [&](auto&& request) {
    try {
      request();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string shape = message([&] { checkpoint.get("model.norm.weight", {64}, {DType::f32}); });
  CHECK(shape.find("model.norm.weight") != std::string::npos);
  CHECK(shape.find("[32]") != std::string::npos);
  CHECK(shape.find("[64]") != std::string::npos);
  const std::string dtype = message([&] { checkpoint.get("model.norm.weight", {32}, {DType::bf16}); });
  CHECK(dtype.find("is f32 but this operator takes bf16") != std::string::npos);
  const std::string missing = message([&] { checkpoint.get("model.layers.9.mlp.gate.weight", {4, 32}, {DType::f32}); });
  CHECK(missing.find("not in the checkpoint") != std::string::npos);
}

TEST_CASE("core: tensors own aligned host memory or share storage") {
  Tensor t = Tensor::zeros(DType::f32, {4, 8});
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
  CHECK(t.bytes() == 4 * 8 * 4);
  t.data_as<float>()[9] = 1.5f;
  CHECK(t.reshaped({8, 4}).data_as<float>()[9] == 1.5f);
  CHECK(t.rows(1, 1).data_as<float>()[1] == 1.5f);
  CHECK_THROWS(t.rows(3, 2));
  CHECK_THROWS(t.reshaped({5, 5}));
  CHECK_THROWS_AS(MappedFile::open("/nonexistent/model.safetensors"), InputError);
}

namespace {

// An E4M3 byte's value from its fields, in double (the test's own decoder).
double e4m3_value(std::uint8_t byte) {
  const int exponent = (byte >> 3) & 15, mantissa = byte & 7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return byte & 0x80 ? -magnitude : magnitude;
}

// A safetensors file of the given tensors (name, dtype name, shape, bytes), in order.
struct RawTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};
void write_safetensors(const std::filesystem::path& file, const std::vector<RawTensor>& tensors) {
  std::string header = "{", data;
  for (const RawTensor& t : tensors) {
    std::string shape;
    for (std::int64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" + t.dtype +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::string out(8, '\0');
  const std::uint64_t length = header.size();
  std::memcpy(out.data(), &length, 8);
  core_testing::write_file(file, out + header + data);
}

}  // namespace

TEST_CASE("core: a block-scaled FP8 matrix converts with its weight_scale_inv tiles") {
  core_testing::TempDir dir;
  core_testing::SeededRng rng;
  INFO("seed " << rng.seed);
  // 200 x 300: partial 128-tiles in both directions (2 x 3 tiles).
  const std::int64_t rows = 200, columns = 300;
  std::string weight = rng.bytes(static_cast<std::size_t>(rows * columns));
  for (char& b : weight)
    if ((b & 0x7F) == 0x7F) b = 0x3C;  // no NaN codes
  std::vector<float> scales(6);
  for (float& s : scales) s = static_cast<float>(rng.between(1, 1000)) / 4096.0f;
  std::string scale_bytes(reinterpret_cast<const char*>(scales.data()), scales.size() * sizeof(float));
  write_safetensors(dir / "model.safetensors",
                    {{"layer.weight", "F8_E4M3", {rows, columns}, weight},
                     {"layer.weight_scale_inv", "F32", {2, 3}, scale_bytes},
                     {"bare.weight", "F8_E4M3", {2, 2}, std::string(4, '\x38')}});
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  CHECK(checkpoint.stored_dtype("layer.weight") == DType::f8_e4m3);
  const Tensor f32 = checkpoint.get_converted("layer.weight", {rows, columns}, DType::f32);
  const Tensor bf16 = checkpoint.get_converted("layer.weight", {rows, columns}, DType::bf16);
  REQUIRE(f32.dtype() == DType::f32);
  REQUIRE(bf16.dtype() == DType::bf16);
  int wrong = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < columns; ++c) {
      const auto byte = static_cast<std::uint8_t>(weight[static_cast<std::size_t>(r * columns + c)]);
      // e4m3 has 4 significant bits and the scale 10: their product is exact in f32.
      const double expected = e4m3_value(byte) * scales[static_cast<std::size_t>((r / 128) * 3 + c / 128)];
      const float got = f32.data_as<float>()[r * columns + c];
      std::uint32_t bits = static_cast<std::uint32_t>(bf16.data_as<std::uint16_t>()[r * columns + c]) << 16;
      float rounded;
      std::memcpy(&rounded, &bits, 4);
      if ((got != expected || std::fabs(rounded - got) > std::fabs(got) * 0.004) && wrong++ < 5)
        FAIL_CHECK("(" << r << ", " << c << "): " << got << " (bf16 " << rounded << ") instead of " << expected);
    }
  CHECK(wrong == 0);
  // Without its scales: a clear error naming the tensor and the missing one.
  const std::string bare = core_testing::input_error_message([&] { checkpoint.get_converted("bare.weight", {2, 2}, DType::f32); });
  CHECK(core_testing::contains(bare, "'bare.weight' has no 'bare.weight_scale_inv'"));
}

TEST_CASE("core: f32 to E4M3 rounds to nearest even and saturates at 448") {
  int wrong = 0;
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;  // NaN
    const auto byte = static_cast<std::uint8_t>(code);
    const double value = e4m3_value(byte);
    // Every finite code is its own value's encoding (+0 and -0 both kept).
    if (e4m3_bits_from_f32(static_cast<float>(value)) != byte && wrong++ < 5)
      FAIL_CHECK("code " << code << " (" << value << ") encodes as " << int{e4m3_bits_from_f32(static_cast<float>(value))});
    // Halfway to the next code up goes to the even one of the two.
    const int next = code + 1;
    if ((code & 0x7F) < 0x7E) {
      const double midpoint = (value + e4m3_value(static_cast<std::uint8_t>(next))) / 2;
      const std::uint8_t even = (code & 1) == 0 ? byte : static_cast<std::uint8_t>(next);
      if (e4m3_bits_from_f32(static_cast<float>(midpoint)) != even && wrong++ < 5)
        FAIL_CHECK("midpoint " << midpoint << " after code " << code);
    }
  }
  CHECK(wrong == 0);
  CHECK(e4m3_bits_from_f32(1000.0f) == 0x7E);
  CHECK(e4m3_bits_from_f32(-460.0f) == 0xFE);
  CHECK(e4m3_bits_from_f32(std::ldexp(1.0f, -12)) == 0x00);  // below half the smallest subnormal
}
