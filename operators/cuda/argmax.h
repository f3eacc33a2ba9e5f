#pragma once
// The greedy choice of a row of logits on the GPU: the index cpu::argmax (operators/cpu/sampling.h)
// returns, the first index of the largest value, NaN never chosen (unless x[0] is NaN: then 0, as
// the CPU's scan keeps its first element). Only the index needs to leave the GPU, not the row.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace switchyard::cuda {

// x: [n] f32, device; out: one int32, device or host-mapped (a PinnedBuffer's device view). One
// block, queued on `stream`, with programmatic dependent launch (launch.cuh). Throws
// std::invalid_argument for n < 1 or n >= 2^31, or a null pointer.
void argmax(const float* x, std::int64_t n, std::int32_t* out, cudaStream_t stream);

}  // namespace switchyard::cuda
