#pragma once
// What the GPU tests share: a replayable random seed, the visible skip without a GPU, copies to
// and from the device, random inputs, and CUDA graphs captured from a stream.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cuda/kernels/device_context.h"
#include "tests/test_seed.h"

namespace switchyard::testing {

// True, with a visible message, when the test must be skipped.
inline bool no_gpu() {
  if (cuda::device_count() > 0) return false;
  MESSAGE("skipped: no CUDA device");
  return true;
}

template <typename T>
cuda::DeviceBuffer to_device(cuda::DeviceContext& context, const std::vector<T>& host) {
  return context.upload(host.data(), host.size() * sizeof(T), "a test input");
}

template <typename T>
std::vector<T> to_host(cuda::DeviceContext& context, const void* device, std::size_t count) {
  std::vector<T> host(count);
  context.copy_to_host(host.data(), device, count * sizeof(T));
  context.synchronize();
  return host;
}

template <typename T>
std::vector<T> to_host(cuda::DeviceContext& context, const cuda::DeviceBuffer& buffer, std::size_t count) {
  return to_host<T>(context, buffer.data(), count);
}

inline std::vector<float> uniform(std::size_t count, float low, float high, std::mt19937& random) {
  std::uniform_real_distribution<float> value(low, high);
  std::vector<float> out(count);
  for (float& v : out) v = value(random);
  return out;
}

inline std::int64_t draw(std::int64_t low, std::int64_t high, std::mt19937& random) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(random);
}

// Softmax scales around 1/sqrt(width): flat to peaked.
inline float draw_scale(std::int64_t width, std::mt19937& random) {
  return static_cast<float>(std::uniform_real_distribution<double>(0.5, 8.0)(random) /
                            std::sqrt(static_cast<double>(width)));
}

// A weight in either dtype: the bytes for the device and the exact values for the reference.
struct Weight {
  std::vector<std::uint16_t> bf16;
  std::vector<float> f32;
  DType dtype;
  Weight(std::size_t n, DType type, std::mt19937& random) : f32(uniform(n, -1, 1, random)), dtype(type) {
    if (type != DType::bf16) return;
    bf16.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      bf16[i] = cpu::f32_to_bf16(f32[i]);
      f32[i] = cpu::bf16_to_f32(bf16[i]);
    }
  }
  cuda::DeviceBuffer upload(cuda::DeviceContext& context) const {
    return dtype == DType::bf16 ? context.upload(bf16.data(), bf16.size() * 2, "w")
                                    : context.upload(f32.data(), f32.size() * 4, "w");
  }
};


// A CUDA graph captured from what `enqueue` queues on `stream`, instantiated.
class CapturedGraph {
 public:
  template <typename Enqueue>
  CapturedGraph(cudaStream_t stream, Enqueue enqueue) {
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    try {
      enqueue();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream, &partial);
      if (partial != nullptr) cudaGraphDestroy(partial);
      cudaGetLastError();
      throw;
    }
    REQUIRE(cudaStreamEndCapture(stream, &graph_) == cudaSuccess);
    REQUIRE(cudaGraphInstantiate(&exec_, graph_, 0) == cudaSuccess);
  }
  ~CapturedGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  void launch(cudaStream_t stream) { REQUIRE(cudaGraphLaunch(exec_, stream) == cudaSuccess); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace switchyard::testing
