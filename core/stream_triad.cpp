#include "core/stream_triad.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>

namespace switchyard {

namespace {

StreamResult measure(std::size_t array_bytes, int repetitions) {
  const std::size_t n = array_bytes / sizeof(double);
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  // First touch in parallel, so each thread's pages sit on its own memory node.
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = 0.0;
    b[i] = 1.0 + static_cast<double>(i % 7);
    c[i] = 2.0 - static_cast<double>(i % 5);
  }
  const double scalar = 3.0;
  double best = 0;
  for (int r = 0; r < std::max(1, repetitions); ++r) {
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 3.0 * static_cast<double>(n * sizeof(double)) / seconds);
  }
  // Keep the result observable so the loop is not removed.
  volatile double sink = a[n / 2];
  (void)sink;
  return StreamResult{best, n * sizeof(double), omp_get_max_threads()};
}

}  // namespace

StreamResult stream_triad(std::size_t array_bytes, int repetitions) {
  // On a thread of its own, whose OpenMP team ends with it: libgomp counts the idle threads of
  // every team it has made, and once they outnumber the cores it makes every team's barriers
  // sleep almost at once (a futex wake-up per region), which would slow the CPU experts that run
  // after this measurement on another thread's team.
  const int threads = omp_get_max_threads();
  StreamResult result;
  std::exception_ptr error;
  std::thread([&] {
    try {
      omp_set_num_threads(threads);
      result = measure(array_bytes, repetitions);
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  if (error) std::rethrow_exception(error);
  return result;
}

}  // namespace switchyard
