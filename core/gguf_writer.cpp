#include "core/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include "core/atomic_file.h"

namespace switchyard {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; the writer writes memory as it is");

namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kVersion = 3;
constexpr std::uint32_t kDefaultAlignment = 32;

template <typename T>
void append(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void append_string(std::string& out, std::string_view text) {
  append<std::uint64_t>(out, text.size());
  out.append(text);
}

template <typename T>
std::string scalar(T value) {
  std::string out;
  append(out, value);
  return out;
}

template <typename T>
std::string array(GgufValueType element, const std::vector<T>& values) {
  std::string out;
  append<std::uint32_t>(out, static_cast<std::uint32_t>(element));
  append<std::uint64_t>(out, values.size());
  for (const T& v : values) append(out, v);
  return out;
}

std::uint64_t align_up(std::uint64_t n, std::uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

GgufWriter::GgufWriter(std::uint32_t alignment) : alignment_(alignment) {
  if (!std::has_single_bit(alignment)) throw std::invalid_argument("GGUF alignment " + std::to_string(alignment) + " is not a power of two");
  if (alignment != kDefaultAlignment) set_u32("general.alignment", alignment);
}

void GgufWriter::set(std::string key, GgufValueType type, std::string value) {
  if (key == "general.alignment" && (type != GgufValueType::u32 || value != scalar<std::uint32_t>(alignment_)))
    throw std::invalid_argument("general.alignment is the writer's alignment (" + std::to_string(alignment_) +
                                "); give it to the constructor instead");
  for (Entry& e : metadata_)
    if (e.key == key) {
      e.type = type;
      e.value = std::move(value);
      return;
    }
  metadata_.push_back(Entry{std::move(key), type, std::move(value)});
}

void GgufWriter::set_u8(std::string key, std::uint8_t v) { set(std::move(key), GgufValueType::u8, scalar(v)); }
void GgufWriter::set_i8(std::string key, std::int8_t v) { set(std::move(key), GgufValueType::i8, scalar(v)); }
void GgufWriter::set_u16(std::string key, std::uint16_t v) { set(std::move(key), GgufValueType::u16, scalar(v)); }
void GgufWriter::set_i16(std::string key, std::int16_t v) { set(std::move(key), GgufValueType::i16, scalar(v)); }
void GgufWriter::set_u32(std::string key, std::uint32_t v) { set(std::move(key), GgufValueType::u32, scalar(v)); }
void GgufWriter::set_i32(std::string key, std::int32_t v) { set(std::move(key), GgufValueType::i32, scalar(v)); }
void GgufWriter::set_u64(std::string key, std::uint64_t v) { set(std::move(key), GgufValueType::u64, scalar(v)); }
void GgufWriter::set_i64(std::string key, std::int64_t v) { set(std::move(key), GgufValueType::i64, scalar(v)); }
void GgufWriter::set_f32(std::string key, float v) { set(std::move(key), GgufValueType::f32, scalar(v)); }
void GgufWriter::set_f64(std::string key, double v) { set(std::move(key), GgufValueType::f64, scalar(v)); }
void GgufWriter::set_bool(std::string key, bool v) {
  set(std::move(key), GgufValueType::boolean, scalar<std::uint8_t>(v ? 1 : 0));
}
void GgufWriter::set_string(std::string key, std::string v) {
  std::string out;
  append_string(out, v);
  set(std::move(key), GgufValueType::string, std::move(out));
}

void GgufWriter::set_strings(std::string key, const std::vector<std::string>& values) {
  std::string out;
  append<std::uint32_t>(out, static_cast<std::uint32_t>(GgufValueType::string));
  append<std::uint64_t>(out, values.size());
  for (const std::string& v : values) append_string(out, v);
  set(std::move(key), GgufValueType::array, std::move(out));
}
void GgufWriter::set_u8s(std::string key, const std::vector<std::uint8_t>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::u8, v)); }
void GgufWriter::set_i8s(std::string key, const std::vector<std::int8_t>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::i8, v)); }
void GgufWriter::set_u16s(std::string key, const std::vector<std::uint16_t>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::u16, v)); }
void GgufWriter::set_i16s(std::string key, const std::vector<std::int16_t>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::i16, v)); }
void GgufWriter::set_u32s(std::string key, const std::vector<std::uint32_t>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::u32, v)); }
void GgufWriter::set_i32s(std::string key, const std::vector<std::int32_t>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::i32, v)); }
void GgufWriter::set_u64s(std::string key, const std::vector<std::uint64_t>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::u64, v)); }
void GgufWriter::set_i64s(std::string key, const std::vector<std::int64_t>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::i64, v)); }
void GgufWriter::set_f32s(std::string key, const std::vector<float>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::f32, v)); }
void GgufWriter::set_f64s(std::string key, const std::vector<double>& v) { set(std::move(key), GgufValueType::array, array(GgufValueType::f64, v)); }
void GgufWriter::set_bools(std::string key, const std::vector<bool>& values) {
  std::vector<std::uint8_t> bytes(values.begin(), values.end());
  set(std::move(key), GgufValueType::array, array(GgufValueType::boolean, bytes));
}

void GgufWriter::add_tensor(std::string name, DType dtype, std::vector<std::int64_t> shape,
                            std::function<void(std::byte* out)> fill) {
  const std::string where = "GGUF tensor '" + name + "'";
  for (const PendingTensor& t : tensors_)
    if (t.name == name) throw std::invalid_argument(where + " is added twice");
  const DTypeInfo& info = dtype_info(dtype);
  if (info.ggml_type < 0) throw std::invalid_argument(where + ": GGUF has no type for " + info.name);
  if (shape.empty() || shape.size() > 4) throw std::invalid_argument(where + ": GGUF tensors have 1 to 4 dimensions");
  std::uint64_t elements = 1;
  for (std::int64_t d : shape) {
    if (d <= 0 || elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / static_cast<std::uint64_t>(d))
      throw std::invalid_argument(where + ": dimensions must be positive and their product fit 63 bits");
    elements *= static_cast<std::uint64_t>(d);
  }
  if (shape.back() % info.block_elements != 0)
    throw std::invalid_argument(where + ": rows of " + std::to_string(shape.back()) + " are not whole " + info.name + " blocks");
  const std::uint64_t bytes = storage_bytes(dtype, elements);
  tensors_.push_back(PendingTensor{std::move(name), dtype, std::move(shape), bytes, std::move(fill)});
}

std::uint64_t GgufWriter::write_file(const fs::path& file, const std::vector<const Entry*>& metadata,
                                     std::size_t first_tensor, std::size_t end_tensor) const {
  std::string header = "GGUF";
  append<std::uint32_t>(header, kVersion);
  append<std::uint64_t>(header, end_tensor - first_tensor);
  append<std::uint64_t>(header, metadata.size());
  for (const Entry* e : metadata) {
    append_string(header, e->key);
    append<std::uint32_t>(header, static_cast<std::uint32_t>(e->type));
    header += e->value;
  }
  std::uint64_t offset = 0;  // within the data section
  std::uint64_t largest = 0;
  for (std::size_t i = first_tensor; i < end_tensor; ++i) {
    const PendingTensor& t = tensors_[i];
    append_string(header, t.name);
    append<std::uint32_t>(header, static_cast<std::uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) append<std::uint64_t>(header, static_cast<std::uint64_t>(*d));
    append<std::uint32_t>(header, static_cast<std::uint32_t>(dtype_info(t.dtype).ggml_type));
    append<std::uint64_t>(header, offset);
    offset = align_up(offset + t.bytes, alignment_);
    largest = std::max(largest, t.bytes);
  }
  header.resize(align_up(header.size(), alignment_), '\0');

  AtomicFile out(file);
  out.write(header);
  std::vector<std::byte> buffer(static_cast<std::size_t>(largest));
  const std::string padding(alignment_, '\0');
  for (std::size_t i = first_tensor; i < end_tensor; ++i) {
    const PendingTensor& t = tensors_[i];
    t.fill(buffer.data());
    out.write(buffer.data(), static_cast<std::size_t>(t.bytes));
    // Pad to the next tensor's offset; the last tensor ends the file.
    if (i + 1 < end_tensor) out.write(padding.data(), static_cast<std::size_t>(align_up(t.bytes, alignment_) - t.bytes));
  }
  const std::uint64_t bytes = out.bytes_written();
  out.commit();
  return bytes;
}

std::uint64_t GgufWriter::write(const fs::path& file) const {
  std::vector<const Entry*> metadata;
  for (const Entry& e : metadata_) metadata.push_back(&e);
  return write_file(file, metadata, 0, tensors_.size());
}

std::vector<fs::path> GgufWriter::write_split(const fs::path& stem, std::uint64_t max_data_bytes) const {
  for (const Entry& e : metadata_)
    if (e.key.rfind("split.", 0) == 0) throw std::invalid_argument("metadata key '" + e.key + "' is the split writer's to set");
  // Tensors [bounds[k], bounds[k + 1]) go to file k.
  std::vector<std::size_t> bounds = {0};
  std::uint64_t data = 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const std::uint64_t end = align_up(data, alignment_) + tensors_[i].bytes;
    if (i > bounds.back() && end > max_data_bytes) {
      bounds.push_back(i);
      data = tensors_[i].bytes;
    } else {
      data = end;
    }
  }
  bounds.push_back(tensors_.size());
  const std::size_t count = bounds.size() - 1;
  if (count > std::numeric_limits<std::uint16_t>::max()) throw std::invalid_argument("a split set holds at most 65535 files");
  const auto padded = [](std::size_t n) {
    std::string text = std::to_string(n);
    return std::string(text.size() < 5 ? 5 - text.size() : 0, '0') + text;
  };
  std::vector<fs::path> files;
  for (std::size_t k = 0; k < count; ++k) {
    std::vector<Entry> split_keys = {
        {"split.no", GgufValueType::u16, scalar<std::uint16_t>(static_cast<std::uint16_t>(k))},
        {"split.count", GgufValueType::u16, scalar<std::uint16_t>(static_cast<std::uint16_t>(count))},
        {"split.tensors.count", GgufValueType::i32, scalar<std::int32_t>(static_cast<std::int32_t>(tensors_.size()))}};
    std::vector<const Entry*> metadata;
    if (k == 0)
      for (const Entry& e : metadata_) metadata.push_back(&e);
    else if (alignment_ != kDefaultAlignment)
      metadata.push_back(&metadata_.front());  // general.alignment: each file's layout follows its own
    for (const Entry& e : split_keys) metadata.push_back(&e);
    files.push_back(stem.parent_path() / (stem.filename().string() + "-" + padded(k + 1) + "-of-" + padded(count) + ".gguf"));
    write_file(files.back(), metadata, bounds[k], bounds[k + 1]);
  }
  return files;
}

}  // namespace switchyard
