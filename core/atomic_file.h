#pragma once
// AtomicFile: writes a file so that whoever reads the path sees either what was there before or the
// whole new file, never half of one. The bytes go to a temporary file beside the target (the same
// folder, so the same file system, where rename(2) is atomic); commit() flushes them to disk and
// renames the temporary over the target. Without commit() (an error, an exception, a full disk)
// the destructor removes the temporary and the target is untouched.
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace switchyard {

class AtomicFile {
 public:
  // Creates the temporary ".<name>.tmp-<pid>-<n>" beside `target`. Throws InputError (exit 2)
  // naming the target when its folder cannot take it, or when the target exists and is not a
  // regular file (a directory, /dev/null, a FIFO: the rename would replace it).
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();  // removes the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends all of `bytes`; a short write (disk full, file-size limit) is an InputError.
  void write(std::string_view bytes);
  void write(const void* data, std::size_t size);
  // fsync, close, rename over the target. Throws InputError naming the target on failure, and
  // then the target is as it was.
  void commit();

  const std::filesystem::path& target() const { return target_; }
  const std::filesystem::path& temporary() const { return temporary_; }
  std::uint64_t bytes_written() const { return bytes_written_; }

 private:
  [[noreturn]] void fail(const std::string& what);

  std::filesystem::path target_;
  std::filesystem::path temporary_;
  int fd_ = -1;
  std::uint64_t bytes_written_ = 0;
  bool committed_ = false;
};

// AtomicFile(target), write(bytes), commit().
void write_file_atomically(const std::filesystem::path& target, std::string_view bytes);

}  // namespace switchyard
