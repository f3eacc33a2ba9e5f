#pragma once
// SafetensorsWriter: writes one .safetensors file in a single pass with bounded memory. The tensor
// list (name, dtype, shape) is given up front, so the header (8-byte little-endian length, JSON with
// "__metadata__": {"format": "pt"}, padded with spaces to a multiple of 8 bytes as the safetensors
// crate pads it) goes out first; then each tensor's bytes follow in the order given, in chunks of
// any size. The writer counts every tensor's bytes and refuses too many or too few. Unlike the crate,
// it keeps the caller's order rather than sorting by dtype size, so a checkpoint's data follows its
// module tree; offsets stay aligned to each dtype as long as tensors hold even element counts.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/dtype.h"

namespace switchyard {

struct SafetensorsEntry {
  std::string name;                 // "model.layers.0.mlp.gate_proj.weight"
  DType dtype = DType::f32;         // a dtype safetensors knows (not a ggml block type)
  std::vector<std::int64_t> shape;  // [out_features, in_features] for a Linear weight
  std::uint64_t bytes() const;
};

// The padded JSON header for `tensors`, their data laid out contiguously in the order given.
// Throws InputError naming `file` for a dtype safetensors cannot store or a duplicate name.
std::string safetensors_header_json(const std::vector<SafetensorsEntry>& tensors, const std::filesystem::path& file);

class SafetensorsWriter {
 public:
  // Writes the header to a temporary file beside `file` (AtomicFile): `file` itself is either as
  // it was or, after finish(), complete; never half written. Throws InputError naming the file.
  SafetensorsWriter(std::filesystem::path file, std::vector<SafetensorsEntry> tensors);
  ~SafetensorsWriter();  // an unfinished file's temporary is removed; `file` is left as it was
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Starts the next tensor; `name` must be the next one in the list and the previous tensor complete.
  void begin_tensor(std::string_view name);
  // Appends bytes to the current tensor; more than it holds is an error.
  void write(std::span<const std::byte> bytes);
  // Checks that every tensor got all its bytes, flushes to disk and renames the temporary over
  // `file`. Throws InputError otherwise, and then `file` is as it was.
  void finish();

  const std::filesystem::path& file() const { return file_; }
  std::uint64_t header_bytes() const { return header_bytes_; }  // 8 + padded JSON length
  std::uint64_t data_bytes() const { return data_bytes_; }      // sum of the tensors' bytes

 private:
  [[noreturn]] void fail(const std::string& what) const;
  void write_all(const void* data, std::size_t size);
  void check_current_complete() const;

  std::filesystem::path file_;
  std::vector<SafetensorsEntry> tensors_;
  std::unique_ptr<AtomicFile> out_;  // null once finished
  std::size_t current_ = 0;           // index of the tensor being written; tensors_.size() before the first
  std::uint64_t current_written_ = 0; // bytes of tensors_[current_] written so far
  bool started_ = false;
  bool finished_ = false;
  std::uint64_t header_bytes_ = 0;
  std::uint64_t data_bytes_ = 0;
};

}  // namespace switchyard
