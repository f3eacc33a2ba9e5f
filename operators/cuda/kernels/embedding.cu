#include "operators/cuda/kernels/embedding.h"

#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/launch.cuh"
#include "operators/cuda/kernels/quant_rows.cuh"
#include "operators/cuda/kernels/widen.cuh"

namespace switchyard::cuda {
namespace {

template <DType kDType>
__device__ inline float widen_bits(unsigned short bits) {
  if constexpr (kDType == DType::bf16) return bf16_to_float(bits);
  return __half2float(__ushort_as_half(bits));
}

// 16 bytes of a row (8 bf16 or f16, or 4 f32) widened to f32 at `out`.
template <DType kDType>
__device__ inline void widen_piece(const uint4& piece, float* out) {
  if constexpr (kDType == DType::f32) {
    *reinterpret_cast<uint4*>(out) = piece;
  } else {
    float w[8];
    if constexpr (kDType == DType::bf16) {
      widen(piece, w);
    } else {
      const auto* bits = reinterpret_cast<const unsigned short*>(&piece);
#pragma unroll
      for (int i = 0; i < 8; ++i) w[i] = __half2float(__ushort_as_half(bits[i]));
    }
    reinterpret_cast<float4*>(out)[0] = make_float4(w[0], w[1], w[2], w[3]);
    reinterpret_cast<float4*>(out)[1] = make_float4(w[4], w[5], w[6], w[7]);
  }
}

// 16-byte pieces a thread loads before it writes any: the table may be host memory read over PCIe
// (CausalLM's decode graph with the embedding on the CPU), where loads issued one after another
// would each wait a round trip.
constexpr int kPiecesInFlight = 4;

// A row whose id is outside [0, vocab) filled with NaN by the block; true if so.
__device__ inline bool nan_row_if_out_of_range(std::int32_t id, std::int64_t vocab, float* row, std::int64_t hidden) {
  if (id >= 0 && id < vocab) return false;
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) row[i] = __int_as_float(0x7fc00000);
  return true;
}

// One block per token. `pieces`: the row in 16-byte pieces when the table, the rows and `out` allow
// (16-byte aligned), else 0 and element by element.
template <DType kDType, typename T>
__global__ void gather_rows(const std::int32_t* ids, const T* table, std::int64_t vocab, std::int64_t hidden,
                            std::int64_t pieces, float* out) {
  begin_after_previous_grid();
  const std::int32_t id = ids[blockIdx.x];
  float* row = out + blockIdx.x * hidden;
  if (nan_row_if_out_of_range(id, vocab, row, hidden)) return;
  const std::int64_t offset = std::int64_t{id} * hidden;
  if (pieces > 0) {
    constexpr int kPer = 16 / sizeof(T);  // elements a piece
    const auto* source = reinterpret_cast<const uint4*>(table + offset);
    for (std::int64_t first = threadIdx.x; first < pieces; first += kPiecesInFlight * blockDim.x) {
      uint4 loaded[kPiecesInFlight];
#pragma unroll
      for (int u = 0; u < kPiecesInFlight; ++u) {
        const std::int64_t p = first + u * blockDim.x;
        if (p < pieces) loaded[u] = source[p];
      }
#pragma unroll
      for (int u = 0; u < kPiecesInFlight; ++u) {
        const std::int64_t p = first + u * blockDim.x;
        if (p < pieces) widen_piece<kDType>(loaded[u], row + p * kPer);
      }
    }
    return;
  }
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    if constexpr (kDType == DType::f32)
      row[i] = table[offset + i];
    else
      row[i] = widen_bits<kDType>(table[offset + i]);
  }
}

// A table of ggml blocks (a GGUF's embedding kept as the file stores it): one block per token,
// each thread decoding 8 weights at a time with quant_rows.cuh's decoders (bit for bit the CPU's
// quant::dequantize_row). `row_bytes`: a row's blocks; hidden a multiple of the type's block.
// kVector: `out` is 16-byte aligned (then so is every row: hidden is a multiple of 32).
template <DType D, bool kVector>
__global__ void gather_block_rows(const std::int32_t* ids, const std::uint8_t* table, std::int64_t vocab,
                                  std::int64_t hidden, std::int64_t row_bytes, float* out) {
  begin_after_previous_grid();
  const std::int32_t id = ids[blockIdx.x];
  float* row = out + blockIdx.x * hidden;
  if (nan_row_if_out_of_range(id, vocab, row, hidden)) return;
  const std::uint8_t* source = table + std::int64_t{id} * row_bytes;
  // Every piece's loads are independent of the others': a warp's pieces are in flight together,
  // which is what a table read over PCIe needs.
  for (std::int64_t piece = threadIdx.x; piece < hidden / 8; piece += blockDim.x) {
    float w[8];
    load8_blocks<D>(source, static_cast<int>(piece * 8), w);
    float* at = row + piece * 8;
    if constexpr (kVector) {
      reinterpret_cast<float4*>(at)[0] = make_float4(w[0], w[1], w[2], w[3]);
      reinterpret_cast<float4*>(at)[1] = make_float4(w[4], w[5], w[6], w[7]);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) at[i] = w[i];
    }
  }
}

void embedding_blocks(const std::int32_t* ids, std::int64_t tokens, const void* table, DType table_dtype,
                      std::int64_t vocab, std::int64_t hidden, float* out, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(tokens);
  const int threads = hidden >= 2048 ? 256 : 128;  // a piece of 8 weights each at 2048
  const bool known = visit_block_type(table_dtype, [&]<DType D>() {
    using Q = QuantRow<D>;
    if (hidden % Q::kElements != 0 || hidden > 0x7fffffff)
      throw std::invalid_argument("cuda::embedding: rows of " + std::to_string(hidden) + " " + dtype_name(table_dtype) +
                                  " weights are not whole blocks of " + std::to_string(Q::kElements));
    if (reinterpret_cast<std::uintptr_t>(table) % Q::kAlign != 0)
      throw std::invalid_argument(std::string("cuda::embedding: a ") + dtype_name(table_dtype) +
                                  " table must be " + std::to_string(Q::kAlign) + "-byte aligned");
    const std::int64_t row_bytes = hidden / Q::kElements * Q::kBytes;
    const auto* bytes = static_cast<const std::uint8_t*>(table);
    if (aligned_16(out))
      launch_kernel(gather_block_rows<D, true>, blocks, threads, 0, stream, ids, bytes, vocab, hidden, row_bytes, out);
    else
      launch_kernel(gather_block_rows<D, false>, blocks, threads, 0, stream, ids, bytes, vocab, hidden, row_bytes, out);
  });
  if (!known)
    throw std::invalid_argument(std::string("cuda::embedding: tables of dtype ") + dtype_name(table_dtype) +
                                " are not supported");
}

}  // namespace

void embedding(const std::int32_t* ids, std::int64_t tokens, const void* table, DType table_dtype, std::int64_t vocab,
               std::int64_t hidden, float* out, cudaStream_t stream) {
  const bool blocks_table = is_block_quantized(table_dtype);
  if (table_dtype != DType::f32 && table_dtype != DType::bf16 && table_dtype != DType::f16 && !blocks_table)
    throw std::invalid_argument(std::string("cuda::embedding: tables of dtype ") + dtype_name(table_dtype) +
                                " are not supported (f32, bf16, f16 and ggml's block types are)");
  if (tokens <= 0 || hidden <= 0) return;
  if (tokens > 0x7fffffff) throw std::invalid_argument("cuda::embedding: more than 2^31 - 1 tokens");
  if (blocks_table) return embedding_blocks(ids, tokens, table, table_dtype, vocab, hidden, out, stream);
  const auto blocks = static_cast<unsigned>(tokens);
  const int threads = hidden >= 2048 ? 512 : 128;
  const std::int64_t element = table_dtype == DType::f32 ? 4 : 2;
  const bool aligned = (hidden * element) % 16 == 0 && aligned_16(table) && aligned_16(out);
  const std::int64_t pieces = aligned ? hidden * element / 16 : 0;
  switch (table_dtype) {
    case DType::f32:
      launch_kernel(gather_rows<DType::f32, float>, blocks, threads, 0, stream, ids, static_cast<const float*>(table),
                    vocab, hidden, pieces, out);
      break;
    case DType::bf16:
      launch_kernel(gather_rows<DType::bf16, unsigned short>, blocks, threads, 0, stream, ids,
                    static_cast<const unsigned short*>(table), vocab, hidden, pieces, out);
      break;
    default:
      launch_kernel(gather_rows<DType::f16, unsigned short>, blocks, threads, 0, stream, ids,
                    static_cast<const unsigned short*>(table), vocab, hidden, pieces, out);
      break;
  }
}

}  // namespace switchyard::cuda
