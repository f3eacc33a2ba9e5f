#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace switchyard {
namespace {

std::atomic<unsigned> temporary_counter{0};

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  if (target_.empty() || !target_.has_filename()) throw InputError("'" + target_.string() + "' is not a file name to write");
  // rename(2) would replace whatever the target is: a device such as /dev/null, a FIFO, a socket.
  struct stat existing {};
  if (::stat(target_.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    const mode_t m = existing.st_mode;
    const char* kind = S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
                     : S_ISFIFO(m) ? "a FIFO (named pipe)" : S_ISSOCK(m) ? "a socket" : "not a regular file";
    throw InputError(target_.string() + ": is " + kind + "; give a file name to write");
  }
  const std::filesystem::path folder = target_.has_parent_path() ? target_.parent_path() : std::filesystem::path(".");
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temporary_ = folder / ("." + target_.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(temporary_counter++));
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0)
    throw InputError(target_.string() + ": cannot write there (creating " + temporary_.filename().string() + " in " +
                     folder.string() + ": " + std::strerror(errno) + ")");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void AtomicFile::fail(const std::string& what) {
  const std::string message = target_.string() + ": " + what + "; the file was not written";
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temporary_.c_str());
  throw InputError(message);
}

void AtomicFile::write(std::string_view bytes) { write(bytes.data(), bytes.size()); }

void AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) fail("write after the file was closed");
  const char* cursor = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t put = ::write(fd_, cursor, size);
    if (put < 0 && errno == EINTR) continue;
    // EFBIG: past RLIMIT_FSIZE (SIGXFSZ is ignored so that this is an error, not a kill); ENOSPC: disk full.
    if (put <= 0)
      fail("write failed after " + std::to_string(bytes_written_) + " bytes (" +
           (put < 0 ? std::strerror(errno) : "no progress") + ")");
    cursor += put;
    size -= static_cast<std::size_t>(put);
    bytes_written_ += static_cast<std::uint64_t>(put);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail("commit after the file was closed");
  if (::fsync(fd_) != 0) fail(std::string("cannot flush to disk (") + std::strerror(errno) + ")");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(std::string("cannot close (") + std::strerror(errno) + ")");
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) fail(std::string("cannot rename into place (") + std::strerror(errno) + ")");
  committed_ = true;
}

void write_file_atomically(const std::filesystem::path& target, std::string_view bytes) {
  AtomicFile file(target);
  file.write(bytes);
  file.commit();
}

}  // namespace switchyard
