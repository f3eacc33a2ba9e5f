#pragma once
// Scratch kept between calls by the thread that owns it (a thread_local vector): grown to the
// largest size asked, never shrunk, and never value-initialised again, so that calls whose sizes
// vary (a prefill's layers, whose expert groups follow the routing; gate/up and down panels of
// different widths on one thread) neither zero it nor fault its pages in again.
// For translation units compiled for the baseline ISA only: an inline function here built with an
// ISA's flags (-mavx512f, ...) might be the copy the linker keeps for every caller.
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

// At least `words` 32-bit words of `kept` from a 64-byte boundary: x's tiles (LinearCall::x_tiles,
// GatedCall's), whose writers store whole aligned 64-byte lines.
inline std::uint32_t* kept_aligned_words(std::vector<std::uint32_t>& kept, std::int64_t words) {
  std::uint32_t* const data = kept_buffer(kept, words + 16);
  return data + (64 - reinterpret_cast<std::uintptr_t>(data) % 64) % 64 / 4;
}

}  // namespace switchyard::cpu
