#include "operators/cuda/cpu_experts_hand_off.h"

#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/elementwise.h"

namespace switchyard {

CpuExpertsHandOff::CpuExpertsHandOff(cuda::DeviceContext& context, int layers, std::int64_t max_tokens,
                                     std::int64_t hidden, int top_k)
    : context_(context),
      max_tokens_(max_tokens),
      hidden_(hidden),
      top_k_(top_k),
      x_(static_cast<std::size_t>(max_tokens * hidden) * sizeof(float), "the CPU experts' input"),
      ids_(static_cast<std::size_t>(max_tokens * top_k) * sizeof(std::int32_t), "the CPU experts' routing"),
      weights_(static_cast<std::size_t>(max_tokens * top_k) * sizeof(float), "the CPU experts' routing weights"),
      out_(static_cast<std::size_t>(max_tokens * hidden) * sizeof(float), "the CPU experts' output"),
      flags_(2 * layers) {
  x_device_ = x_.device_view_as<float>();
  ids_device_ = ids_.device_view_as<std::int32_t>();
  weights_device_ = weights_.device_view_as<float>();
  out_device_ = out_.device_view_as<float>();
}

CpuExpertsHandOff::Job CpuExpertsHandOff::submit(int layer, const float* x, const std::int32_t* ids,
                                                 const float* weights, std::int64_t tokens,
                                                 const ExpertsWork& experts, Tracer* tracer) {
  Job handed = job(layer, tokens, experts, tracer);
  cuda::write_to_host(x, tokens * hidden_, ids, weights, tokens * top_k_, x_device_, ids_device_, weights_device_,
                      context_.stream());
  flags_.stream_write(context_.stream(), 2 * layer, 1);
  return handed;
}

cuda::GateHandOff CpuExpertsHandOff::gate_hand_off(int layer, const float* x) {
  return cuda::GateHandOff{x, hidden_, x_device_, ids_device_, weights_device_, flags_.device_flag(2 * layer)};
}

CpuExpertsHandOff::Job CpuExpertsHandOff::job(int layer, std::int64_t tokens, const ExpertsWork& experts,
                                              Tracer* tracer) {
  if (tokens > max_tokens_)
    throw std::logic_error("CpuExpertsHandOff: " + std::to_string(tokens) + " tokens, buffers for " +
                           std::to_string(max_tokens_));
  return Job{this, layer, &experts, tokens, top_k_, tracer};
}

void CpuExpertsHandOff::collect(int layer, float* out, std::int64_t tokens, const float* add) {
  // One token: the read-back kernel waits for done[L] itself (no stream-wait node between it and
  // the kernel before, which it would keep from launching early). The same launch clears done[L]
  // for the next round.
  const bool kernel_waits = tokens == 1;
  if (!kernel_waits) flags_.stream_wait(context_.stream(), 2 * layer + 1, 1);
  cuda::add_from_host(out_device_, add, tokens * hidden_, out, context_.stream(), flags_.device_flag(2 * layer + 1),
                      kernel_waits);
}

PendingDelta CpuExpertsHandOff::pending(int layer, const float* add) {
  return PendingDelta{add, out_device_, flags_.device_flag(2 * layer + 1), layer};
}

void CpuExpertsHandOff::run(const Job& job, const std::atomic<bool>* launching, bool compute) {
  flags_.host_wait(2 * job.layer, 1, job.watched != nullptr ? job.watched : context_.stream(), launching);
  flags_.host_write(2 * job.layer, 0);
  if (compute) {
    const Tracer::Scope scope(job.tracer, Region::routed_experts, job.layer);
    job.experts->forward(x_.as<float>(), job.tokens, ids_.as<std::int32_t>(), weights_.as<float>(), job.top_k,
                         out_.as<float>());
  }
  flags_.host_write(2 * job.layer + 1, 1);
}

void CpuExpertsHandOff::reset_flags() {
  for (int i = 0; i < flags_.count(); ++i) flags_.host_write(i, 0);
}

void CpuExpertsHandOff::release(const Job& job) {
  flags_.host_write(2 * job.layer, 0);
  flags_.host_write(2 * job.layer + 1, 1);
}

}  // namespace switchyard
