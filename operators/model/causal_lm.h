#pragma once
// CausalLM: the placed model as operators. The model operator calls its decoder layers, each
// layer calls its attention and feed-forward operators, and those call their projections: the
// same tree the rules were written against, built from the PlacementPlan (there is no second
// path around the rules) with weights from the checkpoint.
//
// Devices: every operator runs where the plan puts it; the residual stream moves to each layer's
// device where the plan's transfer_map says (and to a layer half's, where the halves differ:
// operators/model/residual_stream.h). On GPUs, work is queued on each device's stream, and CPU
// experts under a GPU MoE block are served by the CPU worker while the GPUs work. When the decoder
// stack and the head run on GPUs, one or several, a decode step is one CUDA graph (captured at the
// first decode step, replayed after) including the CPU-expert hand-offs and the hand-overs
// between GPUs (operators/cuda/decode_graph.h). What a pass does on devices other than the CPU
// (the step's inputs, a device's embedding and head, the graphs) is the backend's DeviceSteps
// (operators/ops/device_steps.h); this class names no backend.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "core/device_map.h"
#include "operators/model/decoder_layer.h"
#include "operators/model/residual_stream.h"
#include "operators/ops/build_context.h"
#include "operators/ops/device_runtime.h"
#include "operators/ops/device_steps.h"
#include "operators/ops/linear_op.h"

namespace switchyard {

struct CausalLMOptions {
  bool use_cuda_graph = true;  // decode steps as CUDA graphs where the stack runs on one GPU
  std::int64_t prefill_chunk = 512;  // most tokens per forward pass; longer prompts run in chunks
  DeviceMap device_map;  // the physical GPU of each of the plan's (logical) GPUs: --device_map
  // Called as the model is built: the parameter bytes of the parts built so far (the embedding,
  // each decoder layer, the head) and of all of them.
  std::function<void(std::uint64_t done_bytes, std::uint64_t total_bytes)> on_progress;
};

class CausalLM {
 public:
  explicit CausalLM(const BuildContext& context, CausalLMOptions options = {});
  ~CausalLM();
  CausalLM(const CausalLM&) = delete;
  CausalLM& operator=(const CausalLM&) = delete;

  // Runs `ids` at positions [position, position + ids.size()) and returns the logits of the last
  // token ([vocab]) or, with all_logits, of every token ([tokens, vocab]).
  std::vector<float> forward(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits = false);
  // As forward for the last token, but returns its greedy choice, cpu::argmax of its logits. With
  // the head on a GPU the choice is made there and only the id comes back, not [vocab] logits.
  std::int32_t forward_greedy(std::span<const std::int32_t> ids, std::int64_t position);
  // Greedy decode: up to `count` steps from token `id` at `position`, each step's choice the next
  // one's token. on_token gets every new token in order and returns false to stop there. Returns how
  // many tokens it gave. Where decode steps are CUDA graphs and neither the profile nor NVTX ranges
  // are on (they delimit steps on the host), steps follow each other on the device: a step's choice
  // and position go to the next through device memory (cuda::NextStep), the embedding row is read
  // by the GPU (from mapped host memory when the embedding is placed on the CPU), and step k + 1 is
  // queued before step k's token reaches the host (a step queued behind a stop runs; its token is
  // dropped). Otherwise one forward_greedy a step. Positions up to position + count - 1 must fit.
  int decode_greedy(std::int32_t id, std::int64_t position, int count,
                    const std::function<bool(std::int32_t)>& on_token);
  // Whether decode_greedy runs its steps back to back on the device.
  bool chains_decode_steps() const;
  std::int64_t vocab_size() const { return vocab_; }
  // Throws InputError for an id outside [0, vocab_size()) (forward checks its ids with it).
  void check_token_ids(std::span<const std::int32_t> ids) const;
  std::int64_t max_context() const { return max_context_; }
  // Bytes of KV cache the attention layers hold (allocated), in all or on `device`.
  std::size_t kv_cache_bytes() const;
  std::size_t kv_cache_bytes(Device device) const;
  // The GPU whose stream launches the decode steps' CUDA graphs (the head's), if they are graphs.
  std::optional<Device> graph_device() const;
  // How many GPUs a decode graph spans (0 before the first graph step or without graphs).
  std::size_t graph_gpus() const;
  // Benchmarks: with skip, the CPU experts' hand-offs go on as usual but their work is not done
  // (the GPU reads back whatever the buffers hold), which times the GPU side of a hybrid step
  // alone. The logits are then meaningless.
  void skip_cpu_expert_work(bool skip);
  // Benchmarks: the next decode step captures its graph again (after cuda::leave_out_kernels), and
  // the CPU experts' hand-off flags start from 0 again (a step with launches left out may have left
  // one up).
  void discard_decode_graph();
  // "cuda:0 (attention, shared experts, ...)"-style summary of where the layers run.
  std::string placement_summary() const;

 private:
  std::vector<float> run_chunk(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits);
  // Host part of a pass: step inputs and, with the embedding on the CPU, the embedded rows.
  void prepare(std::span<const std::int32_t> ids, std::int64_t position);
  // Device part: everything queued on the devices' streams (or run, on the CPU). `capturing`:
  // within a decode graph's capture (DeviceSteps::graph_step).
  void enqueue(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits, bool capturing = false);
  // DeviceSteps::CaptureStep: one decode step's pass, queued for a capture.
  DeviceSteps::CaptureStep capture_step();

  Tracer* tracer_;
  CausalLMOptions options_;
  std::unique_ptr<Accelerators> runtimes_;  // nullptr: a build without a backend with devices
  Tensor embedding_;  // [vocab, hidden] f32 | bf16 | f16 | blocks, on the CPU
  Device embed_device_, final_device_;
  std::vector<std::unique_ptr<DecoderLayer>> layers_;
  NormOp final_norm_;
  LinearOp lm_head_;
  DeviceRuntime* head_runtime_ = nullptr;  // the head's device, nullptr for the CPU
  std::unique_ptr<ResidualStream> stream_;
  std::int64_t vocab_, hidden_, max_context_;
  std::vector<float> logits_;  // the CPU head's output
  // The device side of the passes, when any part of the model runs on a device (not the CPU).
  std::unique_ptr<DeviceSteps> steps_;
  bool greedy_ = false;  // within forward_greedy: a device's head writes the argmax, not the logits
  // greedy_ set for a scope.
  struct GreedyScope {
    bool& flag;
    explicit GreedyScope(bool& greedy) : flag(greedy) { flag = true; }
    ~GreedyScope() { flag = false; }
    GreedyScope(const GreedyScope&) = delete;
    GreedyScope& operator=(const GreedyScope&) = delete;
  };
};

}  // namespace switchyard
