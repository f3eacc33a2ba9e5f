#pragma once
// RMSNorm on the GPU, as operators/cpu/kernels/rms_norm.h: variance = mean(x^2) in f32;
// out = weight * (x * rsqrt(variance + eps)), the two products rounded in transformers' order.
// Differs from the CPU only in rounding: the sum of squares is f32 (a tree of partial sums), the
// CPU's double; results agree to a few f32 ulps.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace switchyard::cuda {

// Device pointers. x: [rows, dim] f32; weight: [dim] f32 or bf16; out: [rows, dim] f32, may be x.
// Queued on `stream` (of the current device). Throws std::invalid_argument for another weight dtype.
void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight, DType weight_dtype, float eps,
              float* out, cudaStream_t stream);

// A second part of the delta that a CPU worker writes to page-locked, device-mapped host memory:
// `values` ([dim] f32) and `flag`, device views; the host sets the flag to 1 once the values are
// written, and the launch clears it again (host_flag.h's done flag).
struct HostAddend {
  const float* values = nullptr;
  std::uint32_t* flag = nullptr;
};
// The longest row a host addend may have (it is staged in shared memory).
constexpr std::int64_t kMaxHostDim = 12288;

// x += delta, then out = rms_norm(x): the residual addition and the next norm in one launch, with
// results bit-identical to add_in_place followed by rms_norm. x, delta, out: [rows, dim]; out must
// not be x. delta may be null when `host` is given.
// With `host` (one row only): x += host.values + delta, once the launch has seen host.flag at 1
// (it waits on the device, for as long as the host takes, like a stream wait), bit-identical to
// add_from_host(host.values, delta, ...) followed by add_rms_norm with that sum.
void add_rms_norm(float* x, const float* delta, std::int64_t rows, std::int64_t dim, const void* weight,
                  DType weight_dtype, float eps, float* out, cudaStream_t stream, const HostAddend& host = {});

}  // namespace switchyard::cuda
