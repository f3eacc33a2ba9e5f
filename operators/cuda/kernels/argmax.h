#pragma once
// The greedy choice of a row of logits on the GPU: the index cpu::argmax (operators/cpu/kernels/sampling.h)
// returns, the first index of the largest value, NaN never chosen (unless x[0] is NaN: then 0, as
// the CPU's scan keeps its first element). Only the index needs to leave the GPU, not the row.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace switchyard::cuda {

// What a greedy decode step leaves for the next when steps run back to back on the device
// (CausalLM::decode_greedy): the chosen id becomes the next step's token and the position moves on,
// in the step record the GPU runtime keeps ([position, ids...], device memory), and the id goes to
// the host through two slots of host-mapped memory: slot (new position % 2) gets
// (new position << 32 | id), after every other write of the step (release, system scope), so a
// host that sees its position there sees the whole step.
struct NextStep {
  std::int32_t* step = nullptr;     // device: [position, id, ...]
  std::uint64_t* tokens = nullptr;  // host-mapped: [2]
};
// (new position << 32 | id), as the token slots of NextStep hold them.
__host__ __device__ constexpr std::uint64_t token_slot_value(std::int64_t position, std::int32_t id) {
  return static_cast<std::uint64_t>(position) << 32 | static_cast<std::uint32_t>(id);
}

// Device memory for an argmax over many blocks: kArgmaxBlocks candidates (8 bytes each) and one
// int32 counter, zero before the first launch (a GpuRuntime::zeroed_counters counter); each launch
// leaves it zero. Launches that share it must not overlap.
constexpr int kArgmaxBlocks = 64;
struct ArgmaxScratch {
  void* candidates = nullptr;        // kArgmaxBlocks * 8 bytes
  std::int32_t* counter = nullptr;
};

// x: [n] f32, device; out: one int32, device or host-mapped (a PinnedBuffer's device view). Queued
// on `stream`, with programmatic dependent launch (launch.cuh): one block, or with `scratch` up to
// kArgmaxBlocks (the head's 100k+ logits in one round of loads, not ~100 rounds). With next.step,
// also advances the step record (and writes next.tokens where given). Throws std::invalid_argument
// for n < 1 or n >= 2^31, or a null pointer.
void argmax(const float* x, std::int64_t n, std::int32_t* out, cudaStream_t stream, const NextStep& next = {},
            const ArgmaxScratch* scratch = nullptr);

}  // namespace switchyard::cuda
