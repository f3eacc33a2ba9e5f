#include "core/gguf.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <unordered_map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/text.h"

namespace switchyard {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; the reader reads it in place");

namespace fs = std::filesystem;

// Everything one GgufFile holds, shared by its copies; never changed after parsing, so the views
// into it (value keys, file paths in GgufValue) stay valid for as long as any copy lives.
struct GgufContents {
  std::vector<fs::path> files;                     // sized before parsing: GgufValues point at these
  // with_overrides: the contents overridden (whose files the values point at) and the overriding
  // values' keys, texts and scalars; deques, so that views into them stay put.
  std::shared_ptr<const GgufContents> base;
  std::deque<std::string> owned_text;
  std::deque<std::array<std::byte, 8>> owned_scalars;
  std::vector<std::shared_ptr<Storage>> storages;  // one per file: its whole bytes
  std::vector<std::uint64_t> data_offsets;         // per file
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;
  std::vector<GgufValue> metadata;  // the first file's
  std::unordered_map<std::string_view, std::size_t> metadata_index;
  std::vector<GgufTensorInfo> tensors;
  std::unordered_map<std::string_view, std::size_t> tensor_index;  // keys view the mapped names
};

namespace {

constexpr std::uint32_t kValueTypeCount = 13;
constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::uint32_t kMaxDims = 4;
// Far above any real model (a few dozen metadata entries, a few thousand tensors), low enough that
// a hostile count cannot make the directory cost more memory than a small multiple of the file.
constexpr std::uint64_t kMaxMetadataEntries = 1ULL << 20;
constexpr std::uint64_t kMaxTensors = 1ULL << 20;
// The fewest bytes one entry can take: a metadata entry (key length, type, a u8) and a tensor info
// (name length, n_dims, one dimension, type, offset). A count above (bytes left) / this cannot be
// true and fails before anything is allocated for it.
constexpr std::uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

struct MappedStorage final : Storage {
  MappedFile file;
};
// The caller's bytes (parse_gguf_bytes), not owned.
struct BorrowedStorage final : Storage {};

const char* const kValueTypeNames[kValueTypeCount] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                                      "bool", "string", "array", "u64", "i64", "f64"};

// Bytes of one scalar of a fixed-size type; 0 for string and array.
std::uint64_t scalar_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::u8: case GgufValueType::i8: case GgufValueType::boolean: return 1;
    case GgufValueType::u16: case GgufValueType::i16: return 2;
    case GgufValueType::u32: case GgufValueType::i32: case GgufValueType::f32: return 4;
    case GgufValueType::u64: case GgufValueType::i64: case GgufValueType::f64: return 8;
    case GgufValueType::string: case GgufValueType::array: return 0;
  }
  return 0;
}

bool is_unsigned(GgufValueType t) {
  return t == GgufValueType::u8 || t == GgufValueType::u16 || t == GgufValueType::u32 || t == GgufValueType::u64;
}
bool is_signed(GgufValueType t) {
  return t == GgufValueType::i8 || t == GgufValueType::i16 || t == GgufValueType::i32 || t == GgufValueType::i64;
}
bool is_integer(GgufValueType t) { return is_unsigned(t) || is_signed(t); }
bool is_float(GgufValueType t) { return t == GgufValueType::f32 || t == GgufValueType::f64; }

template <typename T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::uint64_t load_unsigned(const std::byte* p, GgufValueType t) {
  switch (t) {
    case GgufValueType::u8: return load<std::uint8_t>(p);
    case GgufValueType::u16: return load<std::uint16_t>(p);
    case GgufValueType::u32: return load<std::uint32_t>(p);
    default: return load<std::uint64_t>(p);
  }
}
std::int64_t load_signed(const std::byte* p, GgufValueType t) {
  switch (t) {
    case GgufValueType::i8: return load<std::int8_t>(p);
    case GgufValueType::i16: return load<std::int16_t>(p);
    case GgufValueType::i32: return load<std::int32_t>(p);
    default: return load<std::int64_t>(p);
  }
}
// An integer element as int64; nullopt for a u64 above INT64_MAX.
std::optional<std::int64_t> load_int(const std::byte* p, GgufValueType t) {
  if (is_signed(t)) return load_signed(p, t);
  const std::uint64_t u = load_unsigned(p, t);
  if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  return static_cast<std::int64_t>(u);
}
double load_number(const std::byte* p, GgufValueType t) {
  if (t == GgufValueType::f32) return load<float>(p);
  if (t == GgufValueType::f64) return load<double>(p);
  if (is_signed(t)) return static_cast<double>(load_signed(p, t));
  return static_cast<double>(load_unsigned(p, t));
}

std::string type_text(const GgufValue& v) {
  if (v.type() == GgufValueType::array) return std::string("an array of ") + gguf_value_type_name(v.element_type());
  return gguf_value_type_name(v.type());
}

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw InputError(file.string() + ": " + what, kExitBadContent);
}

// Reads one file's bytes front to back; every read checks that the bytes are there.
class ByteReader {
 public:
  ByteReader(std::string_view bytes, const fs::path& file) : bytes_(bytes), file_(file) {}

  std::uint64_t position() const { return position_; }
  std::uint64_t left() const { return bytes_.size() - position_; }
  const std::byte* here() const { return reinterpret_cast<const std::byte*>(bytes_.data()) + position_; }
  [[noreturn]] void fail(const std::string& what) const { switchyard::fail(file_, what); }

  // `item` says what is being read ("tensor 'x'"), `field` which part of it ("its offset").
  template <typename T>
  T scalar(const std::string& item, const char* field) {
    need(sizeof(T), item, field);
    const T value = load<T>(here());
    position_ += sizeof(T);
    return value;
  }
  std::string_view string(const std::string& item, const char* field) {
    const std::uint64_t length = scalar<std::uint64_t>(item, field);
    if (length > left())
      fail(item + ": " + field + " is " + std::to_string(length) + " bytes long, but the file ends " +
           std::to_string(left()) + " bytes after byte " + std::to_string(position_));
    const std::string_view text = bytes_.substr(position_, length);
    position_ += length;
    return text;
  }
  void skip(std::uint64_t bytes) { position_ += bytes; }  // bytes <= left(), checked by the caller
  void need(std::uint64_t bytes, const std::string& item, const char* field) const {
    if (bytes > left())
      fail(item + ": the file ends inside " + field + " (at byte " + std::to_string(position_) + " of " +
           std::to_string(bytes_.size()) + ")");
  }

 private:
  std::string_view bytes_;
  const fs::path& file_;
  std::uint64_t position_ = 0;
};

struct ParsedFile {
  std::uint32_t version = 3;
  std::uint64_t alignment = kDefaultAlignment;
  std::uint64_t data_offset = 0;
  std::vector<GgufValue> metadata;
  std::unordered_map<std::string_view, std::size_t> metadata_index;
  std::vector<GgufTensorInfo> tensors;
  std::vector<std::string_view> tensor_names;  // views of the names in the file's bytes
};

std::uint32_t check_version(ByteReader& in) {
  if (in.left() < 4 || std::memcmp(in.here(), "GGUF", 4) != 0) {
    const std::string_view start(reinterpret_cast<const char*>(in.here()), std::min<std::uint64_t>(4, in.left()));
    std::string shown;
    for (char c : start) {
      const auto byte = static_cast<unsigned char>(c);
      const char hex[] = {'\\', 'x', "0123456789abcdef"[byte >> 4], "0123456789abcdef"[byte & 15], '\0'};
      shown += (byte >= 32 && byte < 127 && byte != '"' && byte != '\\') ? std::string(1, c) : std::string(hex);
    }
    in.fail("not a GGUF file: it begins with \"" + shown + "\", not the magic \"GGUF\"");
  }
  in.skip(4);
  const auto version = in.scalar<std::uint32_t>("the header", "its version");
  if (version == 2 || version == 3) return version;
  if (version == 0x02000000u || version == 0x03000000u)
    in.fail("a big-endian GGUF file (version " + std::to_string(version >> 24) + "); only little-endian files are read");
  if (version == 1)
    in.fail("GGUF version 1 (32-bit counts) is not supported; versions 2 and 3 are (convert it again with a current llama.cpp)");
  in.fail("unknown GGUF version " + std::to_string(version) + "; versions 2 and 3 are supported");
}

}  // namespace

// Builds GgufValues and tensor infos from a file's bytes (a friend of both classes).
struct GgufParser {
  static GgufValue value(ByteReader& in, std::string_view key, const fs::path* file, const std::string& item);
  static ParsedFile file(std::string_view bytes, const fs::path* file);
  static void tensor_infos(ByteReader& in, std::uint64_t count, ParsedFile& out);
  static void place_tensors(ParsedFile& out, std::uint64_t file_bytes, const fs::path& file);
  // One file of a model: its path and its bytes.
  struct Part {
    fs::path file;
    std::shared_ptr<Storage> storage;
  };
  // A model of `count` files; `open_part(f)` maps file f (from 0), called only once files 0 to f - 1
  // have been read and agree with `count`: a split set's name is not trusted before its first file
  // says the same, and a part that is missing stops the reading there.
  static GgufFile assemble(std::size_t count, const std::function<Part(std::size_t)>& open_part);
};

GgufValue GgufParser::value(ByteReader& in, std::string_view key, const fs::path* file, const std::string& item) {
  GgufValue v;
  v.key_ = key;
  v.file_ = file;
  const auto type = in.scalar<std::uint32_t>(item, "its value type");
  if (type >= kValueTypeCount)
    in.fail(item + ": unknown value type " + std::to_string(type) + " (GGUF's types are 0 to 12)");
  v.type_ = static_cast<GgufValueType>(type);
  if (v.type_ == GgufValueType::string) {
    v.text_ = in.string(item, "its string value");
    return v;
  }
  if (v.type_ != GgufValueType::array) {
    in.need(scalar_bytes(v.type_), item, "its value");
    v.scalar_or_elements_ = in.here();
    if (v.type_ == GgufValueType::boolean && static_cast<std::uint8_t>(*in.here()) > 1)
      in.fail(item + ": a bool of value " + std::to_string(static_cast<unsigned>(*in.here())) + " (only 0 and 1 are valid)");
    in.skip(scalar_bytes(v.type_));
    return v;
  }
  const auto element = in.scalar<std::uint32_t>(item, "its array element type");
  if (element >= kValueTypeCount)
    in.fail(item + ": an array of unknown value type " + std::to_string(element) + " (GGUF's types are 0 to 12)");
  v.element_type_ = static_cast<GgufValueType>(element);
  if (v.element_type_ == GgufValueType::array) in.fail(item + ": an array of arrays, which this reader does not support");
  v.count_ = in.scalar<std::uint64_t>(item, "its array length");
  const std::uint64_t min_element_bytes = v.element_type_ == GgufValueType::string ? 8 : scalar_bytes(v.element_type_);
  if (v.count_ > in.left() / min_element_bytes)
    in.fail(item + ": an array of " + std::to_string(v.count_) + " " + gguf_value_type_name(v.element_type_) +
            " elements, more than the " + std::to_string(in.left()) + " bytes left in the file can hold");
  if (v.element_type_ == GgufValueType::string) {
    v.strings_.reserve(static_cast<std::size_t>(v.count_));  // bounded by the file's bytes above
    for (std::uint64_t i = 0; i < v.count_; ++i) {
      if (in.left() < 8 || load<std::uint64_t>(in.here()) > in.left() - 8)
        in.fail(item + ": string element " + std::to_string(i) + " of " + std::to_string(v.count_) +
                " runs past the end of the file (at byte " + std::to_string(in.position()) + ")");
      v.strings_.push_back(in.string(item, "a string element"));
    }
    return v;
  }
  v.scalar_or_elements_ = in.here();
  if (v.element_type_ == GgufValueType::boolean)
    for (std::uint64_t i = 0; i < v.count_; ++i)
      if (static_cast<std::uint8_t>(in.here()[i]) > 1)
        in.fail(item + ": bool element " + std::to_string(i) + " has value " +
                std::to_string(static_cast<unsigned>(in.here()[i])) + " (only 0 and 1 are valid)");
  in.skip(v.count_ * min_element_bytes);
  return v;
}

ParsedFile GgufParser::file(std::string_view bytes, const fs::path* file) {
  ByteReader in(bytes, *file);
  ParsedFile out;
  out.version = check_version(in);
  const auto tensor_count = in.scalar<std::uint64_t>("the header", "its tensor count");
  const auto metadata_count = in.scalar<std::uint64_t>("the header", "its metadata count");
  if (metadata_count > kMaxMetadataEntries || metadata_count > in.left() / kMinMetadataEntryBytes)
    in.fail("the header counts " + std::to_string(metadata_count) + " metadata entries, more than the " +
            std::to_string(in.left()) + " bytes after it can hold (a truncated file or a wrong count)");

  for (std::uint64_t i = 0; i < metadata_count; ++i) {
    const std::string entry = "metadata entry " + std::to_string(i) + " of " + std::to_string(metadata_count);
    const std::string_view key = in.string(entry, "its key");
    const std::string item = "metadata key " + quoted_excerpt(key);
    if (out.metadata_index.count(key)) in.fail(item + " appears twice");
    out.metadata.push_back(value(in, key, file, item));
    out.metadata_index.emplace(key, out.metadata.size() - 1);
  }
  if (const auto it = out.metadata_index.find("general.alignment"); it != out.metadata_index.end()) {
    const GgufValue& a = out.metadata[it->second];
    const std::optional<std::int64_t> n = a.as_int();
    if (!n) in.fail("metadata key 'general.alignment' is " + type_text(a) + "; it must be an integer (u32)");
    if (*n <= 0 || *n > std::numeric_limits<std::uint32_t>::max() || !std::has_single_bit(static_cast<std::uint64_t>(*n)))
      in.fail("metadata key 'general.alignment' is " + std::to_string(*n) + "; it must be a power of two from 1 to 2^31");
    out.alignment = static_cast<std::uint64_t>(*n);
  }
  if (tensor_count > kMaxTensors || tensor_count > in.left() / kMinTensorInfoBytes)
    in.fail("the header counts " + std::to_string(tensor_count) + " tensors, more than the " + std::to_string(in.left()) +
            " bytes after the metadata can hold (a truncated file or a wrong count)");
  tensor_infos(in, tensor_count, out);
  // The data section begins at the next multiple of the alignment after the tensor infos.
  out.data_offset = (in.position() + out.alignment - 1) / out.alignment * out.alignment;
  place_tensors(out, bytes.size(), *file);
  return out;
}

void GgufParser::tensor_infos(ByteReader& in, std::uint64_t count, ParsedFile& out) {
  std::unordered_map<std::string_view, std::size_t> seen;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::string entry = "tensor info " + std::to_string(i) + " of " + std::to_string(count);
    const std::string_view name = in.string(entry, "its name");
    const std::string item = "tensor " + quoted_excerpt(name);
    if (!seen.emplace(name, i).second) in.fail(item + " appears twice");
    const auto dims = in.scalar<std::uint32_t>(item, "its dimension count");
    if (dims == 0 || dims > kMaxDims)
      in.fail(item + " has " + std::to_string(dims) + " dimensions; GGUF tensors have 1 to 4");
    std::vector<std::int64_t> ne(dims);  // innermost first, as the file stores them
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < dims; ++d) {
      const auto n = in.scalar<std::uint64_t>(item, "its dimensions");
      if (n == 0) in.fail(item + ": dimension ne[" + std::to_string(d) + "] is 0");
      if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / n)
        in.fail(item + ": its element count overflows 64 bits (dimension ne[" + std::to_string(d) + "] = " +
                std::to_string(n) + ")");
      elements *= n;
      ne[d] = static_cast<std::int64_t>(n);
    }
    const auto ggml_type = in.scalar<std::uint32_t>(item, "its type");
    const std::optional<DType> dtype = dtype_from_ggml_type(ggml_type);
    if (!dtype) {
      const char* type_name = ggml_type_name(ggml_type);
      in.fail(item + ": type " + std::to_string(ggml_type) +
              (type_name ? " (" + std::string(type_name) + ") is not supported" : " is not a ggml type this reader knows"));
    }
    const DTypeInfo& info = dtype_info(*dtype);
    if (ne[0] % info.block_elements != 0)
      in.fail(item + ": its rows hold " + std::to_string(ne[0]) + " elements, not a whole number of " +
              info.name + " blocks of " + std::to_string(info.block_elements));
    const std::uint64_t blocks = elements / static_cast<std::uint64_t>(info.block_elements);
    if (blocks > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(info.block_bytes))
      in.fail(item + ": its size in bytes overflows 64 bits");
    const auto offset = in.scalar<std::uint64_t>(item, "its offset");
    if (offset % out.alignment != 0)
      in.fail(item + ": offset " + std::to_string(offset) + " is not a multiple of the alignment " +
              std::to_string(out.alignment));
    GgufTensorInfo t;
    t.name = std::string(name);
    t.dtype = *dtype;
    t.shape.assign(ne.rbegin(), ne.rend());
    t.offset = offset;  // relative to the data section until place_tensors
    t.bytes = blocks * static_cast<std::uint64_t>(info.block_bytes);
    out.tensors.push_back(std::move(t));
    out.tensor_names.push_back(name);
  }
}

void GgufParser::place_tensors(ParsedFile& out, std::uint64_t file_bytes, const fs::path& file) {
  if (out.tensors.empty()) return;  // nothing needs the data section, nor its padding
  if (out.data_offset > file_bytes)
    fail(file, "the data section would begin at byte " + std::to_string(out.data_offset) + ", past the end of the file (" +
                   std::to_string(file_bytes) + " bytes)");
  const std::uint64_t data_bytes = file_bytes - out.data_offset;
  std::vector<std::size_t> order(out.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const GgufTensorInfo& t = out.tensors[i];
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      fail(file, "tensor " + quoted_excerpt(t.name) + ": its " + std::to_string(t.bytes) + " bytes at offset " + std::to_string(t.offset) +
                     " run past the end of the data section (" + std::to_string(data_bytes) + " bytes)");
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return out.tensors[a].offset < out.tensors[b].offset; });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& before = out.tensors[order[k - 1]];
    const GgufTensorInfo& t = out.tensors[order[k]];
    if (t.offset < before.offset + before.bytes)
      fail(file, "tensor " + quoted_excerpt(t.name) + " (bytes " + std::to_string(t.offset) + " to " + std::to_string(t.offset + t.bytes) +
                     ") overlaps tensor " + quoted_excerpt(before.name) + " (bytes " + std::to_string(before.offset) + " to " +
                     std::to_string(before.offset + before.bytes) + ")");
  }
  for (GgufTensorInfo& t : out.tensors) t.offset += out.data_offset;
}

namespace {

// A split set's file name: "<stem>-<number>-of-<count>.gguf", number in 1..count.
struct SplitName {
  std::string stem;
  std::size_t number = 0;
  std::size_t count = 0;
  std::size_t digits = 5;   // of `number` as written: every part's number is zero-padded to it
  std::string count_text;  // `count` as written, the same in every part's name
};

std::optional<std::size_t> parse_digits(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  std::size_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return n;
}

std::optional<SplitName> split_name(const fs::path& file) {
  std::string name = file.filename().string();
  if (name.size() < 5 || name.compare(name.size() - 5, 5, ".gguf") != 0) return std::nullopt;
  name.resize(name.size() - 5);
  const std::size_t of = name.rfind("-of-");
  if (of == std::string::npos) return std::nullopt;
  const std::size_t dash = name.rfind('-', of == 0 ? 0 : of - 1);
  if (dash == std::string::npos || dash >= of) return std::nullopt;
  const std::string_view count_text = std::string_view(name).substr(of + 4);
  const std::optional<std::size_t> number = parse_digits(std::string_view(name).substr(dash + 1, of - dash - 1));
  const std::optional<std::size_t> count = parse_digits(count_text);
  if (!number || !count || *number == 0 || *number > *count) return std::nullopt;
  return SplitName{name.substr(0, dash), *number, *count, of - dash - 1, std::string(count_text)};
}

fs::path split_file(const fs::path& dir, const SplitName& s, std::size_t number) {
  const auto padded = [&](std::size_t n) {
    std::string text = std::to_string(n);
    return std::string(text.size() < s.digits ? s.digits - text.size() : 0, '0') + text;
  };
  return dir / (s.stem + "-" + padded(number) + "-of-" + s.count_text + ".gguf");
}

// The file to open for `path`: itself, or the one model a directory holds.
fs::path model_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  std::vector<fs::path> found;
  fs::directory_iterator entry(path, ec);
  for (; !ec && entry != fs::directory_iterator(); entry.increment(ec)) {
    const std::string name = entry->path().filename().string();
    if (name.size() > 5 && name[0] != '.' && name.compare(name.size() - 5, 5, ".gguf") == 0) found.push_back(entry->path());
  }
  if (ec) throw InputError(path.string() + ": cannot list the model directory (" + ec.message() + ")");
  std::sort(found.begin(), found.end());
  if (found.empty()) throw InputError(path.string() + ": holds no .gguf file");
  if (found.size() == 1) return found[0];
  // Several files: they must be exactly the files of one split set.
  const std::optional<SplitName> first = split_name(found[0]);
  bool one_set = first && first->number == 1 && first->count == found.size();
  for (std::size_t i = 0; one_set && i < found.size(); ++i) one_set = found[i] == split_file(path, *first, i + 1);
  if (!one_set) {
    std::string names;
    for (std::size_t i = 0; i < found.size() && i < 8; ++i) names += (i ? ", " : "") + found[i].filename().string();
    if (found.size() > 8) names += ", ...";
    throw InputError(path.string() + ": holds " + std::to_string(found.size()) +
                     " .gguf files that are not one split set (" + names + "); name the file to open");
  }
  return found[0];
}

std::shared_ptr<Storage> map_file(const fs::path& file) {
  auto storage = std::make_shared<MappedStorage>();
  storage->file = MappedFile::open(file);
  storage->data = const_cast<std::byte*>(storage->file.data());
  storage->bytes = storage->file.size();
  storage->device = Device::cpu();
  storage->read_only_pages = true;  // a read-only mapping of the whole file
  return storage;
}

std::string_view storage_bytes_view(const Storage& s) {
  return {reinterpret_cast<const char*>(s.data), s.bytes};
}

// An integer split.* key of `file`'s metadata, checked to be one.
std::optional<std::int64_t> split_key(const ParsedFile& parsed, std::string_view key, const fs::path& file) {
  const auto it = parsed.metadata_index.find(key);
  if (it == parsed.metadata_index.end()) return std::nullopt;
  const GgufValue& v = parsed.metadata[it->second];
  const std::optional<std::int64_t> n = v.as_int();
  if (!n) fail(file, "metadata key " + quoted_excerpt(key) + " is " + type_text(v) + "; it must be an integer");
  return n;
}

}  // namespace

GgufFile GgufParser::assemble(std::size_t count, const std::function<Part(std::size_t)>& open_part) {
  auto contents = std::make_shared<GgufContents>();
  std::vector<std::pair<std::size_t, std::int64_t>> split_tensor_counts;  // (file, split.tensors.count)
  for (std::size_t f = 0; f < count; ++f) {
    Part part = open_part(f);
    contents->files.push_back(std::move(part.file));
    contents->storages.push_back(std::move(part.storage));
    const fs::path& path = contents->files[f];  // valid until the next file is added; re-pointed below
    ParsedFile parsed = GgufParser::file(storage_bytes_view(*contents->storages[f]), &path);
    // The split keys, where present, must say what the file names say.
    const std::optional<std::int64_t> split_count = split_key(parsed, "split.count", path);
    const std::optional<std::int64_t> split_no = split_key(parsed, "split.no", path);
    if (split_count && *split_count != static_cast<std::int64_t>(count)) {
      if (count == 1)
        fail(path, "metadata says split.count " + std::to_string(*split_count) +
                       ", but the file is not named as the first of a split set (<name>-00001-of-" +
                       std::to_string(*split_count) + ".gguf); open the set by its first file");
      fail(path, "metadata says split.count " + std::to_string(*split_count) + ", but the file names say the set has " +
                     std::to_string(count) + " files");
    }
    if (const std::optional<std::int64_t> n = split_key(parsed, "split.tensors.count", path)) split_tensor_counts.emplace_back(f, *n);
    if (split_no && *split_no != static_cast<std::int64_t>(f))
      fail(path, "metadata says split.no " + std::to_string(*split_no) + ", but this is file " + std::to_string(f + 1) + " of " +
                     std::to_string(count) + " (split.no " + std::to_string(f) + ")");
    for (std::size_t i = 0; i < parsed.tensors.size(); ++i) {
      parsed.tensors[i].file = f;
      const auto [it, added] = contents->tensor_index.emplace(parsed.tensor_names[i], contents->tensors.size());
      if (!added)
        fail(path, "tensor " + quoted_excerpt(parsed.tensors[i].name) + " is also in " + contents->files[contents->tensors[it->second].file].string());
      contents->tensors.push_back(std::move(parsed.tensors[i]));
    }
    contents->data_offsets.push_back(parsed.data_offset);
    if (f == 0) {
      contents->version = parsed.version;
      contents->alignment = parsed.alignment;
      contents->metadata = std::move(parsed.metadata);
      contents->metadata_index = std::move(parsed.metadata_index);
    }
  }
  for (const auto& [file, n] : split_tensor_counts)
    if (n != static_cast<std::int64_t>(contents->tensors.size()))
      fail(contents->files[file], "metadata says split.tensors.count " + std::to_string(n) + ", but the " +
                                      std::to_string(count) + " file(s) hold " + std::to_string(contents->tensors.size()) + " tensors");
  // The first file's values name it in their errors; `files` has stopped growing.
  for (GgufValue& value : contents->metadata) value.file_ = &contents->files.front();
  GgufFile out;
  out.contents_ = std::move(contents);
  return out;
}

GgufFile GgufFile::open(const fs::path& path) {
  const fs::path first = model_file(path);
  const std::optional<SplitName> split = split_name(first);
  if (!split) return GgufParser::assemble(1, [&](std::size_t) { return GgufParser::Part{first, map_file(first)}; });
  // The name's count is the user's text (any number up to 999999999): each part's name is made
  // only when the files before it were found and the first file's split.count agreed.
  return GgufParser::assemble(split->count, [&](std::size_t f) {
    const fs::path file = split_file(first.parent_path(), *split, f + 1);
    std::error_code ec;
    if (!fs::exists(file, ec))
      throw InputError(file.string() + ": file " + std::to_string(f + 1) + " of the split set of " +
                       first.filename().string() + " is missing (the names say the set has " +
                       std::to_string(split->count) + " files)");
    return GgufParser::Part{file, map_file(file)};
  });
}

GgufFile parse_gguf_bytes(std::string_view bytes, const fs::path& file) {
  auto storage = std::make_shared<BorrowedStorage>();
  storage->data = const_cast<std::byte*>(reinterpret_cast<const std::byte*>(bytes.data()));
  storage->bytes = bytes.size();
  storage->device = Device::cpu();
  return GgufParser::assemble(1, [&](std::size_t) { return GgufParser::Part{file, storage}; });
}

GgufOverride parse_gguf_override(std::string_view spec) {
  auto refuse = [&](const std::string& why) -> GgufOverride {
    throw InputError("--override-kv " + quoted_excerpt(spec) + ": " + why +
                         " (KEY=TYPE:VALUE, TYPE one of int, float, bool, str; e.g. tokenizer.ggml.pre=str:qwen2)",
                     kExitUsageOrIo);
  };
  const std::size_t equals = spec.find('=');
  if (equals == std::string_view::npos || equals == 0) return refuse("no KEY=");
  const std::size_t colon = spec.find(':', equals + 1);
  if (colon == std::string_view::npos) return refuse("no TYPE:");
  GgufOverride o;
  o.key = std::string(spec.substr(0, equals));
  const std::string_view type = spec.substr(equals + 1, colon - equals - 1);
  const std::string_view value = spec.substr(colon + 1);
  if (type == "str") {
    o.type = GgufValueType::string;
    o.text = std::string(value);
  } else if (type == "int") {
    o.type = GgufValueType::i64;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), o.integer);
    if (error != std::errc() || end != value.data() + value.size() || value.empty()) return refuse("the value is not a whole number");
  } else if (type == "float") {
    o.type = GgufValueType::f64;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), o.number);
    if (error != std::errc() || end != value.data() + value.size() || value.empty() || !std::isfinite(o.number))
      return refuse("the value is not a finite number");
  } else if (type == "bool") {
    o.type = GgufValueType::boolean;
    if (value != "true" && value != "false") return refuse("the value is not true or false");
    o.flag = value == "true";
  } else {
    return refuse("the type " + quoted_excerpt(type) + " is not int, float, bool or str");
  }
  return o;
}

GgufFile GgufFile::with_overrides(std::span<const GgufOverride> overrides) const {
  if (overrides.empty()) return *this;
  // A copy: its views (keys, names, values) point into the mappings and into the base's files,
  // both kept alive by it; the overriding values live in its own deques.
  auto contents = std::make_shared<GgufContents>(*contents_);
  contents->base = contents_;
  contents->owned_text.clear();
  contents->owned_scalars.clear();
  for (const GgufOverride& o : overrides) {
    GgufValue v;
    v.type_ = o.type;
    v.key_ = contents->owned_text.emplace_back(o.key);
    v.file_ = contents_->files.empty() ? nullptr : &contents_->files.front();
    std::array<std::byte, 8>& scalar = contents->owned_scalars.emplace_back();
    if (o.type == GgufValueType::string) v.text_ = contents->owned_text.emplace_back(o.text);
    else if (o.type == GgufValueType::i64) std::memcpy(scalar.data(), &o.integer, sizeof o.integer);
    else if (o.type == GgufValueType::f64) std::memcpy(scalar.data(), &o.number, sizeof o.number);
    else scalar[0] = std::byte{o.flag ? std::uint8_t{1} : std::uint8_t{0}};
    v.scalar_or_elements_ = scalar.data();
    if (const auto it = contents->metadata_index.find(o.key); it != contents->metadata_index.end()) {
      contents->metadata[it->second] = v;
      // The index's key viewed the file's bytes, which hold the same text: it stays.
    } else {
      contents->metadata_index.emplace(v.key_, contents->metadata.size());
      contents->metadata.push_back(v);
    }
  }
  GgufFile copy;
  copy.contents_ = std::move(contents);
  return copy;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = contents_->metadata_index.find(key);
  return it == contents_->metadata_index.end() ? nullptr : &contents_->metadata[it->second];
}
const std::vector<GgufValue>& GgufFile::metadata() const { return contents_->metadata; }

namespace {

[[noreturn]] void wrong_type(const GgufFile& gguf, const GgufValue& v, const char* wanted) {
  fail(gguf.files()[0], "metadata key " + quoted_excerpt(v.key()) + " is " + type_text(v) + ", but " + wanted + " is expected");
}

}  // namespace

std::optional<std::string> GgufFile::string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type() != GgufValueType::string) wrong_type(*this, *v, "a string");
  return std::string(*v->as_string());
}

std::optional<std::int64_t> GgufFile::integer(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!is_integer(v->type())) wrong_type(*this, *v, "an integer");
  const std::optional<std::int64_t> n = v->as_int();
  if (!n) fail(files()[0], "metadata key " + quoted_excerpt(key) + " is a u64 above 2^63 - 1, larger than any count or size it could be");
  return n;
}

std::optional<double> GgufFile::number(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!is_integer(v->type()) && !is_float(v->type())) wrong_type(*this, *v, "a number");
  return v->as_number();
}

std::optional<bool> GgufFile::flag(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type() != GgufValueType::boolean) wrong_type(*this, *v, "a bool");
  return v->as_bool();
}

const std::vector<GgufTensorInfo>& GgufFile::tensors() const { return contents_->tensors; }

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = contents_->tensor_index.find(name);
  return it == contents_->tensor_index.end() ? nullptr : &contents_->tensors[it->second];
}

Tensor GgufFile::tensor(const GgufTensorInfo& info) const {
  if (info.file >= contents_->storages.size())
    throw std::invalid_argument("tensor " + quoted_excerpt(info.name) + " names file " + std::to_string(info.file) + " of " +
                                std::to_string(contents_->storages.size()));
  const std::shared_ptr<Storage>& storage = contents_->storages[info.file];
  // Kernels read plain elements through typed pointers and ggml blocks through their 2-byte scales.
  const DTypeInfo& type = dtype_info(info.dtype);
  const auto element_alignment = static_cast<std::uintptr_t>(is_block_quantized(info.dtype) ? 2 : type.block_bytes);
  if ((reinterpret_cast<std::uintptr_t>(storage->data) + info.offset) % element_alignment == 0)
    return Tensor(info.dtype, info.shape, storage, static_cast<std::size_t>(info.offset));
  std::shared_ptr<Storage> copy = allocate_host(static_cast<std::size_t>(info.bytes));
  if (info.offset + info.bytes > storage->bytes)
    throw std::out_of_range("tensor " + quoted_excerpt(info.name) + " lies outside " + contents_->files[info.file].string());
  std::memcpy(copy->data, storage->data + info.offset, static_cast<std::size_t>(info.bytes));
  return Tensor(info.dtype, info.shape, std::move(copy));
}

const std::vector<fs::path>& GgufFile::files() const { return contents_->files; }

std::uint64_t GgufFile::total_file_bytes() const {
  std::uint64_t total = 0;
  for (const auto& s : contents_->storages) total += s->bytes;
  return total;
}

std::vector<std::span<const std::byte>> GgufFile::file_views() const {
  std::vector<std::span<const std::byte>> views;
  for (const auto& s : contents_->storages) views.emplace_back(static_cast<const std::byte*>(s->data), s->bytes);
  return views;
}

std::uint32_t GgufFile::version() const { return contents_->version; }
std::uint64_t GgufFile::alignment() const { return contents_->alignment; }
std::uint64_t GgufFile::data_offset(std::size_t file) const { return contents_->data_offsets.at(file); }

// --- GgufValue ---

std::optional<std::int64_t> GgufValue::as_int() const {
  if (!is_integer(type_)) return std::nullopt;
  return load_int(scalar_or_elements_, type_);
}

std::optional<double> GgufValue::as_number() const {
  if (!is_integer(type_) && !is_float(type_)) return std::nullopt;
  return load_number(scalar_or_elements_, type_);
}

std::optional<bool> GgufValue::as_bool() const {
  if (type_ != GgufValueType::boolean) return std::nullopt;
  return *scalar_or_elements_ != std::byte{0};
}

std::optional<std::string_view> GgufValue::as_string() const {
  if (type_ != GgufValueType::string) return std::nullopt;
  return text_;
}

void GgufValue::wrong_kind(const char* wanted) const {
  const std::string where = file_ ? file_->string() : std::string("GGUF");
  throw InputError(where + ": metadata key " + quoted_excerpt(key_) + " is " + type_text(*this) + ", not " + wanted,
                   kExitBadContent);
}

std::vector<std::int64_t> GgufValue::ints() const {
  if (type_ != GgufValueType::array || !is_integer(element_type_)) wrong_kind("an array of integers");
  std::vector<std::int64_t> out(size());
  const std::uint64_t step = scalar_bytes(element_type_);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::optional<std::int64_t> n = load_int(scalar_or_elements_ + i * step, element_type_);
    if (!n) {
      const std::string where = file_ ? file_->string() : std::string("GGUF");
      throw InputError(where + ": metadata key " + quoted_excerpt(key_) + " element " + std::to_string(i) +
                       " is a u64 above 2^63 - 1", kExitBadContent);
    }
    out[i] = *n;
  }
  return out;
}

std::vector<double> GgufValue::numbers() const {
  if (type_ != GgufValueType::array || (!is_integer(element_type_) && !is_float(element_type_)))
    wrong_kind("an array of numbers");
  std::vector<double> out(size());
  const std::uint64_t step = scalar_bytes(element_type_);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_number(scalar_or_elements_ + i * step, element_type_);
  return out;
}

std::vector<std::string_view> GgufValue::strings() const {
  if (type_ != GgufValueType::array || element_type_ != GgufValueType::string) wrong_kind("an array of strings");
  return strings_;
}

const char* gguf_value_type_name(GgufValueType type) {
  const auto n = static_cast<std::uint32_t>(type);
  return n < kValueTypeCount ? kValueTypeNames[n] : "unknown";
}

const char* ggml_type_name(std::uint32_t ggml_type) {
  // ggml_type's numbers (ggml.h); the gaps are types ggml has removed from GGUF files.
  static const char* const kNames[] = {
      "F32",    "F16",    "Q4_0",    "Q4_1",  "Q4_2",   "Q4_3",  "Q5_0",   "Q5_1",   "Q8_0",     "Q8_1",
      "Q2_K",   "Q3_K",   "Q4_K",    "Q5_K",  "Q6_K",   "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S",  "IQ2_S",   "IQ4_XS", "I8",    "I16",   "I32",    "I64",    "F64",      "IQ1_M",
      "BF16",   "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
      "NVFP4",  "Q1_0",   "Q2_0"};
  return ggml_type < std::size(kNames) ? kNames[ggml_type] : nullptr;
}

}  // namespace switchyard
