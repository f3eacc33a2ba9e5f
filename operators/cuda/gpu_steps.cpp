#include "operators/cuda/gpu_steps.h"

#include "operators/cuda/kernels/embedding.h"
#include "operators/cuda/measure/timeline.h"

namespace switchyard {

std::unique_ptr<DeviceSteps> DeviceRuntimes::make_steps(const StepsSetup& setup) {
  return std::make_unique<GpuSteps>(*this, setup);
}

GpuSteps::GpuSteps(DeviceRuntimes& runtimes, const StepsSetup& setup) : runtimes_(runtimes), setup_(setup) {
  if (setup_.embed_device.is_cuda()) {
    embed_gpu_ = &runtimes_.get(setup_.embed_device);
    embed_table_ = std::make_unique<CudaMemory>(embed_gpu_->context().upload(
        setup_.embedding->data(), setup_.embedding->bytes(), "the token embedding table"));
    embed_gpu_->context().synchronize();
  }
  if (setup_.head_device.is_cuda()) logits_ = std::make_unique<GpuLogits>(runtimes_.get(setup_.head_device), setup_.vocab);
  if (setup_.graphs && logits_ != nullptr) {
    graph_gpu_ = &logits_->gpu();
    // With the embedding on the CPU, a chained step gathers its row from the host table itself.
    chain_ = std::make_unique<DecodeChain>(setup_.embed_device.is_cpu() ? setup_.embedding : nullptr);
  }
}

void GpuSteps::write_step(std::int64_t position, std::span<const std::int32_t> ids) {
  for (const auto& [index, gpu] : runtimes_.all()) gpu->write_step(position, ids);
}

void GpuSteps::run_pass(const std::function<void()>& enqueue) {
  const std::int64_t start_ns = Tracer::now_ns();
  {
    // A long eager step fills the driver's queue: its launches then wait for the CPU experts.
    const DeviceRuntimes::Launching queuing(runtimes_);
    enqueue();
  }
  runtimes_.synchronize();
  if (profiling())
    for (const auto& [index, gpu] : runtimes_.all()) {
      GpuTimer::Step step = gpu->timer().take_step();
      gpu->timer().report(step, *setup_.tracer, start_ns);
      gpu->timer().recycle(step);
    }
}

void GpuSteps::begin_pass(std::int64_t tokens, bool capturing) {
  for (const auto& [index, gpu] : runtimes_.all()) {
    if (!capturing) gpu->upload_step();  // a graph's record is uploaded before it, or left by the step before
    if (!profiling()) continue;
    // With --profile, each GPU's whole step is a region too: what its regions leave out is launch
    // gaps and glue.
    gpu->timer().start_step(gpu->stream());
    step_marks_.emplace_back(gpu.get(), gpu->timer().begin(gpu->stream(), tokens == 1 ? Region::decode_step : Region::prefill, -1));
  }
}

void GpuSteps::end_pass() noexcept {
  for (auto [gpu, mark] : step_marks_) {
    try {
      gpu->timer().end(gpu->stream(), mark);
    } catch (...) {
      // a lost profile mark; the stream's error surfaces at its sync
    }
  }
  step_marks_.clear();
}

std::optional<Device> GpuSteps::embedding_device(bool capturing) const {
  if (embed_gpu_ != nullptr) return embed_gpu_->where();
  if (capturing) return setup_.first_layer_device;
  return std::nullopt;
}

void GpuSteps::embed(float* hidden, std::int64_t tokens, bool capturing) {
  const DType dtype = setup_.embedding->dtype();
  if (embed_gpu_ != nullptr) {
    cuda::embedding(embed_gpu_->ids(), tokens, embed_table_->data(), dtype, setup_.vocab, setup_.hidden, hidden,
                    embed_gpu_->stream());
    return;
  }
  if (!capturing || chain_ == nullptr) throw std::logic_error("GpuSteps::embed: the embedding is on the host");
  // The embedding on the CPU: its mapped table (DecodeChain), on the first layer's GPU.
  GpuRuntime& first = runtimes_.get(setup_.first_layer_device);
  cuda::embedding(first.ids(), tokens, chain_->embedding_device_view(), dtype, setup_.vocab, setup_.hidden, hidden,
                  first.stream());
}

// For bench decode --timeline: where the decoder layers begin and end.
void GpuSteps::begin_layers() { cuda::mark_launches(cuda::kLayersMark); }
void GpuSteps::begin_head() { cuda::mark_launches(cuda::kHeadMark); }

void GpuSteps::head(const LinearOp& lm_head, const float* normed, std::int64_t rows, bool greedy, bool capturing) {
  GpuLogits& out = *logits_;
  if (rows > 1) {
    lm_head.forward(normed, rows, out.all(rows));
    return;
  }
  lm_head.forward(normed, 1, out.row());
  // A decode graph's argmax also hands the next step its token and position (chained_steps).
  if (greedy)
    out.queue_argmax(capturing ? cuda::NextStep{out.gpu().step_record(), chain_->slots_device()} : cuda::NextStep{});
  else
    out.queue_row_to_host();
}

std::vector<float> GpuSteps::logits(std::int64_t rows) const {
  return rows == 1 ? logits_->host_row() : logits_->read_all(rows);
}

void GpuSteps::ensure_graph(std::int32_t id, std::int64_t position, bool greedy, const CaptureStep& capture) {
  const DecodeGraph::Kind kind{profiling(), greedy};
  if (graph_ && graph_->kind() == kind) return;
  graph_.reset();
  // Captured once (again when profiling or greedy is switched): the same kernels, hand-offs and
  // profile events as an eager step, reading the step's position and token from device memory (the
  // record uploaded before each launch, or left by the step before), the embedding row from the
  // table and the CPU experts' inputs from pinned memory.
  graph_ = std::make_unique<DecodeGraph>(runtimes_, *graph_gpu_, kind, [&] { capture(id, position); });
}

void GpuSteps::prepare_graph_step(std::int32_t id, std::int64_t position, bool greedy, const CaptureStep& capture) {
  write_step(position, std::span(&id, 1));
  ensure_graph(id, position, greedy, capture);
  graph_gpu_->upload_step();
}

std::vector<float> GpuSteps::graph_step(std::int32_t id, std::int64_t position, bool greedy,
                                        const CaptureStep& capture) {
  prepare_graph_step(id, position, greedy, capture);
  const std::int64_t start_ns = Tracer::now_ns();
  graph_->launch();
  runtimes_.synchronize();
  if (graph_->kind().profiled)
    for (const auto& [each, marks] : graph_->marks()) each->timer().report(marks, *setup_.tracer, start_ns);
  if (greedy) return {};  // greedy_id
  return logits_->host_row();
}

bool GpuSteps::chains() const {
  if (graph_gpu_ == nullptr || logits_ == nullptr) return false;
  return setup_.tracer == nullptr || !setup_.tracer->marks_steps();
}

int GpuSteps::chained_steps(std::int32_t id, std::int64_t position, int count,
                            const std::function<bool(std::int32_t)>& on_token, const CaptureStep& capture) {
  runtimes_.synchronize();  // nothing in flight: the token slots can be cleared
  chain_->clear_slots();
  int given = 0;
  try {
    prepare_graph_step(id, position, /*greedy=*/true, capture);
    graph_->launch();
    for (int k = 0; k < count; ++k) {
      const bool more = k + 1 < count;
      if (more) graph_->launch();  // its token and position come from step k, on the device
      const std::int32_t next =
          chain_->wait_for_token(runtimes_, *graph_gpu_, position + k + 1, more ? graph_->jobs() : 0);
      runtimes_.throw_if_failed();
      ++given;
      if (!on_token(next)) break;
    }
    runtimes_.synchronize();
  } catch (...) {
    try {
      runtimes_.synchronize();
    } catch (...) {
      // the first error is the one to report
    }
    throw;
  }
  return given;
}

std::optional<Device> GpuSteps::graph_device() const {
  if (graph_gpu_ == nullptr) return std::nullopt;
  return graph_gpu_->where();
}

void GpuSteps::discard_graph() {
  runtimes_.synchronize();  // no step still running
  graph_.reset();
  // Steps with launches left out may have left hand-off flags up: back to a finished step's state.
  for (const auto& [index, gpu] : runtimes_.all()) gpu->reset_hand_off();
}

}  // namespace switchyard
