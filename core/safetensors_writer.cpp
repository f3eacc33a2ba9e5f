#include "core/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace switchyard {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

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
  fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create (" + errno_text() + ")");
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  write_all(length, sizeof length);
  write_all(header.data(), header.size());
  header_bytes_ = 8 + header.size();
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsWriter::fail(const std::string& what) const { throw InputError(file_.string() + ": " + what); }

void SafetensorsWriter::write_all(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed (" + errno_text() + ")");  // ENOSPC reads "No space left on device"
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void SafetensorsWriter::check_current_complete() const {
  if (!started_) return;
  const SafetensorsEntry& t = tensors_[current_];
  if (current_written_ != t.bytes())
    fail("tensor '" + t.name + "' got " + std::to_string(current_written_) + " bytes but its shape and dtype need " +
         std::to_string(t.bytes()));
}

void SafetensorsWriter::begin_tensor(std::string_view name) {
  if (finished_ || fd_ < 0) fail("tensor '" + std::string(name) + "' begun after the file was finished");
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
  const int fd = fd_;
  fd_ = -1;
  // close() is where some file systems (NFS, quotas) report a failed write.
  if (::close(fd) != 0) fail("close failed (" + errno_text() + ")");
}

}  // namespace switchyard
