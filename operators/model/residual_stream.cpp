#include "operators/model/residual_stream.h"

#include <stdexcept>

#include "operators/ops/activations.h"

namespace switchyard {

ResidualStream::ResidualStream(Accelerators* runtimes, std::int64_t max_tokens, std::int64_t width)
    : runtimes_(runtimes), max_tokens_(max_tokens), width_(width) {
  const auto floats = static_cast<std::size_t>(max_tokens * width);
  if (runtimes_ != nullptr && runtimes_->in_use()) {
    pinned_ = runtimes_->allocate_host(floats * sizeof(float), "the residual stream's host copy");
    return;
  }
  host_.resize(floats);
}

namespace {

float* device_buffer(std::map<int, std::unique_ptr<DeviceAllocation>>& buffers, Accelerators* runtimes, Device device,
                     std::size_t bytes, const char* what) {
  if (runtimes == nullptr) throw std::logic_error("ResidualStream: a device in a model without accelerators");
  auto found = buffers.find(device.index);
  if (found == buffers.end()) found = buffers.emplace(device.index, runtimes->get(device).allocate(bytes, what)).first;
  return static_cast<float*>(found->second->data());
}

}  // namespace

float* ResidualStream::buffer(Device device) {
  if (!device.is_cpu())
    return device_buffer(gpu_, runtimes_, device, static_cast<std::size_t>(max_tokens_ * width_) * sizeof(float),
                         "the residual stream");
  if (pinned_) return static_cast<float*>(pinned_->data());
  return host_.data();
}

float* ResidualStream::delta(Device device) {
  if (!device.is_cpu())
    return device_buffer(gpu_delta_, runtimes_, device,
                         static_cast<std::size_t>(max_tokens_ * width_) * sizeof(float),
                         "a block's output for the residual stream");
  if (host_delta_.empty()) host_delta_.resize(static_cast<std::size_t>(max_tokens_ * width_));
  return host_delta_.data();
}

void ResidualStream::defer_add(const PendingDelta& pending) {
  if (pending.host != nullptr && (device_.is_cpu() || tokens_ != 1))
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
  DeviceRuntime* runtime = device_.is_cpu() ? nullptr : &runtimes_->get(device_);
  // The stream's device current: settle runs between layers, under no layer's CurrentDevice.
  const CurrentDevice on(runtime);
  const float* sum = pending.device;
  if (pending.host != nullptr) {  // host + device part into the delta buffer, after the host's flag
    float* into = delta(device_);
    runtime->add_from_host(pending.host, pending.device, tokens_ * width_, into, pending.flag);
    sum = into;
  }
  add_in_place(runtime, buffer(device_), sum, tokens_ * width_);
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
  // GPU to GPU goes on the receiving stream, after the sending stream's work: no host
  // synchronisation, and a decode graph captures it. The sender's buffer is written again only
  // after a later hand-over back to it, which waits for this stream.
  if (device_.is_cpu()) runtimes_->copy_to_device(device, to, from, bytes);
  else if (device.is_cpu()) runtimes_->copy_to_host(device_, to, from, bytes);
  else runtimes_->copy_between(device_, from, device, to, bytes);
  device_ = device;
  return to;
}

}  // namespace switchyard
