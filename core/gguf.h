#pragma once
// GGUF files (ggml's single-file model format, versions 2 and 3): the metadata key-value pairs and
// the tensor directory, validated field by field before anything trusts them, and zero-copy views
// of the tensor data in a read-only mapping of the file.
//
// Layout, little-endian: "GGUF", u32 version, u64 tensor count, u64 metadata count; the metadata
// (string key, u32 value type, value); the tensor infos (string name, u32 n_dims, u64 ne[n_dims]
// with ne[0] the contiguous dimension, u32 ggml_type, u64 offset into the data section); padding to
// `general.alignment` (default 32); the data section. A string is a u64 byte length and the bytes.
// A split set ("name-00001-of-00003.gguf", ...) holds the metadata in its first file and each
// file's tensors in that file; `split.no`, `split.count` and `split.tensors.count` describe it.
//
// Errors are InputError naming the file, the item (metadata key, tensor) and what is wrong: exit 1
// for wrong content, exit 2 for a file that cannot be opened or mapped.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace switchyard {

// The numbers are GGUF's (gguf_type).
enum class GgufValueType : std::uint32_t { u8, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };
const char* gguf_value_type_name(GgufValueType type);  // "u32", "string", "array"

// One metadata value. Strings and the elements of arrays are views into the file's bytes, valid
// as long as the GgufFile that holds the value (or a copy of it) lives. Arrays of arrays are
// rejected by the reader, so an array's elements are scalars or strings.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }
  // Scalars: the value when its type fits the question, nullopt otherwise. as_int takes any
  // integer type (not bool); a u64 above INT64_MAX gives nullopt. as_number takes integers and floats.
  std::optional<std::int64_t> as_int() const;
  std::optional<double> as_number() const;
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;

  // Arrays: the elements' type (meaningless for a scalar) and their count (0 for a scalar).
  GgufValueType element_type() const { return element_type_; }
  std::size_t size() const { return static_cast<std::size_t>(count_); }
  // The elements converted, in order. Each throws InputError (exit 1) naming the key and the file
  // when the value is not an array of that kind: ints() takes integer elements (a u64 element above
  // INT64_MAX is an error too), numbers() integer or float elements, strings() string elements.
  std::vector<std::int64_t> ints() const;
  std::vector<double> numbers() const;
  std::vector<std::string_view> strings() const;
  // The string elements without a copy (empty for any other value): tokenizer.ggml.tokens holds
  // 100k+ entries.
  const std::vector<std::string_view>& string_elements() const { return strings_; }

  std::string_view key() const { return key_; }

 private:
  friend struct GgufParser;
  friend class GgufFile;  // with_overrides
  [[noreturn]] void wrong_kind(const char* wanted) const;

  GgufValueType type_ = GgufValueType::u8;
  GgufValueType element_type_ = GgufValueType::u8;
  std::string_view key_;
  const std::filesystem::path* file_ = nullptr;  // for errors; owned by the GgufFile's contents
  const std::byte* scalar_or_elements_ = nullptr;  // a scalar's bytes, or the first element of a fixed-size array
  std::uint64_t count_ = 0;                         // array elements
  std::string_view text_;                           // a string's bytes
  std::vector<std::string_view> strings_;           // an array of strings
};

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;   // row-major, outermost first: ne reversed (a Linear weight [out, in] as HF has it)
  std::size_t file = 0;              // index into GgufFile::files()
  std::uint64_t offset = 0;          // absolute byte offset of the data in that file
  std::uint64_t bytes = 0;           // storage_bytes(dtype, elements)
};

struct GgufContents;

// A metadata value given in place of the file's (llama.cpp's --override-kv KEY=TYPE:VALUE, TYPE
// one of int, float, bool, str), held as i64, f64, bool or string.
struct GgufOverride {
  std::string key;
  GgufValueType type = GgufValueType::string;
  std::int64_t integer = 0;
  double number = 0;
  bool flag = false;
  std::string text;
};
// Parses "KEY=TYPE:VALUE" (bool: true or false; int: a whole number; float: a finite number).
// InputError, exit 2 (a usage error), quoting the text and saying what is wrong.
GgufOverride parse_gguf_override(std::string_view spec);

// An open GGUF model: every file mapped read-only, every field checked. Copies share the mappings.
class GgufFile {
 public:
  // A .gguf file; any file of a split set "<stem>-NNNNN-of-MMMMM.gguf" (opens all MMMMM of them,
  // from the first, and checks split.no / split.count / split.tensors.count where present); or a
  // directory holding exactly one model (one .gguf file, or the files of one split set).
  static GgufFile open(const std::filesystem::path& path);

  // Metadata of the first file (a split set's later files carry only their split.* keys).
  const GgufValue* find(std::string_view key) const;
  const std::vector<GgufValue>& metadata() const;  // in file order
  // Typed getters: nullopt when the key is absent; a present key of the wrong type is an
  // InputError (exit 1) naming the key, the file, the type wanted and the type found.
  // integer() takes any integer type; number() any integer or float type; flag() a bool.
  std::optional<std::string> string(std::string_view key) const;
  std::optional<std::int64_t> integer(std::string_view key) const;
  std::optional<double> number(std::string_view key) const;
  std::optional<bool> flag(std::string_view key) const;

  // Every tensor of every file, file by file in each file's tensor-info order.
  const std::vector<GgufTensorInfo>& tensors() const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // A view of the tensor's bytes in the mapping, keeping the mapping alive (Storage with
  // read_only_pages for a mapped file). Zero-copy whenever the data is aligned for its elements,
  // which `general.alignment` >= 8 guarantees; otherwise an aligned copy of its own.
  Tensor tensor(const GgufTensorInfo& info) const;

  const std::vector<std::filesystem::path>& files() const;
  std::uint64_t total_file_bytes() const;
  // Each file's whole bytes as held: the read-only mapping (or parse_gguf_bytes' memory).
  std::vector<std::span<const std::byte>> file_views() const;
  std::uint32_t version() const;    // the first file's: 2 or 3
  std::uint64_t alignment() const;  // general.alignment, or 32
  std::uint64_t data_offset(std::size_t file) const;  // where that file's data section starts

  // The same file with these values in place of the file's metadata values of the same keys (or
  // beside them, for a key the file lacks): what every read of the copy's metadata sees. The
  // tensors are the file's.
  GgufFile with_overrides(std::span<const GgufOverride> overrides) const;

 private:
  friend struct GgufParser;
  std::shared_ptr<const GgufContents> contents_;
};

// The same checks on one file's bytes held in memory; `file` names it in errors. The result views
// `bytes`, which must outlive it (its tensors' Storage does not own them and is not read-only pages).
GgufFile parse_gguf_bytes(std::string_view bytes, const std::filesystem::path& file);

// The name ggml gives a ggml_type number ("Q4_K", "IQ2_XXS"), nullptr for a number it has none for.
const char* ggml_type_name(std::uint32_t ggml_type);

}  // namespace switchyard
