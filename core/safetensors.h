#pragma once
// safetensors headers: the tensor directory of a .safetensors file (8-byte little-endian header
// length, a JSON header, then the data). Every field is validated before anyone trusts it, since
// the file may be truncated or hostile. Also reads sharded checkpoints through
// model.safetensors.index.json. Tensor data is not read here.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace switchyard {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets within the data section (after the header)
  std::uint64_t end = 0;
};

struct SafetensorsHeader {
  std::filesystem::path file;
  std::uint64_t header_bytes = 0;  // length of the JSON header
  std::uint64_t data_offset = 0;   // 8 + header_bytes: where the data section starts in the file
  std::uint64_t file_bytes = 0;
  std::vector<SafetensorsTensor> tensors;  // in data order
};

// Largest header we accept; real headers of 671B checkpoints are well under 1 MiB per shard.
constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ULL << 20;

// Validates the header against `file_bytes` (the file's size) by the reference reader's rules (the
// Rust safetensors crate): every entry well-formed, each tensor's span exactly its shape times its
// element size, and the tensors, sorted by offset, tiling the data section from byte 0 to its end
// with no gap, overlap or trailing byte. Throws InputError (exit 1) naming `file` and, where one is
// at fault, the tensor.
SafetensorsHeader parse_safetensors_header(const std::string& header_json, std::uint64_t file_bytes,
                                           const std::filesystem::path& file);
// Reads the header of `file` through InputFile: only a regular file, never blocking (exit 2 when it
// cannot be read as one). `what` names the file's role in those errors ("safetensors file").
SafetensorsHeader read_safetensors_header(const std::filesystem::path& file);
SafetensorsHeader read_safetensors_header(const std::filesystem::path& file, std::string_view what);
// The same checks on a whole file held in memory (`file_bytes`: length prefix, header, data);
// `file` names it in errors. For fuzzing and for callers that already hold the bytes.
SafetensorsHeader parse_safetensors_bytes(std::string_view file_bytes, const std::filesystem::path& file);

// Every tensor of a checkpoint directory: model.safetensors.index.json (a regular file of at most
// kMaxIndexJsonBytes) with its shards, or model.safetensors, or the *.safetensors files in the
// directory. Each tensor remembers its shard. A shard that is missing or not a regular file is an
// InputError (exit 2) naming it; no filesystem call on the user's paths throws anything else.
struct CheckpointTensor {
  SafetensorsTensor tensor;
  std::size_t shard = 0;  // index into `shards`
};
struct CheckpointIndex {
  std::vector<SafetensorsHeader> shards;
  std::vector<CheckpointTensor> tensors;
};
CheckpointIndex read_checkpoint_index(const std::filesystem::path& model_dir);

}  // namespace switchyard
