#pragma once
// MappedFile: a read-only memory map of a whole file (weights are used in place from the page
// cache, never copied). Move-only; unmaps on destruction.
//
// The risk of mapping: a file truncated (or rewritten shorter) by another process while mapped
// turns a read of its lost pages into SIGBUS, at load or at any later token (tensors are views of
// the mapping). report_mapped_file_faults() makes that a message naming the file and exit 2.
#include <cstddef>
#include <filesystem>

namespace switchyard {

// Installs a SIGBUS handler (once per process; a program's main calls it) that, for a fault inside a
// live MappedFile, writes "switchyard: error: FILE: ..." to stderr and exits with status 2 (I/O);
// a fault anywhere else keeps the default action (the process dies of SIGBUS, as without it). The
// handler is async-signal-safe: it reads a fixed table of the mappings that open() fills.
void report_mapped_file_faults();

class MappedFile {
 public:
  // Throws InputError naming the file when it cannot be opened or mapped.
  static MappedFile open(const std::filesystem::path& file);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  // Hints for the kernel: `willneed` starts read-ahead of [offset, offset + bytes).
  void will_need(std::size_t offset, std::size_t bytes) const;

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::filesystem::path path_;
};

}  // namespace switchyard
