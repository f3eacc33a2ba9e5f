#pragma once
// Reading files a user names (profiles, config.json, index files, weight headers) without trusting
// them: only regular files are read, never a FIFO, device, socket or directory (a FIFO would block
// forever, /dev/zero would never end), and never more than a stated cap. Errors are InputError
// (exit 2: the file cannot be read as asked) naming the file and what it is.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace switchyard {

// An open regular file, read by offset. Move-only; closes on destruction.
class InputFile {
 public:
  // Opens `file` without blocking (O_NONBLOCK: a FIFO's open must not wait for a writer) and
  // refuses what is not a regular file, naming it: "is a directory", "is a FIFO", ...
  // `what` says what the file is for ("profile", "config.json") in the message.
  static InputFile open(const std::filesystem::path& file, std::string_view what);

  InputFile() = default;
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  std::uint64_t size() const { return size_; }  // at open time
  const std::filesystem::path& path() const { return path_; }
  // Reads exactly `bytes` at `offset` into `out`; a short read (the file shrank) is an InputError.
  void read_at(std::uint64_t offset, void* out, std::uint64_t bytes) const;
  // The whole file when it holds at most `max_bytes`; otherwise an InputError that says
  // "<what> larger than <cap>".
  std::string read_all(std::uint64_t max_bytes) const;

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::filesystem::path path_;
  std::string what_;
};

// InputFile::open(file, what).read_all(max_bytes).
std::string read_input_file(const std::filesystem::path& file, std::string_view what, std::uint64_t max_bytes);

// Generous caps on text inputs: far above any real one, low enough that a hostile file cannot
// exhaust memory.
constexpr std::uint64_t kMaxProfileBytes = 64ULL << 20;     // optimize-rule YAML
constexpr std::uint64_t kMaxConfigJsonBytes = 16ULL << 20;  // config.json
constexpr std::uint64_t kMaxIndexJsonBytes = 256ULL << 20;  // model.safetensors.index.json

}  // namespace switchyard
