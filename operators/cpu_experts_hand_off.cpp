#include "operators/cpu_experts_hand_off.h"

#include <stdexcept>
#include <string>

#include "operators/feed_forward_op.h"

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
      flags_(2 * layers) {}

CpuExpertsHandOff::Job CpuExpertsHandOff::submit(int layer, const float* x, const std::int32_t* ids,
                                                 const float* weights, std::int64_t tokens,
                                                 const RoutedExperts& experts, Tracer* tracer) {
  if (tokens > max_tokens_)
    throw std::logic_error("CpuExpertsHandOff: " + std::to_string(tokens) + " tokens, buffers for " +
                           std::to_string(max_tokens_));
  context_.copy_to_host(x_.data(), x, static_cast<std::size_t>(tokens * hidden_) * sizeof(float));
  context_.copy_to_host(ids_.data(), ids, static_cast<std::size_t>(tokens * top_k_) * sizeof(std::int32_t));
  context_.copy_to_host(weights_.data(), weights, static_cast<std::size_t>(tokens * top_k_) * sizeof(float));
  flags_.stream_write(context_.stream(), 2 * layer, 1);
  return Job{this, layer, &experts, tokens, top_k_, tracer};
}

void CpuExpertsHandOff::collect(int layer, float* out, std::int64_t tokens) {
  flags_.stream_wait(context_.stream(), 2 * layer + 1, 1);
  flags_.stream_write(context_.stream(), 2 * layer + 1, 0);
  context_.copy_to_device(out, out_.data(), static_cast<std::size_t>(tokens * hidden_) * sizeof(float));
}

void CpuExpertsHandOff::run(const Job& job) {
  flags_.host_wait(2 * job.layer, 1, context_.stream());
  flags_.host_write(2 * job.layer, 0);
  {
    const Tracer::Scope scope(job.tracer, Region::routed_experts, job.layer);
    job.experts->forward(x_.as<float>(), job.tokens, ids_.as<std::int32_t>(), weights_.as<float>(), job.top_k,
                         out_.as<float>());
  }
  flags_.host_write(2 * job.layer + 1, 1);
}

void CpuExpertsHandOff::release(const Job& job) {
  flags_.host_write(2 * job.layer, 0);
  flags_.host_write(2 * job.layer + 1, 1);
}

}  // namespace switchyard
