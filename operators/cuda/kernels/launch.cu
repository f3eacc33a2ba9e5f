#include "operators/cuda/kernels/launch.cuh"

#include <atomic>
#include <map>
#include <mutex>

#include "operators/cuda/kernels/device_facts.h"
#include "operators/cuda/measure/leave_out.h"
#include "operators/cuda/measure/timeline.h"

namespace switchyard::cuda {

bool programmatic_launch_supported() { return current_device_facts().compute_capability_major >= 9; }

bool bf16_tensor_cores_supported() { return current_device_facts().compute_capability_major >= 8; }

namespace {

// The measuring aids' state (leave_out.h, timeline.h).
struct Aids {
  std::atomic<bool> on{false};  // words to leave out, or launches to record
  std::mutex mutex;             // guards the rest
  std::vector<std::string> words;
  std::map<const void*, bool> decided;  // by kernel
  std::vector<std::string> names;       // of the kernels left out
  bool recording = false;
  std::vector<std::string> launches;    // recorded, by name
  std::vector<LaunchMark> marks;
  std::map<const void*, std::string> kernel_names;

  void update() { on.store(!words.empty() || recording, std::memory_order_relaxed); }
  const std::string& name_of(const void* kernel) {
    auto known = kernel_names.find(kernel);
    if (known != kernel_names.end()) return known->second;
    const char* name = nullptr;
    std::string found = "?";
    if (cudaFuncGetName(&name, kernel) == cudaSuccess && name != nullptr) found = name;
    else cudaGetLastError();
    return kernel_names.emplace(kernel, std::move(found)).first->second;
  }
};

Aids& aids() {
  static Aids state;
  return state;
}

std::vector<TimelineTarget>& timeline_targets() {
  static std::vector<TimelineTarget> targets;
  return targets;
}

}  // namespace

void leave_out_kernels(std::vector<std::string> words) {
  Aids& state = aids();
  const std::lock_guard lock(state.mutex);
  std::erase(words, std::string());
  state.words = std::move(words);
  state.decided.clear();
  state.names.clear();
  state.update();
}

std::vector<std::string> kernels_left_out() {
  Aids& state = aids();
  const std::lock_guard lock(state.mutex);
  return state.names;
}

bool measuring_aids_on() { return aids().on.load(std::memory_order_relaxed); }

bool measure_launch(const void* kernel) {
  Aids& state = aids();
  const std::lock_guard lock(state.mutex);
  bool leave = false;
  if (!state.words.empty()) {
    const auto known = state.decided.find(kernel);
    if (known != state.decided.end()) {
      leave = known->second;
    } else {
      const std::string& name = state.name_of(kernel);
      for (const std::string& word : state.words) leave = leave || name.find(word) != std::string::npos;
      if (leave) state.names.push_back(name);
      state.decided.emplace(kernel, leave);
    }
  }
  if (state.recording && !leave) state.launches.push_back(state.name_of(kernel));
  return leave;
}

void record_launches() {
  Aids& state = aids();
  const std::lock_guard lock(state.mutex);
  state.launches.clear();
  state.marks.clear();
  state.recording = true;
  state.update();
}

std::vector<std::string> recorded_launches() {
  Aids& state = aids();
  const std::lock_guard lock(state.mutex);
  state.recording = false;
  state.update();
  return std::move(state.launches);
}

void mark_launches(const char* label) {
  if (!measuring_aids_on()) return;
  Aids& state = aids();
  const std::lock_guard lock(state.mutex);
  if (state.recording) state.marks.push_back({label, state.launches.size()});
}

std::vector<LaunchMark> recorded_marks() {
  Aids& state = aids();
  const std::lock_guard lock(state.mutex);
  return std::move(state.marks);
}

bool register_timeline_target(TimelineTarget target) {
  timeline_targets().push_back(target);
  return true;
}

void point_timelines(unsigned long long* stamps, unsigned long long room) {
  for (const TimelineTarget target : timeline_targets())
    check_cuda(target(stamps, room), "cudaMemcpyToSymbol (the timeline's stamps)", __FILE__, __LINE__);
}

}  // namespace switchyard::cuda
