// Our decoding of a GGUF that llama.cpp wrote (its llama-quantize), against llama.cpp's own Python
// reader (gguf-py) on the same rows: scripts/gguf-peer-values.py writes gguf-py's values and a
// manifest into the folder that SWITCHYARD_GGUF_PEER names; this test reads the same tensors
// through core/gguf.h and decodes them with core/quant_formats.h. It runs where that folder exists
// (the GPU machine, scripts/gpu-gguf.sh formats), and is skipped elsewhere.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/gguf.h"
#include "core/quant_formats.h"

namespace sy = switchyard;

namespace {
const char* peer_folder() { return std::getenv("SWITCHYARD_GGUF_PEER"); }
}  // namespace

TEST_CASE("gguf peer: the blocks llama.cpp's quantizer wrote decode to gguf-py's values" * doctest::skip(peer_folder() == nullptr)) {
  const std::filesystem::path folder = peer_folder();
  std::ifstream manifest_file(folder / "manifest.json");
  REQUIRE(manifest_file.good());
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  REQUIRE(manifest.size() > 0);
  std::set<std::string> types;
  for (const nlohmann::json& entry : manifest) {
    const std::string tensor = entry.at("tensor");
    CAPTURE(tensor);
    const sy::GgufFile file = sy::GgufFile::open(entry.at("file").get<std::string>());
    const sy::GgufTensorInfo* info = file.find_tensor(tensor);
    REQUIRE(info != nullptr);
    const std::int64_t rows = entry.at("rows"), columns = entry.at("columns");
    REQUIRE(info->shape.back() == columns);
    std::vector<float> expected(static_cast<std::size_t>(rows * columns));
    std::ifstream values(folder / entry.at("values").get<std::string>(), std::ios::binary);
    values.read(reinterpret_cast<char*>(expected.data()), static_cast<std::streamsize>(expected.size() * sizeof(float)));
    REQUIRE(values.good());
    std::vector<float> ours(expected.size());
    sy::quant::dequantize_rows(info->dtype, file.tensor(*info).data(), ours.data(), rows, columns);
    // The same blocks and the same arithmetic, up to the order of two float operations: within
    // one rounding of the value (2^-23 relative) or of the sub-block's scale.
    std::size_t exact = 0, off = 0;
    for (std::size_t i = 0; i < ours.size(); ++i) {
      exact += ours[i] == expected[i];
      off += std::fabs(ours[i] - expected[i]) > 4e-7f * std::fabs(expected[i]) + 1e-9f;
    }
    MESSAGE(entry.at("type").get<std::string>() << " " << tensor << ": " << exact << " of " << ours.size()
                                                << " values bit-equal, " << off << " beyond one rounding");
    CHECK(off == 0);
    types.insert(entry.at("type").get<std::string>());
  }
  CHECK(types.size() >= 2);
}
