#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/units.h"

namespace switchyard {
namespace {

// What a non-regular file is, for "config.json: is a FIFO, not a regular file".
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

InputFile InputFile::open(const std::filesystem::path& file, std::string_view what) {
  const std::string name = file.string() + ": ";
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == EISDIR) throw InputError(name + "is a directory, not a " + std::string(what) + " file");
    if (error == ENOENT) throw InputError(name + "no such file (the " + std::string(what) + " does not exist)");
    throw InputError(name + "cannot open the " + std::string(what) + " (" + std::strerror(error) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    throw InputError(name + "cannot read the " + std::string(what) + " (" + std::strerror(error) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(name + "is " + file_kind(st.st_mode) + ", not a regular file; the " + std::string(what) +
                     " must be a file");
  }
  // Reads of a regular file do not block; clear the flag so that they are ordinary.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  InputFile opened;
  opened.fd_ = fd;
  opened.size_ = static_cast<std::uint64_t>(st.st_size);
  opened.path_ = file;
  opened.what_ = std::string(what);
  return opened;
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)), what_(std::move(other.what_)) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(std::uint64_t offset, void* out, std::uint64_t bytes) const {
  auto* cursor = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, cursor, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw InputError(path_.string() + ": read error in the " + what_ + " (" + std::strerror(errno) + ")");
    if (got == 0)
      throw InputError(path_.string() + ": the " + what_ + " ended early at byte " + std::to_string(offset) +
                       " (did it shrink while being read?)");
    cursor += got;
    offset += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::uint64_t>(got);
  }
}

std::string InputFile::read_all(std::uint64_t max_bytes) const {
  if (size_ > max_bytes)
    throw InputError(path_.string() + ": " + what_ + " larger than " + format_bytes(max_bytes) + " (" +
                     format_bytes(size_) + "); is this the right file?");
  std::string text(size_, '\0');
  read_at(0, text.data(), size_);
  if (size_ == 0) {
    // /proc and /sys files report size 0 and still hold data; refuse them instead of reading them
    // as empty (a read error, as /proc/self/mem gives, is reported as one).
    char byte = 0;
    ssize_t got = 0;
    do got = ::pread(fd_, &byte, 1, 0);
    while (got < 0 && errno == EINTR);
    if (got < 0) throw InputError(path_.string() + ": read error in the " + what_ + " (" + std::strerror(errno) + ")");
    if (got > 0)
      throw InputError(path_.string() + ": the " + what_ +
                       "'s size reads 0 but it holds data (a /proc or /sys file?); copy it to a regular file");
  }
  return text;
}

std::string read_input_file(const std::filesystem::path& file, std::string_view what, std::uint64_t max_bytes) {
  return InputFile::open(file, what).read_all(max_bytes);
}

}  // namespace switchyard
