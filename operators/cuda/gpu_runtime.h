#pragma once
// GpuRuntime: what the GPU operators of one device share, and DeviceRuntimes: all of a model's.
//
// Per device: the device context (stream, cuBLAS, memory pool), the step's inputs in device memory
// (the first position and the token ids, copied from pinned memory before every forward, so that
// a captured CUDA graph replays at any position), RoPE tables for every position, the
// CPU-experts hand-off and the profile timer. All of a device's work runs on its one stream.
//
// DeviceRuntimes runs the host's side of the CPU-expert hand-offs on its own thread (the
// "cpuinfer" worker, with --cpu_infer OpenMP threads of its own), in the order the layers were
// queued, while this thread goes on queuing GPU work: a launch that blocks because the driver's
// queue is full (a long eager step, a large graph) cannot stall the experts the GPU waits for.
// Anything that needs a GPU result on the host calls synchronize(), which waits for the streams
// and the worker.
//
// The worker's OpenMP team should be the only one in the process: libgomp counts the idle pooled
// threads of every team it has made, and once they outnumber the cores, every team's barriers
// sleep after ~100 spins, so each of the experts' parallel regions pays futex wake-ups (~35% on
// the GPU machine). The threads that launch GPU work therefore run no OpenMP regions of their
// own in a hybrid decode, and the STREAM measurement runs on a thread that ends.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <memory>
#include <thread>
#include <utility>
#include <span>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/device_map.h"
#include "core/tensor.h"
#include "core/trace.h"
#include "operators/ops/device_runtime.h"
#include "operators/ops/rope_tables.h"
#include "operators/cuda/cpu_experts_hand_off.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/gpu_timer.h"

namespace switchyard {

class DeviceRuntimes;

// The CUDA backend's DeviceRuntime (operators/ops/device_runtime.h): every DeviceRuntime in a
// build with this backend is a GpuRuntime (as_gpu).
class GpuRuntime final : public DeviceRuntime {
 public:
  // Logical GPU cuda:`logical` on this process's GPU `physical` (core/device_map.h).
  GpuRuntime(DeviceRuntimes& owner, int logical, int physical);
  GpuRuntime(const GpuRuntime&) = delete;
  GpuRuntime& operator=(const GpuRuntime&) = delete;

  cuda::DeviceContext& context() { return context_; }
  cudaStream_t stream() const { return context_.stream(); }
  Device where() const override { return context_.where(); }
  DeviceRuntimes& runtimes() { return owner_; }

  // DeviceRuntime: the device-neutral ops' work on this GPU's stream.
  std::unique_ptr<DeviceAllocation> allocate(std::size_t bytes, std::string_view what) override;
  std::shared_ptr<const DeviceTensor> upload_weight(const Tensor& tensor, bool widen_to_f32,
                                                    std::string_view what) override;
  void copy_on_device(void* to, const void* from, std::size_t bytes) override;
  void synchronize() override;
  int make_current() override;
  void restore_current(int previous) noexcept override;
  int begin_region(Tracer* tracer, Region region, int layer) override;
  void end_region(int mark) noexcept override;
  void linear(const float* x, std::int64_t tokens, std::int64_t in, const DeviceTensor& weight, std::int64_t out,
              const DeviceTensor* bias, float* y) override;
  void rms_norm(const float* x, std::int64_t rows, std::int64_t width, const DeviceTensor& weight, float eps,
                float* out) override;
  void add_rms_norm(float* x, const PendingDelta& delta, std::int64_t rows, std::int64_t width,
                    const DeviceTensor& weight, float eps, float* out) override;
  void silu_and_mul(const float* gate, const float* up, std::int64_t count, float* out) override;
  void add_in_place(float* y, const float* x, std::int64_t count) override;
  void add_from_host(const float* host, const float* device, std::int64_t count, float* into,
                     std::uint32_t* flag) override;
  bool has_gated_up(const float* x, std::int64_t tokens, std::int64_t in, const DeviceTensor& gate,
                    const DeviceTensor& up) override;
  void gated_up(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t width, const DeviceTensor& gate,
                const DeviceTensor& up, float* h) override;

  // The step's inputs on the device: *position() is the first new token's position, ids() the
  // new tokens. write_step puts them in pinned memory (the stream must be idle: the previous step
  // synchronised); upload_step queues their copy to the device, the first work of an eager step and
  // the work queued before a decode graph's launch (a graph reads the record as it finds it, so a
  // greedy step can also leave it for the next: step_record).
  const std::int32_t* position() const { return step_device_.as<std::int32_t>(); }
  const std::int32_t* ids() const { return position() + 1; }
  // The same record, [position, ids...], for the kernel that ends a greedy step and writes the next
  // one's (cuda::argmax with cuda::NextStep), so that steps can follow each other on the device.
  std::int32_t* step_record() const { return step_device_.as<std::int32_t>(); }
  void write_step(std::int64_t position, std::span<const std::int32_t> ids);
  void upload_step();
  // Queued on this stream (after `other`'s work: DeviceContext::wait_for): `other`'s record, for
  // `tokens` tokens, into this one's; a decode graph's GPUs take the origin's record this way.
  void copy_step_from(GpuRuntime& other, std::int64_t tokens);

  // cos and sin for positions [0, max_context) at these frequencies, [max_context, rope_dim / 2],
  // made once per distinct frequency set.
  struct RopeTables {
    cuda::DeviceBuffer cos, sin;
  };
  const RopeTables& rope_tables(const RopeFrequencies& frequencies, std::int64_t max_context);

  // A checkpoint tensor on this device: bf16, f32 and ggml blocks as they are, f16 widened to f32
  // (cuBLAS's bf16 path has no f16 twin here). `dtype` receives the device copy's dtype.
  cuda::DeviceBuffer upload(const Tensor& tensor, DType& dtype, std::string_view what);
  // The same widened to f32 (routers, norms of f16 models).
  cuda::DeviceBuffer upload_f32(const Tensor& tensor, std::string_view what);

  // `count` int32 counters on this device, zero, for kernels that count their blocks in and leave
  // the counters zero again when they end (cuda::mla_decode_attention). One set per device, shared
  // by every layer (they run one after another on the stream); call at build time, not during a
  // capture. Returns at least `count` counters; a pointer returned stays valid while this runtime
  // lives.
  std::int32_t* zeroed_counters(std::int64_t count);

  // The hand-off buffers for CPU experts (one set per device, sized by the first caller).
  CpuExpertsHandOff& hand_off(int layers, std::int64_t hidden, int top_k);
  // The hand-off's flags back to 0 (CpuExpertsHandOff::reset_flags), where there is a hand-off.
  void reset_hand_off() {
    if (hand_off_) hand_off_->reset_flags();
  }

  GpuTimer& timer() { return timer_; }

 private:
  DeviceRuntimes& owner_;
  cuda::DeviceContext context_;
  cuda::PinnedBuffer step_host_;
  std::size_t step_bytes_ = 0;
  cuda::DeviceBuffer step_device_;
  std::map<std::vector<float>, RopeTables> rope_tables_;
  std::unique_ptr<CpuExpertsHandOff> hand_off_;
  std::vector<cuda::DeviceBuffer> counters_;  // the last is the largest
  GpuTimer timer_;
};

// The CUDA backend's Accelerators: the model's GPUs, and the CPU-experts worker they share.
class DeviceRuntimes final : public Accelerators {
 public:
  // max_tokens: the most tokens one forward pass runs (the prefill chunk). `map`: the physical
  // GPU of each logical one.
  explicit DeviceRuntimes(std::int64_t max_tokens, DeviceMap map = {}) : max_tokens_(max_tokens), map_(std::move(map)) {}
  ~DeviceRuntimes();
  DeviceRuntimes(const DeviceRuntimes&) = delete;
  DeviceRuntimes& operator=(const DeviceRuntimes&) = delete;

  // Created on first use; InputError when this build has no CUDA or the device is absent. Logical
  // GPUs on different physical ones can read each other's memory (peer access, where the GPUs
  // allow it; otherwise their copies go through the host).
  GpuRuntime& get(Device device) override;
  GpuRuntime* find(Device device);
  bool in_use() const override { return !runtimes_.empty(); }
  std::unique_ptr<DeviceAllocation> allocate_host(std::size_t bytes, std::string_view what) override;
  void copy_to_device(Device device, void* to, const void* from, std::size_t bytes) override;
  void copy_to_host(Device device, void* to, const void* from, std::size_t bytes) override;
  void copy_between(Device sender, const void* from, Device receiver, void* to, std::size_t bytes) override;
  std::int64_t max_tokens() const { return max_tokens_; }
  const std::map<int, std::unique_ptr<GpuRuntime>>& all() const { return runtimes_; }

  // The host's side of a hand-off, in layer order: to the worker, or, while a graph is captured
  // (nothing runs), to the capture's list.
  void enqueue(const CpuExpertsHandOff::Job& job);
  void begin_capture() { capturing_ = true; }
  // Around queuing a step's work (an eager step's launches, or a graph's jobs and its launch):
  // until it is queued, the worker must not take the idle stream for one that will never write its
  // flags, nor ask the stream at all (host_poll.h: the query can wait behind a launch that waits
  // for the worker).
  void set_launching(bool launching) { launching_.store(launching, std::memory_order_release); }
  // set_launching(true) for a scope.
  struct Launching {
    DeviceRuntimes& runtimes;
    explicit Launching(DeviceRuntimes& r) : runtimes(r) { runtimes.set_launching(true); }
    ~Launching() { runtimes.set_launching(false); }
    Launching(const Launching&) = delete;
    Launching& operator=(const Launching&) = delete;
  };
  std::vector<CpuExpertsHandOff::Job> end_capture();
  // Benchmarks: the worker still takes every hand-off but skips the experts' work.
  void skip_expert_work(bool skip) override { skip_expert_work_.store(skip, std::memory_order_relaxed); }
  // Waits until the worker has run every job queued so far; rethrows a job's error.
  void serve();
  // Asleep until at most `jobs` queued jobs are not yet done (the later steps' jobs, where steps
  // are queued ahead): the wait that takes no core from the worker's team.
  void wait_for_jobs(std::size_t jobs);
  // Rethrows a job's error, if one failed, after the streams and the worker are done; otherwise
  // returns at once (for a host that reads results while more work is queued).
  void throw_if_failed();
  // Waits for every stream and for the worker.
  void synchronize() override;
  // Stops the worker after the jobs it has (the owner calls this before the experts go away).
  void shutdown() override;
  // GpuSteps (operators/cuda/gpu_steps.h).
  std::unique_ptr<DeviceSteps> make_steps(const StepsSetup& setup) override;

 private:
  void work();

  std::int64_t max_tokens_;
  DeviceMap map_;
  std::map<int, std::unique_ptr<GpuRuntime>> runtimes_;  // by logical index
  bool capturing_ = false;
  std::vector<CpuExpertsHandOff::Job> captured_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<CpuExpertsHandOff::Job> queue_;
  std::size_t unfinished_ = 0;  // queued or running
  std::exception_ptr error_;
  bool stopping_ = false;
  std::atomic<bool> launching_{false};
  std::atomic<bool> skip_expert_work_{false};
  std::thread worker_;
};

// The GpuRuntime behind a DeviceRuntime of this build (nullptr for the CPU's nullptr).
inline GpuRuntime* as_gpu(DeviceRuntime* runtime) { return static_cast<GpuRuntime*>(runtime); }

// A block of a GPU's memory, or of page-locked host memory, as the device-neutral ops hold it.
class CudaMemory final : public DeviceAllocation {
 public:
  explicit CudaMemory(cuda::DeviceBuffer buffer) : buffer_(std::move(buffer)) {}
  void* data() const override { return buffer_.data(); }
  std::size_t bytes() const override { return buffer_.bytes(); }

 private:
  cuda::DeviceBuffer buffer_;
};
class PinnedMemory final : public DeviceAllocation {
 public:
  explicit PinnedMemory(cuda::PinnedBuffer buffer) : buffer_(std::move(buffer)) {}
  void* data() const override { return buffer_.data(); }
  std::size_t bytes() const override { return buffer_.bytes(); }

 private:
  cuda::PinnedBuffer buffer_;
};

}  // namespace switchyard
