#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace switchyard {
namespace {

// The live mappings, for the SIGBUS handler: a fixed table, so that the handler allocates and
// locks nothing. A slot is claimed by compare-and-swap of `state` (0 free, 1 being written, 2
// live); the handler reads only live slots. A mapping past the table's size is simply not named.
struct MappingSlot {
  std::atomic<int> state{0};
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  char path[512] = {};  // NUL-terminated; a longer path is cut
};
constexpr std::size_t kMappingSlots = 1024;
MappingSlot g_mappings[kMappingSlots];

void register_mapping(const std::byte* data, std::size_t size, const std::filesystem::path& file) {
  for (MappingSlot& slot : g_mappings) {
    int free = 0;
    if (!slot.state.compare_exchange_strong(free, 1, std::memory_order_acquire)) continue;
    const std::string& text = file.native();
    const std::size_t length = std::min(text.size(), sizeof slot.path - 1);
    std::memcpy(slot.path, text.data(), length);
    slot.path[length] = '\0';
    slot.begin.store(reinterpret_cast<std::uintptr_t>(data), std::memory_order_relaxed);
    slot.end.store(reinterpret_cast<std::uintptr_t>(data) + size, std::memory_order_relaxed);
    slot.state.store(2, std::memory_order_release);
    return;
  }
}

void unregister_mapping(const std::byte* data) {
  for (MappingSlot& slot : g_mappings)
    if (slot.state.load(std::memory_order_acquire) == 2 && slot.begin.load(std::memory_order_relaxed) == reinterpret_cast<std::uintptr_t>(data)) {
      slot.state.store(0, std::memory_order_release);
      return;
    }
}

// Async-signal-safe output: write(2) of a string and of a number.
void say(const char* text) {
  std::size_t length = 0;
  while (text[length]) ++length;
  while (length > 0) {
    const ssize_t written = ::write(STDERR_FILENO, text, length);
    if (written <= 0) return;
    text += written;
    length -= static_cast<std::size_t>(written);
  }
}
void say_number(std::uintptr_t n) {
  char digits[24];
  char* p = digits + sizeof digits - 1;
  *p = '\0';
  do {
    *--p = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0);
  say(p);
}

void on_sigbus(int signal, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const MappingSlot& slot : g_mappings) {
    if (slot.state.load(std::memory_order_acquire) != 2) continue;
    const std::uintptr_t begin = slot.begin.load(std::memory_order_relaxed), end = slot.end.load(std::memory_order_relaxed);
    if (address < begin || address >= end) continue;
    say("switchyard: error: ");
    say(slot.path);
    say(": the file became shorter while it was mapped (a read at byte ");
    say_number(address - begin);
    say(" of the ");
    say_number(end - begin);
    say(" it had found nothing); a model file must not be truncated or rewritten while switchyard uses it\n");
    ::_exit(kExitUsageOrIo);
  }
  // Not one of ours: the default action, which the faulting instruction meets again on return.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigemptyset(&default_action.sa_mask);
  ::sigaction(signal, &default_action, nullptr);
}

}  // namespace

void report_mapped_file_faults() {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, nullptr);
}

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
    register_mapping(mapped.data_, mapped.size_, file);
  }
  ::close(fd);  // the mapping keeps the file open
  return mapped;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) {
      unregister_mapping(data_);
      ::munmap(const_cast<std::byte*>(data_), size_);
    }
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) {
    unregister_mapping(data_);
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
}

void MappedFile::will_need(std::size_t offset, std::size_t bytes) const {
  if (!data_ || offset >= size_) return;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t begin = offset / page * page;
  const std::size_t end = std::min(size_, offset + bytes);
  ::madvise(const_cast<std::byte*>(data_) + begin, end - begin, MADV_WILLNEED);
}

}  // namespace switchyard
