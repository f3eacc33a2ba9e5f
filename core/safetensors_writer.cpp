#include "core/safetensors_writer.h"

#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace switchyard {
std::uint64_t SafetensorsEntry::bytes() const {
  std::uint64_t elements = 1;
  for (std::int64_t d : shape) elements *= static_cast<std::uint64_t>(d);
  return storage_bytes(dtype, elements);
}

std::string safetensors_header_json(const std::vector<SafetensorsEntry>& tensors, const std::filesystem::path& file) {
  // nlohmann::json keeps object keys sorted, so the header lists tensors by name whatever their
  // data order; readers find data through data_offsets, never through key order.
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    const char* dtype = dtype_info(t.dtype).safetensors_name;
    if (!dtype)
      throw InputError(file.string() + ": tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) +
                       ", which safetensors cannot store");
    if (t.name.empty() || t.name == "__metadata__")
      throw InputError(file.string() + ": '" + t.name + "' is not a usable tensor name");
    if (header.contains(t.name)) throw InputError(file.string() + ": tensor '" + t.name + "' is listed twice");
    for (std::int64_t d : t.shape)
      if (d < 0) throw InputError(file.string() + ": tensor '" + t.name + "' has a negative dimension");
    const std::uint64_t end = offset + t.bytes();
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  // The safetensors crate pads with spaces so that the data section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

SafetensorsWriter::SafetensorsWriter(std::filesystem::path file, std::vector<SafetensorsEntry> tensors)
    : file_(std::move(file)), tensors_(std::move(tensors)), current_(tensors_.size()) {
  const std::string header = safetensors_header_json(tensors_, file_);
  for (const SafetensorsEntry& t : tensors_) data_bytes_ += t.bytes();
  out_ = std::make_unique<AtomicFile>(file_);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  write_all(length, sizeof length);
  write_all(header.data(), header.size());
  header_bytes_ = 8 + header.size();
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::fail(const std::string& what) const { throw InputError(file_.string() + ": " + what); }

void SafetensorsWriter::write_all(const void* data, std::size_t size) {
  out_->write(data, size);  // a short write (disk full, file-size limit) throws, naming the file
}

void SafetensorsWriter::check_current_complete() const {
  if (!started_) return;
  const SafetensorsEntry& t = tensors_[current_];
  if (current_written_ != t.bytes())
    fail("tensor '" + t.name + "' got " + std::to_string(current_written_) + " bytes but its shape and dtype need " +
         std::to_string(t.bytes()));
}

void SafetensorsWriter::begin_tensor(std::string_view name) {
  if (finished_ || !out_) fail("tensor '" + std::string(name) + "' begun after the file was finished");
  check_current_complete();
  const std::size_t next = started_ ? current_ + 1 : 0;
  if (next >= tensors_.size()) fail("tensor '" + std::string(name) + "' is not in the header, or comes after the last");
  if (tensors_[next].name != name)
    fail("tensor '" + std::string(name) + "' begun where '" + tensors_[next].name + "' comes next");
  current_ = next;
  current_written_ = 0;
  started_ = true;
}

void SafetensorsWriter::write(std::span<const std::byte> bytes) {
  if (!started_ || finished_) fail("bytes written outside a tensor (call begin_tensor first)");
  const SafetensorsEntry& t = tensors_[current_];
  if (bytes.size() > t.bytes() - current_written_)
    fail("tensor '" + t.name + "' given " + std::to_string(current_written_ + bytes.size()) +
         " bytes or more but its shape and dtype need " + std::to_string(t.bytes()));
  write_all(bytes.data(), bytes.size());
  current_written_ += bytes.size();
}

void SafetensorsWriter::finish() {
  if (finished_) return;
  check_current_complete();
  const std::size_t done = started_ ? current_ + 1 : 0;
  if (done != tensors_.size())
    fail("finished after " + std::to_string(done) + " of " + std::to_string(tensors_.size()) +
         " tensors; the next missing one is '" + tensors_[done].name + "'");
  finished_ = true;
  // fsync and close are where some file systems (NFS, quotas) report a failed write; the
  // rename makes the file appear whole.
  const std::unique_ptr<AtomicFile> out = std::move(out_);
  out->commit();
}

}  // namespace switchyard
