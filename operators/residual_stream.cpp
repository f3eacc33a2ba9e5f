#include "operators/residual_stream.h"

#include <cstring>
#include <stdexcept>

#include "operators/activations.h"

#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/cuda_check.h"
#include "operators/gpu_runtime.h"
#endif

namespace switchyard {

ResidualStream::ResidualStream(DeviceRuntimes* runtimes, std::int64_t max_tokens, std::int64_t width)
    : runtimes_(runtimes), max_tokens_(max_tokens), width_(width) {
  const auto floats = static_cast<std::size_t>(max_tokens * width);
#if SWITCHYARD_HAVE_CUDA
  if (runtimes_ != nullptr && !runtimes_->all().empty()) {
    pinned_ = cuda::PinnedBuffer(floats * sizeof(float), "the residual stream's host copy");
    return;
  }
#endif
  host_.resize(floats);
}

namespace {

#if SWITCHYARD_HAVE_CUDA
float* device_buffer(std::map<int, cuda::DeviceBuffer>& buffers, DeviceRuntimes& runtimes, Device device,
                     std::size_t bytes, const char* what) {
  auto found = buffers.find(device.index);
  if (found == buffers.end())
    found = buffers.emplace(device.index, runtimes.get(device).context().allocate(bytes, what)).first;
  return found->second.as<float>();
}
#endif

}  // namespace

float* ResidualStream::buffer(Device device) {
#if SWITCHYARD_HAVE_CUDA
  if (device.is_cuda())
    return device_buffer(gpu_, *runtimes_, device, static_cast<std::size_t>(max_tokens_ * width_) * sizeof(float),
                         "the residual stream");
  if (pinned_.data() != nullptr) return pinned_.as<float>();
#endif
  if (device.is_cuda()) throw std::logic_error("ResidualStream: a GPU in a build without CUDA");
  return host_.data();
}

float* ResidualStream::delta(Device device) {
#if SWITCHYARD_HAVE_CUDA
  if (device.is_cuda())
    return device_buffer(gpu_delta_, *runtimes_, device, static_cast<std::size_t>(max_tokens_ * width_) * sizeof(float),
                         "a block's output for the residual stream");
#endif
  if (device.is_cuda()) throw std::logic_error("ResidualStream: a GPU in a build without CUDA");
  if (host_delta_.empty()) host_delta_.resize(static_cast<std::size_t>(max_tokens_ * width_));
  return host_delta_.data();
}

void ResidualStream::defer_add() { delta_pending_ = true; }

const float* ResidualStream::take_delta() {
  if (!delta_pending_) return nullptr;
  delta_pending_ = false;
  return delta(device_);
}

void ResidualStream::settle() {
  const float* pending = take_delta();
  if (pending == nullptr) return;
  GpuRuntime* gpu = nullptr;
#if SWITCHYARD_HAVE_CUDA
  if (device_.is_cuda()) gpu = &runtimes_->get(device_);
#endif
  add_in_place(gpu, buffer(device_), pending, tokens_ * width_);
}

float* ResidualStream::start(Device device, std::int64_t tokens) {
  if (tokens > max_tokens_) throw std::logic_error("ResidualStream: more tokens than it holds");
  tokens_ = tokens;
  device_ = device;
  delta_pending_ = false;
  return buffer(device);
}

float* ResidualStream::on(Device device) {
  if (device == device_) return buffer(device);
  settle();
  float* from = buffer(device_);
  float* to = buffer(device);
  const std::size_t bytes = static_cast<std::size_t>(tokens_ * width_) * sizeof(float);
#if SWITCHYARD_HAVE_CUDA
  if (device_.is_cpu()) {
    runtimes_->get(device).context().copy_to_device(to, from, bytes);
  } else if (device.is_cpu()) {
    runtimes_->get(device_).context().copy_to_host(to, from, bytes);
    runtimes_->synchronize();
  } else {
    runtimes_->synchronize();
    SWITCHYARD_CUDA_CHECK(cudaMemcpyPeer(to, device.index, from, device_.index, bytes));
  }
#else
  (void)from;
  (void)to;
  (void)bytes;
#endif
  device_ = device;
  return to;
}

}  // namespace switchyard
