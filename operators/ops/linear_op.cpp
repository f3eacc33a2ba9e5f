#include "operators/ops/linear_op.h"

#include <stdexcept>
#include <string>

#include "operators/cpu/kernels/linear.h"
#include "operators/cpu/kernels/rms_norm.h"
#include "operators/ops/activations.h"

namespace switchyard {
namespace {

// The weight dtypes a linear layer multiplies as stored, by where it runs: the CPU kernels take
// ggml's block types too (cpu::linear_supports), read in place; the GPU's f32, bf16 and f16, and
// BuildContext::param dequantizes anything else to bf16 once.
std::span<const DType> weight_dtypes(Device device) {
  static const std::vector<DType> cpu = [] {
    std::vector<DType> dtypes;
    for (const DTypeInfo& info : all_dtypes())
      if (cpu::linear_supports(info.dtype)) dtypes.push_back(info.dtype);
    return dtypes;
  }();
  static constexpr DType gpu[] = {DType::f32, DType::bf16, DType::f16};
  return device.is_cpu() ? std::span<const DType>(cpu) : std::span<const DType>(gpu);
}

// The weight as the device holds it: on a GPU the file's blocks where the plan keeps them there
// (placement/weight_storage.h; cuda::linear and cuda::gemv decode them), else floats.
Tensor load_weight(const BuildContext& context, const Module& linear, Device device, bool widen_to_f32) {
  if (device.is_cuda() && !widen_to_f32) {
    const DType resident = context.resident_dtype(linear, "weight", device);
    if (is_block_quantized(resident)) return context.param(linear, "weight", {resident});
  }
  return context.param(linear, "weight", weight_dtypes(device));
}

}  // namespace

LinearOp::LinearOp(const BuildContext& context, const Module& linear) : LinearOp(context, linear, context.device_of(linear)) {}

LinearOp::LinearOp(const BuildContext& context, const Module& linear, Device device, bool widen_to_f32)
    : weight_(load_weight(context, linear, device, widen_to_f32)), in_(weight_.dim(1)), out_(weight_.dim(0)),
      gpu_(context.gpu(device)) {
  for (const Parameter& p : linear.params)
    if (p.name == "bias") bias_ = context.param_f32(linear, "bias");
  if (gpu_ == nullptr) return;
  const std::string name(linear.name);
  device_weight_ = gpu_->upload_weight(weight_, widen_to_f32, name + ".weight");
  if (!bias_.empty())
    device_bias_ = gpu_->upload_weight(context.param(linear, "bias", {DType::f32, DType::bf16, DType::f16}),
                                       /*widen_to_f32=*/true, name + ".bias");
  weight_ = Tensor();  // the uploads are done (they synchronize)
}

Device LinearOp::device() const { return gpu_ != nullptr ? gpu_->where() : Device::cpu(); }

const void* LinearOp::device_weight() const { return device_weight_ ? device_weight_->data() : nullptr; }
DType LinearOp::device_dtype() const { return device_weight_ ? device_weight_->dtype : weight_.dtype(); }

const void* LinearOp::stack_on_device(std::span<LinearOp* const> ops) {
  if (ops.empty() || ops.front()->gpu_ == nullptr) return nullptr;
  const LinearOp& first = *ops.front();
  std::size_t bytes = 0;
  for (const LinearOp* op : ops) {
    if (op->gpu_ != first.gpu_ || op->device_bias_ || !op->device_weight_ || op->device_weight_->view != nullptr ||
        op->device_weight_->dtype != first.device_weight_->dtype || op->in_features() != first.in_features())
      return nullptr;
    bytes += op->device_weight_->bytes();
  }
  auto stacked = std::make_shared<DeviceTensor>();
  stacked->dtype = first.device_weight_->dtype;
  stacked->memory = first.gpu_->allocate(bytes, "stacked projection weights");
  std::size_t offset = 0;
  for (LinearOp* op : ops) {
    first.gpu_->copy_on_device(static_cast<char*>(stacked->memory->data()) + offset, op->device_weight_->data(),
                               op->device_weight_->bytes());
    offset += op->device_weight_->bytes();
  }
  first.gpu_->synchronize();  // before the separate copies go
  offset = 0;
  for (LinearOp* op : ops) {
    auto view = std::make_shared<DeviceTensor>();
    view->dtype = stacked->dtype;
    view->view = static_cast<const char*>(stacked->memory->data()) + offset;
    view->owner = stacked;
    offset += op->device_weight_->bytes();
    op->device_weight_ = std::move(view);
  }
  return stacked->memory->data();
}

void LinearOp::forward(const float* x, std::int64_t tokens, float* y) const {
  if (gpu_ != nullptr)
    return gpu_->linear(x, tokens, in_features(), *device_weight_, out_features(), device_bias_.get(), y);
  cpu::linear(x, tokens, in_features(), weight_.data(), weight_.dtype(), out_features(), y);
  add_cpu_bias(y, tokens);
}

void LinearOp::add_cpu_bias(float* y, std::int64_t tokens) const {
  if (bias_.empty()) return;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t o = 0; o < out_features(); ++o) y[t * out_features() + o] += bias_[static_cast<std::size_t>(o)];
}

NormOp::NormOp(const BuildContext& context, const Module& norm, float eps)
    : NormOp(context, norm, eps, context.device_of(norm)) {}

NormOp::NormOp(const BuildContext& context, const Module& norm, float eps, Device device)
    : weight_(context.param(norm, "weight", {DType::f32, DType::bf16})),
      eps_(eps),
      gpu_(context.gpu(device)),
      tracer_(context.tracer) {
  if (gpu_ != nullptr) device_weight_ = gpu_->upload_weight(weight_, /*widen_to_f32=*/false, std::string(norm.name) + ".weight");
}

const void* NormOp::device_weight() const { return device_weight_ ? device_weight_->data() : nullptr; }
DType NormOp::device_dtype() const { return device_weight_ ? device_weight_->dtype : weight_.dtype(); }

Device NormOp::device() const { return gpu_ != nullptr ? gpu_->where() : Device::cpu(); }

void NormOp::forward(const float* x, std::int64_t rows, float* out) const {
  if (gpu_ != nullptr) return gpu_->rms_norm(x, rows, width(), *device_weight_, eps_, out);
  cpu::rms_norm(x, rows, width(), weight_.data(), weight_.dtype(), eps_, out);
}

void NormOp::add_and_forward(float* x, const PendingDelta& delta, std::int64_t rows, float* out) const {
  if (gpu_ != nullptr) {
    if (delta.host == nullptr) return gpu_->add_rms_norm(x, delta, rows, width(), *device_weight_, eps_, out);
    // This launch is where the device waits for the CPU experts of delta.layer: their sync region.
    const WorkScope scope(gpu_, tracer_, Region::cpuinfer_sync, delta.layer);
    return gpu_->add_rms_norm(x, delta, rows, width(), *device_weight_, eps_, out);
  }
  if (delta.host != nullptr) throw std::logic_error("NormOp: a delta on the host for a norm on the CPU");
  const std::int64_t n = rows * width();
  if (delta.device != nullptr)
    for (std::int64_t i = 0; i < n; ++i) x[i] += delta.device[i];
  forward(x, rows, out);
}

}  // namespace switchyard
