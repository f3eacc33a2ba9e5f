#include "core/stream_triad.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace switchyard {

StreamResult stream_triad(std::size_t array_bytes, int repetitions) {
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

}  // namespace switchyard
