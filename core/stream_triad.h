#pragma once
// STREAM triad (a[i] = b[i] + s * c[i]) on all OpenMP threads: the memory bandwidth a CPU kernel
// that streams its operands can hope for, measured in the same run as the benchmark it bounds.
// Counts 24 bytes per element (two reads, one write), as STREAM does.
#include <cstddef>

namespace switchyard {

struct StreamResult {
  double bytes_per_second = 0;  // best of the repetitions
  std::size_t array_bytes = 0;  // size of each of the three arrays
  int threads = 0;
};

// Arrays of `array_bytes` each (default 512 MiB: far beyond any last-level cache).
StreamResult stream_triad(std::size_t array_bytes = std::size_t{512} << 20, int repetitions = 5);

}  // namespace switchyard
