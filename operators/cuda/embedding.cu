#include "operators/cuda/embedding.h"

#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "operators/cuda/block_reduce.cuh"
#include "operators/cuda/cuda_check.h"
#include "operators/cuda/launch.cuh"

namespace switchyard::cuda {
namespace {

__device__ inline float widen_at(const float* table, std::int64_t i) { return table[i]; }

template <DType kDType>
__device__ inline float widen_at(const unsigned short* table, std::int64_t i) {
  if constexpr (kDType == DType::bf16) return bf16_to_float(table[i]);
  return __half2float(__ushort_as_half(table[i]));
}

// One block per token.
template <DType kDType, typename T>
__global__ void gather_rows(const std::int32_t* ids, const T* table, std::int64_t vocab, std::int64_t hidden,
                            float* out) {
  begin_after_previous_grid();
  const std::int32_t id = ids[blockIdx.x];
  float* row = out + blockIdx.x * hidden;
  if (id < 0 || id >= vocab) {
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) row[i] = __int_as_float(0x7fc00000);
    return;
  }
  const std::int64_t offset = std::int64_t{id} * hidden;
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    if constexpr (kDType == DType::f32)
      row[i] = widen_at(table, offset + i);
    else
      row[i] = widen_at<kDType>(table, offset + i);
  }
}

}  // namespace

void embedding(const std::int32_t* ids, std::int64_t tokens, const void* table, DType table_dtype, std::int64_t vocab,
               std::int64_t hidden, float* out, cudaStream_t stream) {
  if (table_dtype != DType::f32 && table_dtype != DType::bf16 && table_dtype != DType::f16)
    throw std::invalid_argument(std::string("cuda::embedding: tables of dtype ") + dtype_name(table_dtype) +
                                " are not supported (f32, bf16 and f16 are)");
  if (tokens <= 0 || hidden <= 0) return;
  if (tokens > 0x7fffffff) throw std::invalid_argument("cuda::embedding: more than 2^31 - 1 tokens");
  const auto blocks = static_cast<unsigned>(tokens);
  const int threads = hidden >= 2048 ? 512 : 128;
  switch (table_dtype) {
    case DType::f32:
      launch_kernel(gather_rows<DType::f32, float>, blocks, threads, 0, stream, ids, static_cast<const float*>(table),
                    vocab, hidden, out);
      break;
    case DType::bf16:
      launch_kernel(gather_rows<DType::bf16, unsigned short>, blocks, threads, 0, stream, ids,
                    static_cast<const unsigned short*>(table), vocab, hidden, out);
      break;
    default:
      launch_kernel(gather_rows<DType::f16, unsigned short>, blocks, threads, 0, stream, ids,
                    static_cast<const unsigned short*>(table), vocab, hidden, out);
      break;
  }
}

}  // namespace switchyard::cuda
