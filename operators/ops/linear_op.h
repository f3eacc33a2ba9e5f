#pragma once
// LinearOp and NormOp: a placed nn.Linear / RMSNorm on the device the plan gives it. On the CPU
// the weights are used in place from the checkpoint mapping; on a GPU they are uploaded once, in
// the dtype placement/weight_storage.h gives (bf16 and f32 as stored, ggml blocks as stored under
// KLinearMarlin, else dequantized to bf16), and the work is queued on the device's stream. Inputs and outputs live
// on the op's device: the framework moves activations at module boundaries, an op never does.
#include <memory>
#include <span>
#include <vector>

#include "operators/cpu/kernels/linear.h"
#include "operators/ops/build_context.h"
#include "operators/ops/device_runtime.h"
#include "operators/ops/pending_delta.h"

namespace switchyard {

class LinearOp {
 public:
  LinearOp() = default;
  // On the module's device (BuildContext::device_of).
  LinearOp(const BuildContext& context, const Module& linear);
  // On `device`, whatever the plan says (routed experts pick their phase's device themselves).
  // widen_to_f32: a GPU copy in f32 whatever the checkpoint holds (routers).
  LinearOp(const BuildContext& context, const Module& linear, Device device, bool widen_to_f32 = false);
  // A CPU weight that does not come from a checkpoint (benchmarks, tests): [out, in], and its bias
  // [out] or none.
  explicit LinearOp(Tensor weight, std::vector<float> bias = {})
      : weight_(std::move(weight)), in_(weight_.dim(1)), out_(weight_.dim(0)), bias_(std::move(bias)) {}
  // x: [tokens, in] f32 -> y: [tokens, out] f32, on device().
  void forward(const float* x, std::int64_t tokens, float* y) const;
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  // On the CPU the checkpoint's (mapped) copy; empty on a GPU, which holds the weight itself.
  const Tensor& weight() const { return weight_; }
  // This layer's product on the CPU as one call of a cpu::linear_batch (its weights alone: the
  // caller adds a bias, if it has one).
  cpu::LinearCall cpu_call(const float* x, std::int64_t tokens, float* y) const {
    return {x, tokens, in_features(), weight_.data(), weight_.dtype(), out_features(), y};
  }
  // y [tokens, out] += the bias, on the CPU: what forward adds after a cpu_call's product (nothing
  // without a bias).
  void add_cpu_bias(float* y, std::int64_t tokens) const;
  Device device() const;
  // The device's runtime, nullptr on the CPU.
  DeviceRuntime* gpu() const { return gpu_; }
  // The GPU copy ([out, in]: bf16, f32 or ggml blocks, as device_dtype says), for operators that
  // hand the weight to kernels themselves (cuda::gemv and gemv_swiglu take all three).
  const void* device_weight() const;
  DType device_dtype() const;
  // The same as the device holds it (null on the CPU).
  const DeviceTensor* device_tensor() const { return device_weight_.get(); }
  bool has_bias() const { return !bias_.empty(); }

  // Puts the GPU copies of `ops` (one GPU, one dtype, one in_features, no biases) in one buffer
  // (rows of blocks stack as rows of floats do),
  // their rows one after another, so that one GEMV launch computes them all; each op keeps
  // working on its own rows of it. Returns the stacked [sum of out, in] weight, or null (and
  // changes nothing) when the ops cannot be stacked.
  static const void* stack_on_device(std::span<LinearOp* const> ops);

 private:
  // [out, in] as weight_dtypes says, on the CPU only: a GPU op lets its host copy go once it is
  // uploaded (a copy converted at load, as KLinearTorch's bf16 of a GGUF's blocks, would otherwise
  // stay for the process's life).
  Tensor weight_;
  std::int64_t in_ = 0, out_ = 0;
  std::vector<float> bias_;   // [out] or empty
  DeviceRuntime* gpu_ = nullptr;
  std::shared_ptr<const DeviceTensor> device_weight_, device_bias_;
};

class NormOp {
 public:
  NormOp() = default;
  NormOp(const BuildContext& context, const Module& norm, float eps);
  NormOp(const BuildContext& context, const Module& norm, float eps, Device device);
  // x, out: [rows, width] f32 on device(), not overlapping.
  void forward(const float* x, std::int64_t rows, float* out) const;
  // x += delta, then out = norm(x): a residual addition and the norm after it (one launch on a GPU,
  // which also waits for and adds a part of the delta left on the host).
  void add_and_forward(float* x, const PendingDelta& delta, std::int64_t rows, float* out) const;
  std::int64_t width() const { return weight_.numel(); }
  Device device() const;
  float eps() const { return eps_; }
  // The GPU copy of the weight (bf16 or f32), for kernels that fuse the norm into other work.
  const void* device_weight() const;
  DType device_dtype() const;

 private:
  Tensor weight_;  // [width]
  float eps_ = 1e-6f;
  DeviceRuntime* gpu_ = nullptr;
  Tracer* tracer_ = nullptr;
  std::shared_ptr<const DeviceTensor> device_weight_;
};

}  // namespace switchyard
