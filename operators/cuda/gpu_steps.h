#pragma once
// GpuSteps: the CUDA backend's DeviceSteps (operators/ops/device_steps.h), the GPU side of a
// model's passes. It holds the embedding table on its GPU (when placed there), the head's output
// buffers on its GPU (GpuLogits), and, when decode steps can be graphs, the current decode graph
// (DecodeGraph: one per kind, profiled or not, greedy or not) and what chained greedy steps hand
// each other (DecodeChain).
#include <memory>
#include <utility>
#include <vector>

#include "operators/cuda/decode_chain.h"
#include "operators/cuda/decode_graph.h"
#include "operators/cuda/gpu_logits.h"
#include "operators/cuda/gpu_runtime.h"
#include "operators/ops/device_steps.h"

namespace switchyard {

class GpuSteps final : public DeviceSteps {
 public:
  // Uploads the embedding table when setup.embed_device is a GPU (synchronously).
  GpuSteps(DeviceRuntimes& runtimes, const StepsSetup& setup);

  void write_step(std::int64_t position, std::span<const std::int32_t> ids) override;
  void run_pass(const std::function<void()>& enqueue) override;
  void begin_pass(std::int64_t tokens, bool capturing) override;
  std::optional<Device> embedding_device(bool capturing) const override;
  void embed(float* hidden, std::int64_t tokens, bool capturing) override;
  void begin_layers() override;
  void begin_head() override;
  void head(const LinearOp& lm_head, const float* normed, std::int64_t rows, bool greedy, bool capturing) override;
  void end_pass() noexcept override;

  bool head_on_device() const override { return logits_ != nullptr; }
  std::vector<float> logits(std::int64_t rows) const override;
  std::int32_t greedy_id() const override { return logits_->greedy_id(); }

  bool graphs() const override { return graph_gpu_ != nullptr; }
  std::vector<float> graph_step(std::int32_t id, std::int64_t position, bool greedy,
                                const CaptureStep& capture) override;
  bool chains() const override;
  int chained_steps(std::int32_t id, std::int64_t position, int count, const std::function<bool(std::int32_t)>& on_token,
                    const CaptureStep& capture) override;
  std::optional<Device> graph_device() const override;
  std::size_t graph_devices() const override { return graph_ ? graph_->gpus() : 0; }
  void discard_graph() override;

 private:
  bool profiling() const { return setup_.tracer != nullptr && setup_.tracer->profiling(); }
  // The decode graph of this kind, captured if the one kept is of another kind or there is none.
  void ensure_graph(std::int32_t id, std::int64_t position, bool greedy, const CaptureStep& capture);
  // A graph step's inputs: the record written, the graph of this kind, the record uploaded.
  void prepare_graph_step(std::int32_t id, std::int64_t position, bool greedy, const CaptureStep& capture);

  DeviceRuntimes& runtimes_;
  StepsSetup setup_;
  GpuRuntime* embed_gpu_ = nullptr;                // the embedding's GPU, if it is on one
  std::unique_ptr<DeviceAllocation> embed_table_;  // [vocab, hidden] on embed_gpu_, in the host table's dtype
  std::unique_ptr<GpuLogits> logits_;              // the head's output, when the head is on a GPU
  GpuRuntime* graph_gpu_ = nullptr;  // the head's GPU, where graphs launch, when decode steps can be graphs
  std::unique_ptr<DecodeGraph> graph_;
  std::unique_ptr<DecodeChain> chain_;  // with graph_gpu_
  std::vector<std::pair<GpuRuntime*, int>> step_marks_;  // --profile's open step regions (begin_pass)
};

}  // namespace switchyard
