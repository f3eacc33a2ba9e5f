#pragma once
// A measuring aid (`bench decode --timeline`): each kernel launched through launch_kernel stamps
// the end of its PDL wait (%globaltimer, read by its first thread) into a device buffer, in chain
// order; the launches, recorded by name while a step is queued, say whose stamp is whose. The gap
// from one stamp to the next is a kernel's share of the chain: its work after the wait and the
// hand-over to the next kernel, as `--leave_out` estimates it, without leaving anything out. Each
// stamp costs its kernel's first thread an atomic (~1 us under load); the bench prints the step
// with and without them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace switchyard::cuda {

// From now on, every kernel launched through launch_kernel is recorded by its (mangled) name.
void record_launches();
// Stops recording; the names recorded since record_launches, in launch order.
std::vector<std::string> recorded_launches();

// While launches are recorded: marks the place of the next launch (`label`, the count recorded so
// far), so that a report can tell the parts of a step apart (CausalLM marks where its decoder
// layers begin and end). Costs one relaxed atomic load otherwise.
void mark_launches(const char* label);
// The marks a model's step leaves (CausalLM): before its first decoder layer, and before the final
// norm and the head.
inline constexpr char kLayersMark[] = "layers";
inline constexpr char kHeadMark[] = "head";
struct LaunchMark {
  std::string label;
  std::size_t launch = 0;  // the index of the launch after the mark
};
// The marks since record_launches, in order (call after recorded_launches).
std::vector<LaunchMark> recorded_marks();

class Timeline {
 public:
  // Points every kernel's stamps at a buffer of `room` times on the current device (kernels on
  // other devices stamp nothing).
  explicit Timeline(std::size_t room);
  ~Timeline();  // the kernels stamp nothing again
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Forgets the stamps taken so far (synchronises the device).
  void clear();
  // The times stamped since the last clear, in ns, at most `room` (synchronises the device).
  // `taken`: how many stamps the kernels tried to take (more than room: the rest were lost).
  std::vector<std::uint64_t> stamps(std::uint64_t* taken = nullptr) const;

 private:
  unsigned long long* buffer_ = nullptr;  // [0]: the count, then the times
  std::size_t room_ = 0;
};

}  // namespace switchyard::cuda
