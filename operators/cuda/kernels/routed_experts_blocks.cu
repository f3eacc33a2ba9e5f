#include "operators/cuda/kernels/routed_experts_blocks.h"

#include <numeric>
#include <stdexcept>

#include "core/dtype.h"
#include "operators/cuda/kernels/block_reduce.cuh"
#include "operators/cuda/kernels/gemv_rows.cuh"
#include "operators/cuda/kernels/launch.cuh"
#include "operators/cuda/kernels/quant_gemv.h"
#include "operators/cuda/kernels/quant_rows.cuh"
#include "operators/cuda/kernels/routed_experts_decode.cuh"

namespace switchyard::cuda {
namespace {

using decode_experts::kThreads;
using decode_experts::kWarp;
using decode_experts::kWarps;
constexpr int kPiece = 8;                     // weights a lane decodes at once
constexpr int kPieceStride = kWarp * kPiece;  // elements between a lane's pieces

// The warp's dot product of a row of `n` weights of D with x (n floats, 16-byte aligned), to every lane.
template <DType D>
__device__ float block_row_dot(const std::uint8_t* row, const float* x, int n, int lane) {
  float acc[1] = {0.0f};
  float w[kPiece];
#pragma unroll 2
  for (int k = lane * kPiece; k < n; k += kPieceStride) {
    load8_blocks<D>(row, k, w);
    accumulate(w, x, 0, k, acc);
  }
  return warp_sum(acc[0]);
}

// As routed_experts.cu's decode_gate_up (decode_experts::gate_up_rows), on rows of blocks: gate,
// up: [experts][inter rows of row_bytes].
template <DType D>
__global__ void __launch_bounds__(kThreads)
    blocks_gate_up(const std::uint8_t* gate, const std::uint8_t* up, std::int64_t experts, int hidden,
                   std::int64_t inter, std::int64_t row_bytes, const float* x, const std::int32_t* ids, int top_k,
                   float* h) {
  begin_after_previous_grid();
  decode_experts::gate_up_rows(
      [&](std::int32_t expert, std::int64_t row, std::int64_t token, int lane) {
        const std::int64_t offset = (std::int64_t{expert} * inter + row) * row_bytes;
        const std::uint8_t* g = gate + offset;
        const std::uint8_t* u = up + offset;
        const float* xt = x + token * hidden;
        float gate_acc[1] = {0.0f}, up_acc[1] = {0.0f};
        float wg[kPiece], wu[kPiece];
#pragma unroll 2
        for (int k = lane * kPiece; k < hidden; k += kPieceStride) {
          load8_blocks<D>(g, k, wg);
          load8_blocks<D>(u, k, wu);
          accumulate(wg, xt, 0, k, gate_acc);
          accumulate(wu, xt, 0, k, up_acc);
        }
        return decode_experts::GateUpDots{warp_sum(gate_acc[0]), warp_sum(up_acc[0])};
      },
      experts, inter, ids, top_k, h);
}

// As routed_experts.cu's decode_down (decode_experts::down_rows), on rows of blocks: down:
// [experts][hidden rows of row_bytes].
template <DType D>
__global__ void __launch_bounds__(kThreads)
    blocks_down(const std::uint8_t* down, std::int64_t experts, std::int64_t hidden, int inter, std::int64_t row_bytes,
                const float* h, const std::int32_t* ids, const float* weights, int top_k, int rows_per_block,
                float* out) {
  begin_after_previous_grid();
  decode_experts::down_rows(
      [&](std::int32_t expert, std::int64_t row, std::int64_t slot, int lane) {
        return block_row_dot<D>(down + (std::int64_t{expert} * hidden + row) * row_bytes, h + slot * inter, inter, lane);
      },
      experts, hidden, ids, weights, top_k, rows_per_block, out);
}

}  // namespace

std::int64_t expert_matrix_bytes(DType dtype, std::int64_t rows, std::int64_t in) {
  const DTypeInfo& info = dtype_info(dtype);
  return rows * (in / info.block_elements) * info.block_bytes;
}

std::string routed_experts_check_blocks(const ExpertStack& stack) {
  const DType down = stack.down_type();
  if (!quant_gemv_dtype(stack.dtype) || !quant_gemv_dtype(down))
    return std::string("gate and up in ") + dtype_name(stack.dtype) + " and down in " + dtype_name(down) +
           ": experts in blocks need a block type for all three";
  const int gate_block = dtype_info(stack.dtype).block_elements, down_block = dtype_info(down).block_elements;
  if (stack.hidden % gate_block != 0 || stack.inter % down_block != 0)
    return "hidden " + std::to_string(stack.hidden) + " and inter " + std::to_string(stack.inter) +
           " must be whole blocks of " + std::to_string(gate_block) + " (gate, up) and " + std::to_string(down_block) +
           " (down) weights";
  if (stack.hidden >= (std::int64_t{1} << 30) || stack.inter >= (std::int64_t{1} << 30))
    return "hidden and inter must be below 2^30";
  return {};
}

void routed_experts_decode_blocks(cudaStream_t stream, const ExpertStack& stack, const float* x, std::int64_t tokens,
                                  const std::int32_t* ids, const float* weights, int top_k, float* out, float* h) {
  if (!aligned_16(x)) throw std::invalid_argument("cuda::routed_experts: x must be 16-byte aligned for experts in blocks");
  const std::int64_t slots = tokens * top_k;
  const auto* gate = static_cast<const std::uint8_t*>(stack.gate);
  const auto* up = static_cast<const std::uint8_t*>(stack.up);
  const auto* down = static_cast<const std::uint8_t*>(stack.down);
  const std::int64_t gate_row_bytes = expert_matrix_bytes(stack.dtype, 1, stack.hidden);
  const std::int64_t down_row_bytes = expert_matrix_bytes(stack.down_type(), 1, stack.inter);
  const dim3 gate_up_grid(static_cast<unsigned>((stack.inter + kWarps - 1) / kWarps), static_cast<unsigned>(slots));
  visit_block_type(stack.dtype, [&] <DType D>() {
    launch_kernel(blocks_gate_up<D>, gate_up_grid, kThreads, 0, stream, gate, up, stack.experts,
                  static_cast<int>(stack.hidden), stack.inter, gate_row_bytes, x, ids, top_k, h);
  });
  // lcm(8, top_k) tasks a block: whole rounds of the 8 warps.
  const int rows_per_block = kWarps / std::gcd(kWarps, top_k);
  const dim3 down_grid(static_cast<unsigned>((stack.hidden + rows_per_block - 1) / rows_per_block),
                       static_cast<unsigned>(tokens));
  visit_block_type(stack.down_type(), [&] <DType D>() {
    launch_kernel(blocks_down<D>, down_grid, kThreads, 0, stream, down, stack.experts, stack.hidden,
                  static_cast<int>(stack.inter), down_row_bytes, h, ids, weights, top_k, rows_per_block, out);
  });
}

}  // namespace switchyard::cuda
