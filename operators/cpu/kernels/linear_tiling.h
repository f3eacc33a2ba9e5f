#pragma once
// Internal to linear(): the loop nest shared by every instruction set, around a micro-kernel that
// computes a kRows x kTokens tile of y over a run of the input dimension.
//
// Loop order (outer to inner): token block (kTokenBlock tokens) > input-dimension block
// (kInputBlock) > kRows weight rows > kTokens tokens. A kRows x kInputBlock slice of weights stays
// in L1 while every token of the block passes over it, and the token block's x slice stays in L2
// while the thread's rows pass over it. bf16/f16 slices are widened once into an f32 panel there,
// so the conversion is paid once per token block, not once per tile. With few tokens (decode, up
// to kSmallBatch) the input dimension is not split and nothing is packed: each weight row is
// streamed once, start to end, widened in registers, while x (at most kSmallBatch rows) sits in L2.
//
// Decode is bound by memory bandwidth: the weights are read once, as fast as a plain read of the
// same bytes (docs/performance.md has the numbers). Where the CPU has AMX, bf16 prefill runs on its
// tiles instead (linear_amx.cpp).
//
// Everything here is in an unnamed namespace on purpose: each instruction set's translation unit
// gets its own copy, compiled with its own flags, so the linker can never hand an AVX-512 copy to a
// machine without AVX-512.
#include <cstdint>
#include <type_traits>

#include "operators/cpu/kernels/linear_kernels.h"

namespace switchyard::cpu::detail {
namespace {

constexpr std::int64_t kTokenBlock = 64;
constexpr std::int64_t kInputBlock = 512;
constexpr std::int64_t kSmallBatch = 16;

inline std::int64_t min_of(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// Arguments of one micro-kernel call. x, w and y point at the tile's first element.
template <class W>
struct TileArgs {
  const float* x;  // [tile tokens, x_stride]
  std::int64_t x_stride;
  const W* w;  // [tile rows, w_stride]
  std::int64_t w_stride;
  std::int64_t input_count;  // elements of the input dimension to reduce over
  bool accumulate;           // add to y (a later input block) instead of overwriting it
  float* y;                  // [tile tokens, y_stride]
  std::int64_t y_stride;
};

// Calls Kernel::tile<Rows, Tokens> for the run-time tile size (edges of the block are smaller).
template <class Kernel, class W, int Rows, int Tokens = Kernel::kTokens>
void dispatch_tokens(int tokens, const TileArgs<W>& args) {
  if constexpr (Tokens > 1) {
    if (tokens < Tokens) return dispatch_tokens<Kernel, W, Rows, Tokens - 1>(tokens, args);
  }
  Kernel::template tile<Rows, Tokens>(args);
}

template <class Kernel, class W, int Rows = Kernel::kRows>
void dispatch_tile(int rows, int tokens, const TileArgs<W>& args) {
  if constexpr (Rows > 1) {
    if (rows < Rows) return dispatch_tile<Kernel, W, Rows - 1>(rows, tokens, args);
  }
  dispatch_tokens<Kernel, W, Rows>(tokens, args);
}

// Rows [r, r + rows) of weights (w: [rows, w_stride], already offset to input k0) times tokens
// [t0, t1) over k_count inputs from k0, tile by tile.
template <class Kernel, class W>
void rows_times_tokens(const LinearProblem& p, const W* w, std::int64_t w_stride, std::int64_t r, int rows,
                       std::int64_t t0, std::int64_t t1, std::int64_t k0, std::int64_t k_count) {
  for (std::int64_t t = t0; t < t1; t += Kernel::kTokens) {
    const int tokens = static_cast<int>(min_of(Kernel::kTokens, t1 - t));
    const TileArgs<W> args{p.x + t * p.in + k0, p.in, w, w_stride, k_count, k0 > 0, p.y + t * p.out + r, p.out};
    dispatch_tile<Kernel, W>(rows, tokens, args);
  }
}

template <class Kernel, class W>
void linear_block_typed(const LinearProblem& p, const LinearBlock& block) {
  constexpr bool widen_panels = !std::is_same_v<W, float>;
  const W* weight = static_cast<const W*>(p.weight);
  const bool small_batch = block.token_end - block.token_begin <= kSmallBatch;
  const std::int64_t input_block = small_batch ? p.in : kInputBlock;
  alignas(64) float panel[widen_panels ? Kernel::kRows * kInputBlock : 1];  // [kRows, kInputBlock]
  for (std::int64_t t0 = block.token_begin; t0 < block.token_end; t0 += kTokenBlock) {
    const std::int64_t t1 = min_of(t0 + kTokenBlock, block.token_end);
    for (std::int64_t k0 = 0; k0 < p.in; k0 += input_block) {
      const std::int64_t k_count = min_of(input_block, p.in - k0);
      for (std::int64_t r = block.row_begin; r < block.row_end; r += Kernel::kRows) {
        const int rows = static_cast<int>(min_of(Kernel::kRows, block.row_end - r));
        const W* slice = weight + r * p.in + k0;
        if constexpr (widen_panels) {
          if (!small_batch) {
            Kernel::widen(slice, p.in, rows, k_count, panel, kInputBlock);
            rows_times_tokens<Kernel, float>(p, panel, kInputBlock, r, rows, t0, t1, k0, k_count);
            continue;
          }
        }
        rows_times_tokens<Kernel, W>(p, slice, p.in, r, rows, t0, t1, k0, k_count);
      }
    }
  }
}

template <class Kernel>
void linear_block_any(const LinearProblem& p, const LinearBlock& block) {
  switch (p.weight_type) {
    case LinearWeight::f32: return linear_block_typed<Kernel, float>(p, block);
    case LinearWeight::bf16: return linear_block_typed<Kernel, Bf16Bits>(p, block);
    case LinearWeight::f16: return linear_block_typed<Kernel, F16Bits>(p, block);
    case LinearWeight::quantized: break;  // quant_dot.h's blocks run these
  }
}

}  // namespace
}  // namespace switchyard::cpu::detail
