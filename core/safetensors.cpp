#include "core/safetensors.h"

#include <cstdint>
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace switchyard {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw InputError(file.string() + ": " + what);
}

std::uint64_t checked_elements(const std::vector<std::int64_t>& shape, const std::filesystem::path& file,
                               const std::string& tensor) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) fail(file, "tensor '" + tensor + "' has a negative dimension");
    if (d != 0 && n > UINT64_MAX / static_cast<std::uint64_t>(d)) fail(file, "tensor '" + tensor + "' shape overflows");
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

SafetensorsTensor parse_entry(const std::string& name, const json& entry, std::uint64_t data_bytes,
                              const std::filesystem::path& file) {
  const std::string where = "tensor '" + name + "' ";
  if (!entry.is_object()) fail(file, where + "entry is not an object");
  SafetensorsTensor t;
  t.name = name;
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) fail(file, where + "has no dtype string");
  const std::string dtype = entry["dtype"].get<std::string>();
  const auto parsed = dtype_from_safetensors(dtype);
  if (!parsed) fail(file, where + "has unsupported dtype '" + dtype + "'");
  t.dtype = *parsed;
  if (!entry.contains("shape") || !entry["shape"].is_array()) fail(file, where + "has no shape list");
  if (entry["shape"].size() > 8) fail(file, where + "has more than 8 dimensions");
  for (const json& d : entry["shape"]) {
    if (!d.is_number_unsigned()) fail(file, where + "has a shape entry that is not a non-negative integer");
    if (d.get<std::uint64_t>() > (1ULL << 48)) fail(file, where + "has an implausible dimension " + d.dump());
    t.shape.push_back(d.get<std::int64_t>());
  }
  if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2 ||
      !entry["data_offsets"][0].is_number_unsigned() || !entry["data_offsets"][1].is_number_unsigned())
    fail(file, where + "needs data_offsets [begin, end] of non-negative integers");
  t.begin = entry["data_offsets"][0].get<std::uint64_t>();
  t.end = entry["data_offsets"][1].get<std::uint64_t>();
  if (t.begin > t.end) fail(file, where + "has data_offsets that end before they begin");
  if (t.end > data_bytes)
    fail(file, where + "extends to byte " + std::to_string(t.end) + " of a data section of " +
                   std::to_string(data_bytes) + " bytes (truncated file?)");
  const std::uint64_t elements = checked_elements(t.shape, file, name);
  const std::uint64_t element_bytes = static_cast<std::uint64_t>(dtype_info(t.dtype).block_bytes);
  if (elements > UINT64_MAX / element_bytes || elements * element_bytes != t.end - t.begin)
    fail(file, where + "spans " + std::to_string(t.end - t.begin) + " bytes but its shape and dtype need " +
                   std::to_string(elements * element_bytes));
  return t;
}

// The header length from the file's first 8 bytes (`prefix`), checked against the file's size.
std::uint64_t checked_header_length(std::string_view prefix, std::uint64_t file_bytes,
                                    const std::filesystem::path& file) {
  if (file_bytes < 8 || prefix.size() < 8)
    fail(file, "too short to be a safetensors file (" + std::to_string(file_bytes) + " bytes)");
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<unsigned char>(prefix[i]);
  if (header_bytes > kMaxSafetensorsHeaderBytes) fail(file, "header length " + std::to_string(header_bytes) + " is not plausible");
  if (header_bytes > file_bytes - 8) fail(file, "header length exceeds the file (truncated file?)");
  return header_bytes;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const std::string& header_json, std::uint64_t file_bytes,
                                           const std::filesystem::path& file) {
  SafetensorsHeader h;
  h.file = file;
  h.file_bytes = file_bytes;
  h.header_bytes = header_json.size();
  h.data_offset = 8 + h.header_bytes;
  if (h.data_offset > file_bytes) fail(file, "header runs past the end of the file");
  const std::uint64_t data_bytes = file_bytes - h.data_offset;
  const json j = json::parse(header_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(file, "header is not valid JSON");
  if (!j.is_object()) fail(file, "header is not a JSON object");
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") continue;
    if (name.empty()) fail(file, "header has a tensor with an empty name");
    h.tensors.push_back(parse_entry(name, entry, data_bytes, file));
  }
  // By (begin, end), as the safetensors crate does: an empty tensor sorts before one that starts at
  // its offset, so whether a file is accepted does not depend on the order of its header keys.
  std::sort(h.tensors.begin(), h.tensors.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (std::size_t i = 1; i < h.tensors.size(); ++i)
    if (h.tensors[i].begin < h.tensors[i - 1].end)
      fail(file, "tensors '" + h.tensors[i - 1].name + "' and '" + h.tensors[i].name + "' overlap");
  return h;
}

SafetensorsHeader read_safetensors_header(const std::filesystem::path& file) {
  std::error_code ec;
  const std::uint64_t file_bytes = std::filesystem::file_size(file, ec);
  if (ec) fail(file, "cannot read (" + ec.message() + ")");
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, "cannot open");
  char prefix[8] = {};
  if (file_bytes >= 8 && !in.read(prefix, 8)) fail(file, "cannot read the header length");
  const std::uint64_t header_bytes = checked_header_length(std::string_view(prefix, 8), file_bytes, file);
  std::string header(header_bytes, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_bytes))) fail(file, "cannot read the header");
  return parse_safetensors_header(header, file_bytes, file);
}

SafetensorsHeader parse_safetensors_bytes(std::string_view file_bytes, const std::filesystem::path& file) {
  const std::uint64_t header_bytes = checked_header_length(file_bytes.substr(0, 8), file_bytes.size(), file);
  return parse_safetensors_header(std::string(file_bytes.substr(8, header_bytes)), file_bytes.size(), file);
}

CheckpointIndex read_checkpoint_index(const std::filesystem::path& dir) {
  CheckpointIndex index;
  std::vector<std::filesystem::path> shard_files;
  const std::filesystem::path index_file = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index_file)) {
    std::ifstream in(index_file);
    std::stringstream text;
    text << in.rdbuf();
    const json j = json::parse(text.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      fail(index_file, "needs a \"weight_map\" object of tensor name -> shard file");
    std::set<std::string> names;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) fail(index_file, "weight_map entry '" + tensor + "' is not a file name");
      const std::string shard_name = shard.get<std::string>();
      if (shard_name.find('/') != std::string::npos || shard_name == "..")
        fail(index_file, "shard '" + shard_name + "' must be a file in the model directory");
      names.insert(shard_name);
    }
    for (const std::string& name : names) shard_files.push_back(dir / name);
  } else if (std::filesystem::exists(dir / "model.safetensors")) {
    // What save_pretrained writes for a single shard; other .safetensors files beside it
    // (adapters, reference outputs) are not part of the model.
    shard_files.push_back(dir / "model.safetensors");
  } else {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (entry.path().extension() == ".safetensors") shard_files.push_back(entry.path());
    if (ec) fail(dir, "cannot list the model directory (" + ec.message() + ")");
    std::sort(shard_files.begin(), shard_files.end());
    if (shard_files.empty()) fail(dir, "holds no .safetensors files");
  }
  std::map<std::string, std::size_t> seen;
  for (const std::filesystem::path& file : shard_files) {
    index.shards.push_back(read_safetensors_header(file));
    const std::size_t shard = index.shards.size() - 1;
    for (const SafetensorsTensor& t : index.shards.back().tensors) {
      if (!seen.emplace(t.name, shard).second) fail(file, "tensor '" + t.name + "' also appears in another shard");
      index.tensors.push_back(CheckpointTensor{t, shard});
    }
  }
  return index;
}

}  // namespace switchyard
