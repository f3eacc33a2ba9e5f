#pragma once
// Scratch kept between calls by the thread that owns it (a thread_local vector): grown to the
// largest size asked, never shrunk, and never value-initialised again, so that calls whose sizes
// vary (a prefill's layers, whose expert groups follow the routing; gate/up and down panels of
// different widths on one thread) neither zero it nor fault its pages in again.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace switchyard::cpu {

// At least `count` elements of `kept`; the contents are whatever the last user left.
template <class T>
T* kept_buffer(std::vector<T>& kept, std::int64_t count) {
  if (kept.size() < static_cast<std::size_t>(count)) kept.resize(static_cast<std::size_t>(count));
  return kept.data();
}

}  // namespace switchyard::cpu
