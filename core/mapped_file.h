#pragma once
// MappedFile: a read-only memory map of a whole file (weights are used in place from the page
// cache, never copied). Move-only; unmaps on destruction.
#include <cstddef>
#include <filesystem>

namespace switchyard {

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
