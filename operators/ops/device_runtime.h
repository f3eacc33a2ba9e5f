#pragma once
// The seam between the device-neutral ops (LinearOp, NormOp, MlpOp, the activations, the residual
// stream) and devices that are not the CPU. A backend with devices of its own (operators/cuda/)
// implements DeviceRuntime for each device and Accelerators for all of a model's; on the CPU the
// ops run their own host code and hold no runtime (nullptr).
//
// A runtime's work is queued on its device's one stream, in order, asynchronously to the host;
// pointers given to it are its device's memory unless said otherwise.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "core/device.h"
#include "core/tensor.h"
#include "core/trace.h"
#include "operators/ops/device_tensor.h"
#include "operators/ops/pending_delta.h"

namespace switchyard {

class DeviceSteps;
struct StepsSetup;

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual Device where() const = 0;

  // ---- memory --------------------------------------------------------------------------------
  // `what` names the block in an out-of-memory error ("the KV cache of layer 3").
  virtual std::unique_ptr<DeviceAllocation> allocate(std::size_t bytes, std::string_view what) = 0;
  // A checkpoint tensor on the device, synchronously: bf16, f32 and ggml blocks as they are, f16
  // widened to f32; with widen_to_f32, all of it in f32 (routers).
  virtual std::shared_ptr<const DeviceTensor> upload_weight(const Tensor& tensor, bool widen_to_f32,
                                                            std::string_view what) = 0;
  // `bytes` from `from` to `to`, both on this device.
  virtual void copy_on_device(void* to, const void* from, std::size_t bytes) = 0;
  // Waits for the work queued on this device.
  virtual void synchronize() = 0;

  // ---- the calling thread's current device ----------------------------------------------------
  // Makes this device current (a device's kernels set themselves up for the current one); returns
  // what restore_current takes to make the previous one current again.
  virtual int make_current() = 0;
  virtual void restore_current(int previous) noexcept = 0;

  // ---- traced regions -------------------------------------------------------------------------
  // With a profiling tracer, marks around the work queued between begin_region and end_region,
  // reported on the device's lane after the step; -1 (and nothing to end) otherwise.
  virtual int begin_region(Tracer* tracer, Region region, int layer) = 0;
  virtual void end_region(int mark) noexcept = 0;

  // ---- work, f32 activations --------------------------------------------------------------------
  // y [tokens, out] = x [tokens, in] weight^T, weight [out, in], plus bias [out] f32 if given.
  virtual void linear(const float* x, std::int64_t tokens, std::int64_t in, const DeviceTensor& weight,
                      std::int64_t out, const DeviceTensor* bias, float* y) = 0;
  // out [rows, width] = RMSNorm(x) * weight [width]; x, out do not overlap.
  virtual void rms_norm(const float* x, std::int64_t rows, std::int64_t width, const DeviceTensor& weight, float eps,
                        float* out) = 0;
  // x += delta (its device part, and its host part once the host has raised its flag), then
  // out = RMSNorm(x): one launch.
  virtual void add_rms_norm(float* x, const PendingDelta& delta, std::int64_t rows, std::int64_t width,
                            const DeviceTensor& weight, float eps, float* out) = 0;
  // out [count] = silu(gate) * up; out may be gate.
  virtual void silu_and_mul(const float* gate, const float* up, std::int64_t count, float* out) = 0;
  // y [count] += x.
  virtual void add_in_place(float* y, const float* x, std::int64_t count) = 0;
  // into [count] = host [count] (the device's view of mapped host memory, read once the host has
  // raised `flag`, which the launch clears) + device [count] (or nothing, when null): a delta that
  // the CPU left partly on the host.
  virtual void add_from_host(const float* host, const float* device, std::int64_t count, float* into,
                             std::uint32_t* flag) = 0;
  // Whether gated_up takes these: the device has one launch for these weights (one dtype), this x
  // and this many tokens.
  virtual bool has_gated_up(const float* x, std::int64_t tokens, std::int64_t in, const DeviceTensor& gate,
                            const DeviceTensor& up) = 0;
  // h [tokens, width] = silu(x gate^T) * (x up^T), one launch; gate and up [width, in].
  virtual void gated_up(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t width,
                        const DeviceTensor& gate, const DeviceTensor& up, float* h) = 0;
};

// All of a model's devices that are not the CPU, and the moves of activations between them and
// the host (the residual stream's, operators/model/residual_stream.h).
class Accelerators {
 public:
  virtual ~Accelerators() = default;
  // The runtime of `device`, made on first use; InputError when the device is absent.
  virtual DeviceRuntime& get(Device device) = 0;
  // Whether any device's runtime has been made.
  virtual bool in_use() const = 0;
  // Waits for every device, and for the host work that they wait on.
  virtual void synchronize() = 0;
  // Page-locked host memory, which devices copy to and from asynchronously.
  virtual std::unique_ptr<DeviceAllocation> allocate_host(std::size_t bytes, std::string_view what) = 0;
  // `bytes` from the host's `from` (page-locked) to `to` on `device`, queued there.
  virtual void copy_to_device(Device device, void* to, const void* from, std::size_t bytes) = 0;
  // `bytes` from `from` on `device` to the host's `to`; returns once they are there.
  virtual void copy_to_host(Device device, void* to, const void* from, std::size_t bytes) = 0;
  // `bytes` from `from` on `sender` to `to` on `receiver`, queued on the receiver after the
  // sender's work so far (no host wait: a decode graph captures it).
  virtual void copy_between(Device sender, const void* from, Device receiver, void* to, std::size_t bytes) = 0;

  // The device side of a model's passes over these devices (operators/ops/device_steps.h).
  virtual std::unique_ptr<DeviceSteps> make_steps(const StepsSetup& setup) = 0;
  // Benchmarks: host work that the devices wait on (routed experts on the CPU) is handed off and
  // answered as usual but not done, which times the devices' side alone.
  virtual void skip_expert_work(bool skip) = 0;
  // Stops the host work that the devices wait on, after what it has (before the ops that it runs
  // for go away).
  virtual void shutdown() = 0;
};

}  // namespace switchyard
