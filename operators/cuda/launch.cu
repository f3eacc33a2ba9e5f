#include "operators/cuda/launch.cuh"

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "operators/cuda/device_facts.h"

namespace switchyard::cuda {

bool programmatic_launch_supported() { return current_device_facts().compute_capability_major >= 9; }

bool bf16_tensor_cores_supported() { return current_device_facts().compute_capability_major >= 8; }

namespace {

struct LeftOut {
  std::atomic<bool> any{false};
  std::mutex mutex;  // guards the rest
  std::vector<std::string> words;
  std::map<const void*, bool> decided;  // by kernel
  std::vector<std::string> names;       // of the kernels left out
};

LeftOut& left_out_state() {
  static LeftOut state;
  return state;
}

}  // namespace

void leave_out_kernels(std::vector<std::string> words) {
  LeftOut& state = left_out_state();
  const std::lock_guard lock(state.mutex);
  std::erase(words, std::string());
  state.words = std::move(words);
  state.decided.clear();
  state.names.clear();
  state.any.store(!state.words.empty(), std::memory_order_relaxed);
}

std::vector<std::string> kernels_left_out() {
  LeftOut& state = left_out_state();
  const std::lock_guard lock(state.mutex);
  return state.names;
}

bool left_out(const void* kernel) {
  LeftOut& state = left_out_state();
  if (!state.any.load(std::memory_order_relaxed)) return false;
  const std::lock_guard lock(state.mutex);
  const auto known = state.decided.find(kernel);
  if (known != state.decided.end()) return known->second;
  const char* name = nullptr;
  bool leave = false;
  if (cudaFuncGetName(&name, kernel) == cudaSuccess && name != nullptr) {
    for (const std::string& word : state.words) leave = leave || std::strstr(name, word.c_str()) != nullptr;
    if (leave) state.names.emplace_back(name);
  } else {
    cudaGetLastError();
  }
  state.decided.emplace(kernel, leave);
  return leave;
}

}  // namespace switchyard::cuda
