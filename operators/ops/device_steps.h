#pragma once
// The device side of a model's forward passes (operators/model/causal_lm.h), for a backend with
// devices of its own. The model builds its layers and queues their work itself; a DeviceSteps does
// what only its backend knows around that work: the step's inputs on every device, the embedding's
// rows gathered on a device, the head's output read back, and decode steps captured whole as one
// device graph, launched one at a time or back to back. Made by Accelerators::make_steps once the
// layers are built, when any of them runs on a device; a model wholly on the CPU has none.
//
// A pass, as the model queues it:
//   write_step                     the step's position and ids, before anything is queued
//   run_pass(enqueue):             around the queuing, then waits for all of it
//     begin_pass                   the record to each device, --profile's step regions
//     embed                        where embedding_device() says (else the host gathered the rows)
//     begin_layers, the layers, begin_head, the final norm, head
//     end_pass                     closes begin_pass's regions (also when queuing throws)
//   logits / greedy_id             the head's output, when the head is on a device
// A decode graph step (graph_step) is the same pass captured once, by calling `capture`, and
// replayed at any position.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "core/trace.h"
#include "operators/ops/linear_op.h"

namespace switchyard {

// What a model's steps are made with.
struct StepsSetup {
  const Tensor* embedding = nullptr;  // [vocab, hidden] on the host: f32 | bf16 | f16 | blocks
  Device embed_device, head_device;
  Device first_layer_device;  // the first decoder layer's attention
  std::int64_t vocab = 0, hidden = 0;
  // Decode steps may be one graph: the decoder stack and the head run on this backend's devices,
  // with the embedding there or on the host, and the user has not turned graphs off.
  bool graphs = false;
  Tracer* tracer = nullptr;  // profiling (--profile) and step marks (NVTX); nullptr: none
};

class DeviceSteps {
 public:
  // Queues one decode step's work (the model's pass) for a capture: token `id` at `position`.
  using CaptureStep = std::function<void(std::int32_t id, std::int64_t position)>;

  virtual ~DeviceSteps() = default;

  // ---- a pass ------------------------------------------------------------------------------------
  // The step's first position and token ids for every device; nothing of the previous step may
  // still be running (run_pass has returned).
  virtual void write_step(std::int64_t position, std::span<const std::int32_t> ids) = 0;
  // Calls `enqueue` (the pass's queuing, from begin_pass to end_pass) and waits for the work it
  // queued, on the devices and on the host; reports the step's profile regions.
  virtual void run_pass(const std::function<void()>& enqueue) = 0;
  // The pass's first work on every device. `capturing`: within graph_step's capture, where the
  // record is not uploaded (a graph's record is uploaded before each launch).
  virtual void begin_pass(std::int64_t tokens, bool capturing) = 0;
  // The device where the pass gathers its embedding rows: the embedding's, when it is one of this
  // backend's, or the first layer's while capturing (a graph reads the host's table through a
  // mapped view); nullopt: the host gathers them.
  virtual std::optional<Device> embedding_device(bool capturing) const = 0;
  // Queues the gather of the step's rows into `hidden` [tokens, hidden] on embedding_device().
  virtual void embed(float* hidden, std::int64_t tokens, bool capturing) = 0;
  // Where the decoder layers begin, and where the final norm and the head begin (measuring marks).
  virtual void begin_layers() = 0;
  virtual void begin_head() = 0;
  // With the head on a device: lm_head over `rows` normed rows [rows, hidden] into the device's
  // logits, and, for one row, the row to the host or, with `greedy`, its argmax (handed on to the
  // next step too when `capturing`).
  virtual void head(const LinearOp& lm_head, const float* normed, std::int64_t rows, bool greedy,
                    bool capturing) = 0;
  // Closes begin_pass's regions; safe to call when begin_pass did not run or threw.
  virtual void end_pass() noexcept = 0;

  // ---- the head's output, after run_pass or graph_step -------------------------------------------
  // Whether the head runs on one of this backend's devices (else the model's CPU head).
  virtual bool head_on_device() const = 0;
  // The last `rows` tokens' logits [rows, vocab].
  virtual std::vector<float> logits(std::int64_t rows) const = 0;
  // The greedy choice of a pass whose head ran with greedy.
  virtual std::int32_t greedy_id() const = 0;

  // ---- decode graphs -----------------------------------------------------------------------------
  // Whether decode steps are graphs (StepsSetup::graphs and a head on a device).
  virtual bool graphs() const = 0;
  // One decode step, token `id` at `position`, as a graph: captured first through `capture` when no
  // graph of this kind (profiled, greedy) is kept. Returns the logits [vocab], or nothing with
  // `greedy` (greedy_id).
  virtual std::vector<float> graph_step(std::int32_t id, std::int64_t position, bool greedy,
                                        const CaptureStep& capture) = 0;
  // Whether greedy steps can follow each other on the device (graphs, and no tracer that marks
  // steps on the host).
  virtual bool chains() const = 0;
  // Greedy decode with steps back to back (CausalLM::decode_greedy): up to `count` steps from `id`
  // at `position`; on_token gets each new token and returns false to stop. Returns how many it gave.
  // The caller has checked the ids and the context, and queues greedy heads while this runs.
  virtual int chained_steps(std::int32_t id, std::int64_t position, int count,
                            const std::function<bool(std::int32_t)>& on_token, const CaptureStep& capture) = 0;
  // The device whose stream launches the graphs, and how many devices one graph spans (0 before the
  // first graph step).
  virtual std::optional<Device> graph_device() const = 0;
  virtual std::size_t graph_devices() const = 0;
  // Benchmarks: the next graph step captures again, and host hand-offs start from a clean state.
  virtual void discard_graph() = 0;
};

}  // namespace switchyard
