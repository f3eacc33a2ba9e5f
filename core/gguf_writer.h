#pragma once
// GgufWriter: writes a GGUF version 3 file (core/gguf.h gives the layout) with bounded memory: the
// metadata and tensor infos are built in memory (kilobytes to a few MB for a tokenizer), then each
// tensor's bytes are made by its `fill` callback into one reused buffer and written out, so the
// peak is the largest tensor, not the file. Files go through AtomicFile: a failure leaves no half file.
//
// Metadata is written in the order first set; setting a key again replaces its value in place.
// Tensors are written in the order added, each at the next multiple of the alignment.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/gguf.h"

namespace switchyard {

class GgufWriter {
 public:
  // `alignment`: a power of two; other than 32 it is recorded as general.alignment (u32), the
  // first key. Throws std::invalid_argument otherwise.
  explicit GgufWriter(std::uint32_t alignment = 32);

  void set_u8(std::string key, std::uint8_t value);
  void set_i8(std::string key, std::int8_t value);
  void set_u16(std::string key, std::uint16_t value);
  void set_i16(std::string key, std::int16_t value);
  void set_u32(std::string key, std::uint32_t value);
  void set_i32(std::string key, std::int32_t value);
  void set_u64(std::string key, std::uint64_t value);
  void set_i64(std::string key, std::int64_t value);
  void set_f32(std::string key, float value);
  void set_f64(std::string key, double value);
  void set_bool(std::string key, bool value);
  void set_string(std::string key, std::string value);

  void set_strings(std::string key, const std::vector<std::string>& values);
  void set_u8s(std::string key, const std::vector<std::uint8_t>& values);
  void set_i8s(std::string key, const std::vector<std::int8_t>& values);
  void set_u16s(std::string key, const std::vector<std::uint16_t>& values);
  void set_i16s(std::string key, const std::vector<std::int16_t>& values);
  void set_u32s(std::string key, const std::vector<std::uint32_t>& values);
  void set_i32s(std::string key, const std::vector<std::int32_t>& values);
  void set_u64s(std::string key, const std::vector<std::uint64_t>& values);
  void set_i64s(std::string key, const std::vector<std::int64_t>& values);
  void set_f32s(std::string key, const std::vector<float>& values);
  void set_f64s(std::string key, const std::vector<double>& values);
  void set_bools(std::string key, const std::vector<bool>& values);

  // `shape` row-major, outermost first (stored reversed as ne); every dimension >= 1, at most 4,
  // the last a whole number of the dtype's blocks; the dtype must have a ggml_type. `fill` writes
  // exactly storage_bytes(dtype, elements) bytes to `out` when the file is written (it may be called
  // once per write). Throws std::invalid_argument for a duplicate name or a shape GGUF cannot hold.
  void add_tensor(std::string name, DType dtype, std::vector<std::int64_t> shape, std::function<void(std::byte* out)> fill);

  // Header, metadata, tensor infos, padding, data, into `file`. Returns the bytes written. Throws
  // InputError (exit 2) naming the file when it cannot be written; `file` is then as it was.
  std::uint64_t write(const std::filesystem::path& file) const;

  // A split set as llama.cpp's gguf-split makes it: "<stem>-00001-of-0000N.gguf", ... beside `stem`
  // (a path without ".gguf"). Each file takes tensors in order until the next would take its data
  // past `max_data_bytes` (a file holds at least one tensor). The first file holds the metadata,
  // the others only the split keys; every file gets split.no (u16, from 0), split.count (u16) and,
  // the first, split.tensors.count (i32). Each file is written atomically on its own. Returns the
  // files written, in order.
  std::vector<std::filesystem::path> write_split(const std::filesystem::path& stem, std::uint64_t max_data_bytes) const;

 private:
  struct Entry {
    std::string key;
    GgufValueType type;
    std::string value;  // the bytes after the type field: scalar, string or array (element type, count, elements)
  };
  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t bytes;
    std::function<void(std::byte*)> fill;
  };

  void set(std::string key, GgufValueType type, std::string value);
  std::uint64_t write_file(const std::filesystem::path& file, const std::vector<const Entry*>& metadata,
                           std::size_t first_tensor, std::size_t end_tensor) const;

  std::uint32_t alignment_;
  std::vector<Entry> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace switchyard
