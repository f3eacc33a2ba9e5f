#include "core/page_prefetch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

// Linux 5.14's populate advice; older C library headers lack the name, the kernel then says EINVAL.
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace switchyard {
namespace {

std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

// [begin, end) of `region` widened to whole pages, as madvise and mincore want them.
struct PageRange {
  std::byte* begin;
  std::size_t bytes;
};
PageRange pages_of(const std::byte* data, std::size_t bytes) {
  const std::size_t page = page_size();
  const auto start = reinterpret_cast<std::uintptr_t>(data) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes + page - 1) / page * page;
  return {reinterpret_cast<std::byte*>(start), end - start};
}

// One read per page: the fault maps it, reading it from disk where it is not cached.
void touch_pages(const std::byte* data, std::size_t bytes) {
  const std::size_t page = page_size();
  volatile const std::byte* p = data;
  std::byte sink{};
  for (std::size_t at = 0; at < bytes; at += page) sink |= p[at];
  if (bytes > 0) sink |= p[bytes - 1];
  (void)sink;
}

}  // namespace

std::uint64_t prefetch_pages(std::span<const std::span<const std::byte>> regions, const PrefetchProgress& progress) {
  // 64 MiB a step: progress moves often enough for a slow disk, and the read-ahead window (four
  // steps) keeps the disk busy while a step's pages are mapped.
  constexpr std::size_t kStep = std::size_t{64} << 20;
  constexpr std::size_t kAheadSteps = 4;
  std::uint64_t total = 0, done = 0;
  for (const auto& region : regions) total += region.size();
  bool populate = true;  // until the kernel says it has no MADV_POPULATE_READ
  for (const auto& region : regions) {
    for (std::size_t at = 0; at < region.size(); at += kStep) {
      const std::size_t bytes = std::min(kStep, region.size() - at);
      if (at % (kStep * kAheadSteps) == 0) {
        const std::size_t ahead = std::min(kStep * kAheadSteps * 2, region.size() - at);
        const PageRange r = pages_of(region.data() + at, ahead);
        ::madvise(r.begin, r.bytes, MADV_WILLNEED);  // a hint: its failure changes nothing
      }
      const PageRange r = pages_of(region.data() + at, bytes);
      if (populate && ::madvise(r.begin, r.bytes, MADV_POPULATE_READ) != 0) {
        // EINVAL: an older kernel; anything else (EFAULT on a file cut short): the reads below
        // fault as any use of the weights would, and report_mapped_file_faults names the file.
        populate = errno != EINVAL;
        touch_pages(region.data() + at, bytes);
      } else if (!populate) {
        touch_pages(region.data() + at, bytes);
      }
      done += bytes;
      if (progress) progress(done, total);
    }
  }
  if (progress && total == 0) progress(0, 0);
  return total;
}

std::uint64_t resident_bytes(std::span<const std::byte> region) {
  if (region.empty()) return 0;
  const std::size_t page = page_size();
  const PageRange r = pages_of(region.data(), region.size());
  std::vector<unsigned char> in_core(r.bytes / page);
  if (::mincore(r.begin, r.bytes, in_core.data()) != 0) return 0;
  std::uint64_t pages = 0;
  for (unsigned char c : in_core) pages += c & 1;
  return std::min<std::uint64_t>(pages * page, region.size());
}

}  // namespace switchyard
