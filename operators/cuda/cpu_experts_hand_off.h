#pragma once
// The hand-off between a MoE block on a GPU and its routed experts on the CPU
// (`KTransformersExperts{generate_device: cpu}` under a GPU MoE block), with no host callback:
//
//   stream:  gate ─► write x, ids, weights to pinned memory ─► write ready[L] ─► shared experts
//            ─► wait done[L] ─► clear done[L] ─► read the routed sum back, adding the shared
//   host:    wait ready[L] ─► clear it ─► routed experts on the worker threads ─► write done[L]
//
// For one token (decode) the gate's kernel does the first three steps itself, and the last three
// are the next norm's (pending(): the residual add + RMSNorm launch after the block waits for
// done[L], clears it and adds the routed sum), so the hand-off adds no node of its own to a
// graph.
//
// The flags are host-mapped memory written and awaited by stream memory operations
// (cuda/kernels/host_flag.h), so the whole sequence can live in a CUDA graph; the pinned buffers are
// static and mapped into the device, so one small kernel writes the inputs and one reads the result
// (no copy-engine round trips). submit() and collect() queue the stream's side and return at once; the host's side of
// each layer is a Job that DeviceRuntimes::serve runs in order while the GPU works.
#include <cstdint>

#include "core/trace.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/host_flag.h"
#include "operators/cuda/kernels/moe_gate.h"
#include "operators/ops/experts_work.h"
#include "operators/ops/pending_delta.h"

namespace switchyard {


class CpuExpertsHandOff {
 public:
  struct Job {
    CpuExpertsHandOff* hand_off;
    int layer;
    const ExpertsWork* experts;
    std::int64_t tokens;
    int top_k;
    Tracer* tracer;
    // The stream whose work writes the job's flag, which the host watches for a fault or a missing
    // write: the context's own, or (a graph spanning several GPUs) the stream the graph is
    // launched on. nullptr: the context's.
    cudaStream_t watched = nullptr;
  };

  // Pinned buffers for up to max_tokens tokens; flags for layers [0, layers).
  CpuExpertsHandOff(cuda::DeviceContext& context, int layers, std::int64_t max_tokens, std::int64_t hidden, int top_k);

  // Stream side (queued on the context's stream). x: [tokens, hidden]; ids, weights: [tokens, top_k].
  Job submit(int layer, const float* x, const std::int32_t* ids, const float* weights, std::int64_t tokens,
             const ExpertsWork& experts, Tracer* tracer);
  // One token: the stream side of submit() done by the gate's own launch instead (cuda::moe_gate
  // with this hand-off), and the job it hands over.
  cuda::GateHandOff gate_hand_off(int layer, const float* x);
  Job job(int layer, std::int64_t tokens, const ExpertsWork& experts, Tracer* tracer);
  // out: [tokens, hidden], the routed experts' sum once the host has computed it, plus `add`
  // ([tokens, hidden], the shared experts' output) when not null.
  void collect(int layer, float* out, std::int64_t tokens, const float* add);
  // One token, instead of collect: the routed sum left in mapped host memory for a later launch to
  // add, after done[L] (which that launch clears), with `add` (or null) as the device's part.
  PendingDelta pending(int layer, const float* add);

  // Host side: waits for the stream's input, computes, hands the result back. `launching`: see
  // HostFlags::host_wait.
  // compute false: hand the stream back what the output buffer holds (benchmarks).
  void run(const Job& job, const std::atomic<bool>* launching = nullptr, bool compute = true);
  // Lets the stream past this job without computing it (after an error elsewhere), so that no
  // stream waits forever.
  void release(const Job& job);
  // Every flag back to 0, as a finished step leaves them; only while no step runs. A step whose
  // launches were left out (bench decode --leave_out) can leave a done flag up.
  void reset_flags();

 private:
  cuda::DeviceContext& context_;
  std::int64_t max_tokens_, hidden_;
  int top_k_;
  cuda::PinnedBuffer x_, ids_, weights_, out_;
  // Their device mappings (unified addressing: the same addresses on every device).
  float *x_device_ = nullptr, *weights_device_ = nullptr, *out_device_ = nullptr;
  std::int32_t* ids_device_ = nullptr;
  cuda::HostFlags flags_;  // ready[L] at 2L, done[L] at 2L + 1
};

}  // namespace switchyard
