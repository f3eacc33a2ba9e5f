#pragma once
// The SM clock a GPU runs at now: clock64 cycles over %globaltimer nanoseconds, counted by one
// thread spinning for `window_us`. Beside a latency-bound measurement (a decode step's chain of
// small kernels), it tells a slower clock from a slower chain: the GPU machine's clocks are not
// locked, and one process's GPU side differs from the next by up to ~8% (docs/performance.md).
namespace switchyard::cuda {

double measure_sm_clock_mhz(int device, double window_us = 200);

}  // namespace switchyard::cuda
