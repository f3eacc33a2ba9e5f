// prefetch_pages against the kernel's own account of what is resident (mincore): a file dropped
// from the page cache is wholly resident after the prefetch, and the progress counts every byte.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "core/mapped_file.h"
#include "core/page_prefetch.h"
#include "tests/core_test_support.h"

namespace sy = switchyard;
using sy::core_testing::SeededRng;
using sy::core_testing::TempDir;

namespace {

// Writes the file to disk and asks the kernel to drop its clean pages from the cache. Returns
// false where the file system keeps them anyway (tmpfs).
bool write_and_drop(const std::filesystem::path& path, const std::string& bytes) {
  sy::core_testing::write_file(path, bytes);
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  ::fdatasync(fd);
  const bool dropped = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return dropped;
}

}  // namespace

TEST_CASE("prefetch_pages: every page of a file dropped from the cache is resident after it") {
  SeededRng rng;
  INFO("seed " << rng.seed);
  const TempDir dir;
  // Two files of a few MiB at odd sizes (the last page partly past the end), one empty region.
  std::vector<sy::MappedFile> files;
  std::vector<std::size_t> sizes;
  bool dropped = true;
  for (int i = 0; i < 2; ++i) {
    const std::size_t size = (std::size_t{3} << 20) + rng.below(1 << 20) + 1;
    const auto path = dir / ("weights-" + std::to_string(i));
    dropped &= write_and_drop(path, rng.bytes(size));
    files.push_back(sy::MappedFile::open(path));
    sizes.push_back(size);
  }
  std::vector<std::span<const std::byte>> regions;
  for (const sy::MappedFile& f : files) regions.emplace_back(f.data(), f.size());
  regions.emplace_back();  // an empty region costs nothing and counts nothing

  std::uint64_t before = 0;
  for (const auto& r : regions) before += sy::resident_bytes(r);
  if (!dropped || before == sizes[0] + sizes[1]) MESSAGE("the page cache kept the files; only the progress is checked");
  else CHECK(before < sizes[0] + sizes[1]);

  std::vector<std::uint64_t> done_seen;
  std::uint64_t total_seen = 0;
  const std::uint64_t covered = sy::prefetch_pages(regions, [&](std::uint64_t done, std::uint64_t total) {
    done_seen.push_back(done);
    total_seen = total;
  });
  CHECK(covered == sizes[0] + sizes[1]);
  CHECK(total_seen == covered);
  REQUIRE(!done_seen.empty());
  CHECK(done_seen.back() == covered);
  for (std::size_t i = 1; i < done_seen.size(); ++i) CHECK(done_seen[i] > done_seen[i - 1]);
  for (std::size_t i = 0; i < files.size(); ++i) CHECK(sy::resident_bytes(regions[i]) == sizes[i]);
}

TEST_CASE("prefetch_pages: nothing to read reports one finished step") {
  int calls = 0;
  const std::uint64_t covered = sy::prefetch_pages({}, [&](std::uint64_t done, std::uint64_t total) {
    ++calls;
    CHECK(done == total);
  });
  CHECK(covered == 0);
  CHECK(calls == 1);
}
