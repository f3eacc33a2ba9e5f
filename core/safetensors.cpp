#include "core/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"
#include "core/input_file.h"

namespace switchyard {
namespace {

using nlohmann::json;

namespace fs = std::filesystem;

// What the file holds is wrong (exit 1); a file that cannot be read is InputFile's error (exit 2).
[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw InputError(file.string() + ": " + what, kExitBadContent);
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
  const json j = parse_json<json>(header_json, file.string() + " (its header)");
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
  // The crate's rule: the tensors tile the data section from byte 0 to its last byte, without a gap
  // or an overlap. A header length a few bytes off shifts the data section, which breaks the
  // tiling; without the rule such a file would load with every tensor read a few bytes off.
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < h.tensors.size(); ++i) {
    const SafetensorsTensor& t = h.tensors[i];
    if (t.begin < covered)
      fail(file, "tensors '" + h.tensors[i - 1].name + "' and '" + t.name + "' overlap");
    if (t.begin > covered)
      fail(file, "tensor '" + t.name + "' begins at byte " + std::to_string(t.begin) + " of the data section, but " +
                     (i == 0 ? std::string("the data section begins at byte 0")
                             : "the tensor before it ('" + h.tensors[i - 1].name + "') ends at byte " +
                                   std::to_string(covered)) +
                     "; safetensors data must be contiguous (a gap of " + std::to_string(t.begin - covered) + " bytes)");
    covered = t.end;
  }
  if (covered != data_bytes)
    fail(file, "the data section holds " + std::to_string(data_bytes) + " bytes but its tensors cover " +
                   std::to_string(covered) + " (" + std::to_string(data_bytes - covered) +
                   " bytes after the last tensor; is the header length at the start of the file wrong, or is "
                   "something appended?)");
  return h;
}

SafetensorsHeader read_safetensors_header(const fs::path& file) {
  return read_safetensors_header(file, "safetensors file");
}

SafetensorsHeader read_safetensors_header(const fs::path& file, std::string_view what) {
  const InputFile in = InputFile::open(file, what);
  char prefix[8] = {};
  if (in.size() >= 8) in.read_at(0, prefix, 8);
  const std::uint64_t header_bytes = checked_header_length(std::string_view(prefix, 8), in.size(), file);
  std::string header(header_bytes, '\0');
  in.read_at(8, header.data(), header_bytes);
  return parse_safetensors_header(header, in.size(), file);
}

SafetensorsHeader parse_safetensors_bytes(std::string_view file_bytes, const std::filesystem::path& file) {
  const std::uint64_t header_bytes = checked_header_length(file_bytes.substr(0, 8), file_bytes.size(), file);
  return parse_safetensors_header(std::string(file_bytes.substr(8, header_bytes)), file_bytes.size(), file);
}

CheckpointIndex read_checkpoint_index(const fs::path& dir) {
  // Whether anything is at `path`, a dangling or looping link included, so that reading it
  // reports what is wrong instead of the path being skipped. No filesystem call here throws.
  const auto present = [](const fs::path& path) {
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(path, ec);
    return ec ? ec != std::errc::no_such_file_or_directory : fs::exists(status);
  };
  CheckpointIndex index;
  std::vector<fs::path> shard_files;
  const char* shard_what = "safetensors file";
  const fs::path index_file = dir / "model.safetensors.index.json";
  if (present(index_file)) {
    const std::string text = read_input_file(index_file, "safetensors index", kMaxIndexJsonBytes);
    const json j = parse_json<json>(text, index_file.string());
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      fail(index_file, "needs a \"weight_map\" object of tensor name -> shard file");
    std::set<std::string> names;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) fail(index_file, "weight_map entry '" + tensor + "' is not a file name");
      const std::string shard_name = shard.get<std::string>();
      if (shard_name.empty() || shard_name.find('/') != std::string::npos || shard_name == "." || shard_name == "..")
        fail(index_file, "shard '" + shard_name + "' must be a file in the model directory");
      names.insert(shard_name);
    }
    for (const std::string& name : names) shard_files.push_back(dir / name);
    shard_what = "shard named in model.safetensors.index.json";
  } else if (present(dir / "model.safetensors")) {
    // What save_pretrained writes for a single shard; other .safetensors files beside it
    // (adapters, reference outputs) are not part of the model.
    shard_files.push_back(dir / "model.safetensors");
  } else {
    std::error_code ec;
    fs::directory_iterator entry(dir, ec);
    for (; !ec && entry != fs::directory_iterator(); entry.increment(ec))
      if (entry->path().extension() == ".safetensors") shard_files.push_back(entry->path());
    if (ec) throw InputError(dir.string() + ": cannot list the model directory (" + ec.message() + ")");
    std::sort(shard_files.begin(), shard_files.end());
    if (shard_files.empty())
      throw InputError(dir.string() + ": holds no .safetensors files (is this the checkpoint directory?)");
  }
  std::map<std::string, std::size_t> seen;
  for (const fs::path& file : shard_files) {
    index.shards.push_back(read_safetensors_header(file, shard_what));
    const std::size_t shard = index.shards.size() - 1;
    for (const SafetensorsTensor& t : index.shards.back().tensors) {
      if (!seen.emplace(t.name, shard).second) fail(file, "tensor '" + t.name + "' also appears in another shard");
      index.tensors.push_back(CheckpointTensor{t, shard});
    }
  }
  return index;
}

}  // namespace switchyard
