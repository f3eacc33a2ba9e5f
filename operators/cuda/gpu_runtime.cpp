#include "operators/cuda/gpu_runtime.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/kernels/gemv.h"
#include "operators/cuda/kernels/linear.h"
#include "operators/cuda/kernels/quant_gemv.h"
#include "operators/cuda/kernels/rms_norm.h"
#include "operators/cuda/kernels/silu_and_mul.h"
#include "core/half_float.h"

namespace switchyard {

GpuRuntime::GpuRuntime(DeviceRuntimes& owner, int logical, int physical)
    : owner_(owner),
      context_(logical, physical),
      step_host_(static_cast<std::size_t>(1 + owner.max_tokens()) * sizeof(std::int32_t), "the step's token ids"),
      timer_(physical, logical) {
  step_device_ = context_.allocate(step_host_.bytes(), "the step's token ids");
}

void GpuRuntime::write_step(std::int64_t position, std::span<const std::int32_t> ids) {
  if (static_cast<std::int64_t>(ids.size()) > owner_.max_tokens())
    throw std::logic_error("GpuRuntime::write_step: more tokens than the step buffers hold");
  auto* host = step_host_.as<std::int32_t>();
  host[0] = static_cast<std::int32_t>(position);
  std::memcpy(host + 1, ids.data(), ids.size_bytes());
  step_bytes_ = (1 + ids.size()) * sizeof(std::int32_t);
}

void GpuRuntime::upload_step() { context_.copy_to_device(step_device_.data(), step_host_.data(), step_bytes_); }

void GpuRuntime::copy_step_from(GpuRuntime& other, std::int64_t tokens) {
  context_.copy_from_peer(step_device_.data(), other.step_device_.data(), other.context_,
                          static_cast<std::size_t>(1 + tokens) * sizeof(std::int32_t));
}

const GpuRuntime::RopeTables& GpuRuntime::rope_tables(const RopeFrequencies& frequencies,
                                                      std::int64_t max_context) {
  std::vector<float> key = frequencies.inv_freq;
  key.push_back(frequencies.attention_factor);
  key.push_back(static_cast<float>(max_context));
  auto found = rope_tables_.find(key);
  if (found != rope_tables_.end()) return found->second;
  const std::size_t count = static_cast<std::size_t>(max_context) * frequencies.inv_freq.size();
  std::vector<float> cos(count), sin(count);
  rope_cos_sin(frequencies, 0, max_context, cos.data(), sin.data());
  RopeTables tables{context_.upload(cos.data(), count * sizeof(float), "RoPE cos table"),
                    context_.upload(sin.data(), count * sizeof(float), "RoPE sin table")};
  context_.synchronize();  // the host vectors go away
  return rope_tables_.emplace(std::move(key), std::move(tables)).first->second;
}

cuda::DeviceBuffer GpuRuntime::upload(const Tensor& tensor, DType& dtype, std::string_view what) {
  if (tensor.dtype() == DType::f16) {
    dtype = DType::f32;
    return upload_f32(tensor, what);
  }
  if (tensor.dtype() != DType::bf16 && tensor.dtype() != DType::f32 && !cuda::quant_gemv_dtype(tensor.dtype()))
    throw InputError(std::string(what) + ": weights of dtype " + dtype_name(tensor.dtype()) +
                     " cannot run on the GPU (bf16, f16, f32 and ggml's block types can)");
  dtype = tensor.dtype();
  // From the checkpoint's mapping: pageable memory, so the copy is done when this returns.
  cuda::DeviceBuffer buffer = context_.upload(tensor.data(), tensor.bytes(), what);
  context_.synchronize();
  return buffer;
}

cuda::DeviceBuffer GpuRuntime::upload_f32(const Tensor& tensor, std::string_view what) {
  std::vector<float> wide(static_cast<std::size_t>(tensor.numel()));
  widen_to_f32(tensor.dtype(), tensor.data(), wide.size(), wide.data());
  cuda::DeviceBuffer buffer = context_.upload(wide.data(), wide.size() * sizeof(float), what);
  context_.synchronize();
  return buffer;
}

std::unique_ptr<DeviceAllocation> GpuRuntime::allocate(std::size_t bytes, std::string_view what) {
  return std::make_unique<CudaMemory>(context_.allocate(bytes, what));
}

std::shared_ptr<const DeviceTensor> GpuRuntime::upload_weight(const Tensor& tensor, bool widen_to_f32,
                                                              std::string_view what) {
  auto copy = std::make_shared<DeviceTensor>();
  if (widen_to_f32) copy->memory = std::make_unique<CudaMemory>(upload_f32(tensor, what));
  else copy->memory = std::make_unique<CudaMemory>(upload(tensor, copy->dtype, what));
  return copy;
}

void GpuRuntime::copy_on_device(void* to, const void* from, std::size_t bytes) {
  SWITCHYARD_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream()));
}

void GpuRuntime::synchronize() { context_.synchronize(); }

int GpuRuntime::make_current() {
  int previous = -1;
  SWITCHYARD_CUDA_CHECK(cudaGetDevice(&previous));
  if (previous != context_.device()) SWITCHYARD_CUDA_CHECK(cudaSetDevice(context_.device()));
  return previous;
}

void GpuRuntime::restore_current(int previous) noexcept {
  if (previous >= 0 && cudaSetDevice(previous) != cudaSuccess) cudaGetLastError();
}

int GpuRuntime::begin_region(Tracer* tracer, Region region, int layer) {
  if (tracer == nullptr || !tracer->profiling()) return -1;
  return timer_.begin(stream(), region, layer);
}

void GpuRuntime::end_region(int mark) noexcept {
  if (mark < 0) return;
  try {
    timer_.end(stream(), mark);
  } catch (...) {
    // A failed event record only loses a profile mark; the stream's error surfaces at its sync.
  }
}

void GpuRuntime::linear(const float* x, std::int64_t tokens, std::int64_t in, const DeviceTensor& weight,
                        std::int64_t out, const DeviceTensor* bias, float* y) {
  cuda::linear(context_, x, tokens, in, weight.data(), weight.dtype, out, y);
  if (bias != nullptr) cuda::add_bias(y, static_cast<const float*>(bias->data()), tokens, out, stream());
}

void GpuRuntime::rms_norm(const float* x, std::int64_t rows, std::int64_t width, const DeviceTensor& weight,
                          float eps, float* out) {
  cuda::rms_norm(x, rows, width, weight.data(), weight.dtype, eps, out, stream());
}

void GpuRuntime::add_rms_norm(float* x, const PendingDelta& delta, std::int64_t rows, std::int64_t width,
                              const DeviceTensor& weight, float eps, float* out) {
  cuda::add_rms_norm(x, delta.device, rows, width, weight.data(), weight.dtype, eps, out, stream(),
                     cuda::HostAddend{delta.host, delta.flag});
}

void GpuRuntime::silu_and_mul(const float* gate, const float* up, std::int64_t count, float* out) {
  cuda::silu_and_mul(gate, up, count, out, stream());
}

void GpuRuntime::add_in_place(float* y, const float* x, std::int64_t count) {
  cuda::add_in_place(y, x, count, stream());
}

void GpuRuntime::add_from_host(const float* host, const float* device, std::int64_t count, float* into,
                               std::uint32_t* flag) {
  cuda::add_from_host(host, device, count, into, stream(), flag, /*wait_first=*/true);
}

bool GpuRuntime::has_gated_up(const float* x, std::int64_t tokens, std::int64_t in, const DeviceTensor& gate,
                              const DeviceTensor& up) {
  return gate.dtype == up.dtype && cuda::gemv_swiglu_supports(tokens, in, gate.dtype, gate.data(), up.data(), x);
}

void GpuRuntime::gated_up(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t width,
                          const DeviceTensor& gate, const DeviceTensor& up, float* h) {
  cuda::gemv_swiglu(tokens, in, width, gate.data(), up.data(), gate.dtype, x, h, stream());
}

std::int32_t* GpuRuntime::zeroed_counters(std::int64_t count) {
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(std::int32_t);
  if (counters_.empty() || counters_.back().bytes() < bytes) {
    // A larger set; the smaller ones stay, since kernels built earlier hold them.
    counters_.push_back(context_.allocate(std::max<std::size_t>(bytes, 256), "kernel counters"));
    SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(counters_.back().data(), 0, counters_.back().bytes(), stream()));
    context_.synchronize();
  }
  return counters_.back().as<std::int32_t>();
}

CpuExpertsHandOff& GpuRuntime::hand_off(int layers, std::int64_t hidden, int top_k) {
  if (!hand_off_) hand_off_ = std::make_unique<CpuExpertsHandOff>(context_, layers, owner_.max_tokens(), hidden, top_k);
  return *hand_off_;
}

GpuRuntime& DeviceRuntimes::get(Device device) {
  if (!device.is_cuda()) throw std::logic_error("DeviceRuntimes::get: " + device.str() + " is not a GPU");
  auto found = runtimes_.find(device.index);
  if (found != runtimes_.end()) return *found->second;
  auto runtime = std::make_unique<GpuRuntime>(*this, device.index, map_.physical(device.index));
  const int physical = runtime->context().device();
  for (const auto& [index, other] : runtimes_) {
    const int peer = other->context().device();
    if (peer == physical) continue;
    for (const auto& [from, to] : {std::pair{physical, peer}, std::pair{peer, physical}}) {
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || can == 0) {
        cudaGetLastError();
        continue;
      }
      const cuda::DeviceGuard guard(from);
      const cudaError_t enabled = cudaDeviceEnablePeerAccess(to, 0);
      if (enabled != cudaSuccess && enabled != cudaErrorPeerAccessAlreadyEnabled) SWITCHYARD_CUDA_CHECK(enabled);
      cudaGetLastError();  // clears cudaErrorPeerAccessAlreadyEnabled
    }
  }
  return *runtimes_.emplace(device.index, std::move(runtime)).first->second;
}

GpuRuntime* DeviceRuntimes::find(Device device) {
  if (!device.is_cuda()) return nullptr;
  auto found = runtimes_.find(device.index);
  return found == runtimes_.end() ? nullptr : found->second.get();
}

DeviceRuntimes::~DeviceRuntimes() { shutdown(); }

void DeviceRuntimes::shutdown() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void DeviceRuntimes::enqueue(const CpuExpertsHandOff::Job& job) {
  if (capturing_) {
    captured_.push_back(job);
    return;
  }
  {
    const std::lock_guard lock(mutex_);
    if (!worker_.joinable()) {
      // The worker's OpenMP team takes the size this thread was given (--cpu_infer).
      const int threads = omp_get_max_threads();
      worker_ = std::thread([this, threads] {
        omp_set_num_threads(threads);
        work();
      });
    }
    queue_.push_back(job);
    ++unfinished_;
  }
  changed_.notify_all();
}

std::vector<CpuExpertsHandOff::Job> DeviceRuntimes::end_capture() {
  capturing_ = false;
  return std::move(captured_);
}

void DeviceRuntimes::work() {
  for (;;) {
    CpuExpertsHandOff::Job job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    bool failed = false;
    {
      const std::lock_guard lock(mutex_);
      failed = error_ != nullptr;
    }
    try {
      // After an error the streams still wait for every job: let them through.
      if (failed) job.hand_off->release(job);
      else job.hand_off->run(job, &launching_, !skip_expert_work_.load(std::memory_order_relaxed));
    } catch (...) {
      job.hand_off->release(job);
      const std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    {
      const std::lock_guard lock(mutex_);
      --unfinished_;
    }
    changed_.notify_all();
  }
}

void DeviceRuntimes::serve() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return unfinished_ == 0; });
  if (error_) {
    const std::exception_ptr error = error_;
    error_ = nullptr;
    lock.unlock();
    for (auto& [index, runtime] : runtimes_)
      if (cudaStreamSynchronize(runtime->stream()) != cudaSuccess) cudaGetLastError();
    std::rethrow_exception(error);
  }
}

void DeviceRuntimes::wait_for_jobs(std::size_t jobs) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return unfinished_ <= jobs || error_ != nullptr; });
}

void DeviceRuntimes::throw_if_failed() {
  {
    const std::lock_guard lock(mutex_);
    if (!error_) return;
  }
  synchronize();
}

std::unique_ptr<DeviceAllocation> DeviceRuntimes::allocate_host(std::size_t bytes, std::string_view what) {
  return std::make_unique<PinnedMemory>(cuda::PinnedBuffer(bytes, what));
}

void DeviceRuntimes::copy_to_device(Device device, void* to, const void* from, std::size_t bytes) {
  get(device).context().copy_to_device(to, from, bytes);
}

void DeviceRuntimes::copy_to_host(Device device, void* to, const void* from, std::size_t bytes) {
  get(device).context().copy_to_host(to, from, bytes);
  synchronize();
}

void DeviceRuntimes::copy_between(Device sender, const void* from, Device receiver, void* to, std::size_t bytes) {
  cuda::DeviceContext& sending = get(sender).context();
  cuda::DeviceContext& receiving = get(receiver).context();
  receiving.wait_for(sending);
  receiving.copy_from_peer(to, from, sending, bytes);
}

void DeviceRuntimes::synchronize() {
  // Called while a step is queued (a layer on the CPU reads the GPU's result), this thread queues
  // nothing until it returns: the worker may ask the streams again, and see a fault.
  const bool was_launching = launching_.exchange(false, std::memory_order_acq_rel);
  struct Restore {
    std::atomic<bool>& flag;
    bool value;
    ~Restore() { flag.store(value, std::memory_order_release); }
  } restore{launching_, was_launching};
  {
    // Asleep while the worker runs the experts: no CUDA call and no polling takes a core from its
    // team (the jobs need only work already queued on the streams, so this ends).
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return unfinished_ == 0; });
  }
  for (auto& [index, runtime] : runtimes_) {
    // Then the streams' tails. Poll rather than block in the driver: a blocking-sync wait holds a
    // lock that the worker's stream query would wait behind. Spin, do not sleep: the worker has no
    // job left to take the core from, and a sleep of 20 us lasts ~70 us (the kernel's timer slack),
    // a gap between every two decode steps.
    cudaError_t status;
    while ((status = cudaStreamQuery(runtime->stream())) == cudaErrorNotReady) std::this_thread::yield();
    if (status != cudaSuccess) runtime->context().synchronize();  // raises the stream's error
  }
  serve();
}

}  // namespace switchyard
