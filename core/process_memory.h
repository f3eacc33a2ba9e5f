#pragma once
// This process's resident memory as Linux counts it (/proc/self/status), split by what backs it:
// pages of mapped files (a checkpoint mapped in place), anonymous memory (the heap, converted
// copies of weights, thread stacks) and shared memory. A weight run's budget is "the file's size
// plus a little": the split says which side an excess is on.
#include <cstdint>
#include <optional>
#include <string_view>

namespace switchyard {

struct ProcessMemory {
  std::uint64_t peak_bytes = 0;   // VmHWM: the most resident at once, all kinds together
  std::uint64_t file_bytes = 0;   // RssFile, now
  std::uint64_t anon_bytes = 0;   // RssAnon, now
  std::uint64_t shmem_bytes = 0;  // RssShmem, now
};

// The fields of a /proc/<pid>/status text ("VmHWM:   123 kB" lines); nullopt when one of the four
// is missing or unreadable.
std::optional<ProcessMemory> parse_process_memory(std::string_view status);

// This process's, or nullopt where /proc is not there to read.
std::optional<ProcessMemory> process_memory();

}  // namespace switchyard
