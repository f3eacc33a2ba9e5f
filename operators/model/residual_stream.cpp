#include "operators/model/residual_stream.h"

#include <cstring>
#include <optional>
#include <stdexcept>

#include "operators/ops/activations.h"

#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/gpu_runtime.h"
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

void ResidualStream::defer_add(const PendingDelta& pending) {
  if (pending.host != nullptr && (!device_.is_cuda() || tokens_ != 1))
    throw std::logic_error("ResidualStream: a host part of a delta is for one token on a GPU");
  pending_ = pending;
}

PendingDelta ResidualStream::take_delta() {
  const PendingDelta taken = pending_;
  pending_ = PendingDelta{};
  return taken;
}

void ResidualStream::settle() {
  const PendingDelta pending = take_delta();
  if (pending.empty()) return;
  GpuRuntime* gpu = nullptr;
  const float* sum = pending.device;
#if SWITCHYARD_HAVE_CUDA
  std::optional<cuda::DeviceGuard> on;  // the stream's GPU: settle runs between layers, under no layer's guard
  if (device_.is_cuda()) {
    gpu = &runtimes_->get(device_);
    on.emplace(gpu->context().device());
  }
  if (pending.host != nullptr) {  // host + device part into the delta buffer, after the host's flag
    float* into = delta(device_);
    cuda::add_from_host(pending.host, pending.device, tokens_ * width_, into, gpu->stream(), pending.flag,
                        /*wait_first=*/true);
    sum = into;
  }
#endif
  add_in_place(gpu, buffer(device_), sum, tokens_ * width_);
}

float* ResidualStream::start(Device device, std::int64_t tokens) {
  if (tokens > max_tokens_) throw std::logic_error("ResidualStream: more tokens than it holds");
  tokens_ = tokens;
  device_ = device;
  pending_ = PendingDelta{};
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
    // GPU to GPU on the receiving stream, after the sending stream's work: no host
    // synchronisation, and a decode graph captures it. The sender's buffer is written again only
    // after a later hand-over back to it, which waits for this stream.
    cuda::DeviceContext& sender = runtimes_->get(device_).context();
    cuda::DeviceContext& receiver = runtimes_->get(device).context();
    receiver.wait_for(sender);
    receiver.copy_from_peer(to, from, sender, bytes);
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
