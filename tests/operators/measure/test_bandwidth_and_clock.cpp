// The GPU's own measures beside benchmarks: the device-to-device copy ceiling and the SM clock.
// GPU only; skipped visibly elsewhere.
#include <doctest/doctest.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstddef>

#include "operators/cuda/measure/bandwidth.h"
#include "operators/cuda/measure/sm_clock.h"
#include "tests/cuda_test_support.h"

namespace cuda = switchyard::cuda;
using switchyard::testing::no_gpu;

TEST_CASE("cuda measures: the SM clock is positive and at most the device's rated clock") {
  if (no_gpu()) return;
  int rated_khz = 0;
  if (cudaDeviceGetAttribute(&rated_khz, cudaDevAttrClockRate, 0) != cudaSuccess) cudaGetLastError();
  const double mhz = cuda::measure_sm_clock_mhz(0, 100);
  INFO("measured " << mhz << " MHz, rated " << rated_khz / 1000 << " MHz");
  CHECK(mhz > 100);
  CHECK(mhz < 5000);
  // The rated clock is the boost clock; a little over it is the timer's rounding over 100 us.
  if (rated_khz > 0) CHECK(mhz < rated_khz / 1000.0 * 1.05);
  // The device that was current stays current.
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);
}

TEST_CASE("cuda measures: the copy ceiling is over 1 GB/s and under ten times the rated memory bandwidth") {
  if (no_gpu()) return;
  int bus_bits = 0, memory_khz = 0;
  if (cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, 0) != cudaSuccess)
    cudaGetLastError();
  const cuda::CopyBandwidth copy = cuda::measure_copy_bandwidth(0, std::size_t{64} << 20, 3);
  // Double data rate: bytes a second = 2 x clock x bus width / 8; the copy counts its read and its
  // write, so it may show up to twice that, never ten times.
  const double rated = 2.0 * memory_khz * 1e3 * bus_bits / 8;
  INFO("copy " << copy.bytes_per_second / 1e9 << " GB/s, rated " << rated / 1e9 << " GB/s");
  CHECK(copy.bytes_per_second > 1e9);
  CHECK(copy.bytes_per_second < 1e14);
  if (rated > 0) CHECK(copy.bytes_per_second < 10 * rated);
}

#else

TEST_CASE("cuda measures: skipped, built without the CUDA backend") { MESSAGE("skipped: built without CUDA"); }

#endif
