#pragma once
// Summaries of repeated timings, as the benchmarks and reports print them.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace switchyard {

// The median: the middle value, the upper one of the middle two for an even count; 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace switchyard
