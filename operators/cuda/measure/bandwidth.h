#pragma once
// The GPU side's ceiling: device-to-device copy bandwidth (bytes read + bytes written per second),
// measured with CUDA events, the HBM counterpart of the CPU's STREAM triad.
#include <cstddef>

namespace switchyard::cuda {

struct CopyBandwidth {
  double bytes_per_second = 0;  // best of the repetitions, counting the read and the write
  std::size_t bytes = 0;        // size of the copy
};

CopyBandwidth measure_copy_bandwidth(int device, std::size_t bytes = std::size_t{1} << 30, int repetitions = 10);

}  // namespace switchyard::cuda
