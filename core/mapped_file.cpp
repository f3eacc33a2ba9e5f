#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace switchyard {

MappedFile MappedFile::open(const std::filesystem::path& file) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below like any
  // non-regular file. The flag does not change how a regular file's mapping reads.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(file.string() + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(file.string() + ": not a regular file; weights are mapped from regular files only");
  }
  MappedFile mapped;
  mapped.path_ = file;
  mapped.size_ = static_cast<std::size_t>(st.st_size);
  if (mapped.size_ > 0) {
    void* address = ::mmap(nullptr, mapped.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (address == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      throw InputError(file.string() + ": cannot map " + std::to_string(mapped.size_) + " bytes (" + std::strerror(error) + ")");
    }
    mapped.data_ = static_cast<const std::byte*>(address);
  }
  ::close(fd);  // the mapping keeps the file open
  return mapped;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

void MappedFile::will_need(std::size_t offset, std::size_t bytes) const {
  if (!data_ || offset >= size_) return;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t begin = offset / page * page;
  const std::size_t end = std::min(size_, offset + bytes);
  ::madvise(const_cast<std::byte*>(data_) + begin, end - begin, MADV_WILLNEED);
}

}  // namespace switchyard
