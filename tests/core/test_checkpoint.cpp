// Checkpoint: memory-mapped, zero-copy weights with dtype and shape checked on every request.
#include <cstring>
#include <fstream>

#include "core/checkpoint.h"
#include "core/error.h"
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
