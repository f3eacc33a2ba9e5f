// core/process_memory.h: the status fields parsed, malformed ones refused, and this process's
// anonymous memory seen to grow by what a test touches.
#include <doctest/doctest.h>

#include <sys/mman.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "core/process_memory.h"

namespace sy = switchyard;

TEST_CASE("process memory: the status fields in bytes, and nothing from a malformed or partial status") {
  std::mt19937 random(std::random_device{}());
  const std::uint64_t hwm = random() % 100000, file = random() % 100000, anon = random() % 100000, shm = random() % 1000;
  const std::string status = "Name:\tswitchyard\nVmPeak:\t  999999 kB\nVmHWM:\t" + std::to_string(hwm) +
                             " kB\nVmRSS:\t 1 kB\nRssAnon:\t" + std::to_string(anon) + " kB\nRssFile:\t   " +
                             std::to_string(file) + " kB\nRssShmem:\t" + std::to_string(shm) + " kB\nThreads:\t3\n";
  const auto parsed = sy::parse_process_memory(status);
  REQUIRE(parsed);
  CHECK(parsed->peak_bytes == hwm * 1024);
  CHECK(parsed->file_bytes == file * 1024);
  CHECK(parsed->anon_bytes == anon * 1024);
  CHECK(parsed->shmem_bytes == shm * 1024);
  CHECK_FALSE(sy::parse_process_memory("VmHWM:\t10 kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\n"));  // no RssShmem
  CHECK_FALSE(sy::parse_process_memory("VmHWM:\t10 MB\nRssAnon:\t1 kB\nRssFile:\t1 kB\nRssShmem:\t0 kB\n"));
  CHECK_FALSE(sy::parse_process_memory("VmHWM:\tx kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\nRssShmem:\t0 kB\n"));
  CHECK_FALSE(sy::parse_process_memory("VmHWM:\t99999999999999999999 kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\nRssShmem:\t0 kB\n"));
  CHECK_FALSE(sy::parse_process_memory(""));
}

TEST_CASE("process memory: touching 64 MiB of anonymous pages shows in RssAnon and the peak") {
  if (!std::filesystem::exists("/proc/self/status")) return;
  const auto before = sy::process_memory();
  REQUIRE(before);
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  void* pages = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(pages != MAP_FAILED);
  std::memset(pages, 0x5a, kBytes);
  const auto after = sy::process_memory();
  munmap(pages, kBytes);
  REQUIRE(after);
  // Other threads of the test binary may free memory meanwhile: most of the 64 MiB, not all.
  CHECK(after->anon_bytes >= before->anon_bytes + kBytes * 3 / 4);
  CHECK(after->peak_bytes >= after->anon_bytes + after->file_bytes + after->shmem_bytes - (std::uint64_t{1} << 20));
}
