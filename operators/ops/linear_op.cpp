#include "operators/ops/linear_op.h"

#include "operators/cpu/kernels/linear.h"
#include "operators/cuda/device_tensor.h"
#include "operators/cpu/kernels/rms_norm.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/kernels/linear.h"
#include "operators/cuda/kernels/rms_norm.h"
#include "operators/cuda/gpu_runtime.h"
#endif

namespace switchyard {

#if SWITCHYARD_HAVE_CUDA
namespace {

std::shared_ptr<const DeviceTensor> upload(GpuRuntime& gpu, const Tensor& tensor, const Module& module,
                                           const char* what) {
  auto copy = std::make_shared<DeviceTensor>();
  copy->buffer = gpu.upload(tensor, copy->dtype, std::string(module.name) + "." + what);
  return copy;
}

std::shared_ptr<const DeviceTensor> upload_f32(GpuRuntime& gpu, const Tensor& tensor, const Module& module,
                                               const char* what) {
  auto copy = std::make_shared<DeviceTensor>();
  copy->buffer = gpu.upload_f32(tensor, std::string(module.name) + "." + what);
  return copy;
}

}  // namespace
#endif

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
#if SWITCHYARD_HAVE_CUDA
  if (gpu_ == nullptr) return;
  device_weight_ = widen_to_f32 ? upload_f32(*gpu_, weight_, linear, "weight") : upload(*gpu_, weight_, linear, "weight");
  if (!bias_.empty()) device_bias_ = upload_f32(*gpu_, context.param(linear, "bias", {DType::f32, DType::bf16, DType::f16}), linear, "bias");
  weight_ = Tensor();  // the uploads are done (they synchronize)
#else
  (void)widen_to_f32;
#endif
}

Device LinearOp::device() const {
#if SWITCHYARD_HAVE_CUDA
  if (gpu_ != nullptr) return gpu_->where();
#endif
  return Device::cpu();
}

#if SWITCHYARD_HAVE_CUDA
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
    bytes += op->device_weight_->buffer.bytes();
  }
  auto stacked = std::make_shared<DeviceTensor>();
  stacked->dtype = first.device_weight_->dtype;
  stacked->buffer = first.gpu_->context().allocate(bytes, "stacked projection weights");
  std::size_t offset = 0;
  for (LinearOp* op : ops) {
    auto* at = static_cast<char*>(stacked->buffer.data()) + offset;
    SWITCHYARD_CUDA_CHECK(cudaMemcpyAsync(at, op->device_weight_->data(), op->device_weight_->buffer.bytes(),
                                          cudaMemcpyDeviceToDevice, first.gpu_->stream()));
    offset += op->device_weight_->buffer.bytes();
  }
  first.gpu_->context().synchronize();  // before the separate copies go
  offset = 0;
  for (LinearOp* op : ops) {
    auto view = std::make_shared<DeviceTensor>();
    view->dtype = stacked->dtype;
    view->view = static_cast<const char*>(stacked->buffer.data()) + offset;
    view->owner = stacked;
    offset += op->device_weight_->buffer.bytes();
    op->device_weight_ = std::move(view);
  }
  return stacked->buffer.data();
}
#else
const void* LinearOp::stack_on_device(std::span<LinearOp* const>) { return nullptr; }
const void* LinearOp::device_weight() const { return nullptr; }
DType LinearOp::device_dtype() const { return weight_.dtype(); }
#endif

void LinearOp::forward(const float* x, std::int64_t tokens, float* y) const {
#if SWITCHYARD_HAVE_CUDA
  if (gpu_ != nullptr) {
    cuda::linear(gpu_->context(), x, tokens, in_features(), device_weight_->data(), device_weight_->dtype,
                 out_features(), y);
    if (device_bias_)
      cuda::add_bias(y, device_bias_->buffer.as<float>(), tokens, out_features(), gpu_->stream());
    return;
  }
#endif
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
#if SWITCHYARD_HAVE_CUDA
  if (gpu_ != nullptr) device_weight_ = upload(*gpu_, weight_, norm, "weight");
#endif
}

#if SWITCHYARD_HAVE_CUDA
const void* NormOp::device_weight() const { return device_weight_ ? device_weight_->data() : nullptr; }
DType NormOp::device_dtype() const { return device_weight_ ? device_weight_->dtype : weight_.dtype(); }
#else
const void* NormOp::device_weight() const { return nullptr; }
DType NormOp::device_dtype() const { return weight_.dtype(); }
#endif

Device NormOp::device() const {
#if SWITCHYARD_HAVE_CUDA
  if (gpu_ != nullptr) return gpu_->where();
#endif
  return Device::cpu();
}

void NormOp::forward(const float* x, std::int64_t rows, float* out) const {
#if SWITCHYARD_HAVE_CUDA
  if (gpu_ != nullptr) {
    cuda::rms_norm(x, rows, width(), device_weight_->data(), device_weight_->dtype, eps_, out, gpu_->stream());
    return;
  }
#endif
  cpu::rms_norm(x, rows, width(), weight_.data(), weight_.dtype(), eps_, out);
}

void NormOp::add_and_forward(float* x, const PendingDelta& delta, std::int64_t rows, float* out) const {
#if SWITCHYARD_HAVE_CUDA
  if (gpu_ != nullptr) {
    auto launch = [&] {
      cuda::add_rms_norm(x, delta.device, rows, width(), device_weight_->data(), device_weight_->dtype, eps_, out,
                         gpu_->stream(), cuda::HostAddend{delta.host, delta.flag});
    };
    if (delta.host == nullptr) return launch();
    // This launch is where the GPU waits for the CPU experts of delta.layer: their sync region.
    const GpuScope scope(*gpu_, tracer_, Region::cpuinfer_sync, delta.layer);
    return launch();
  }
#endif
  if (delta.host != nullptr) throw std::logic_error("NormOp: a delta on the host for a norm on the CPU");
  const std::int64_t n = rows * width();
  if (delta.device != nullptr)
    for (std::int64_t i = 0; i < n; ++i) x[i] += delta.device[i];
  forward(x, rows, out);
}

}  // namespace switchyard
