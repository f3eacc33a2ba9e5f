#pragma once
// Linear layer on the CPU: y = x W^T, the weight in transformers' layout [out_features, in_features]
// row-major, stored as f32, bf16 or f16 and widened to f32 in registers; activations and
// accumulation are f32, except where linear_rounds_x says otherwise.
//
// The weight may also be a block type of core/dtype.h (ggml's q4_0 ... q8_0, q2_k ... q6_k, the IQ
// types and mxfp4): each row is in / block_elements consecutive blocks as GGUF stores them
// (core/quant_blocks.h). x is quantised to signed bytes per block (linear_quantizes_x) and the
// products are integer dot products: always for the types of 256-weight blocks (the K types, the
// IQ1, IQ2 and IQ3 types, iq4_xs), below kQuantPrefillTokens tokens for the 32-weight types
// (q4_0 ... q8_0, iq4_nl, mxfp4), whose rows from there on are dequantised to f32 64 at a time and
// multiplied by f32 x (quant_dot.h).
//
// Decode (a few tokens) is memory-bandwidth bound: every weight row is streamed once, split across
// threads by output rows. Prefill reuses each block of weight rows across a block of tokens while
// both sit in cache. The vector code is chosen at run time (isa.h); tests force each variant.
//
// With AMX (Isa::amx), bf16 weights and kAmxTokens tokens or more (prefill, a prefill's expert
// groups), x is rounded to bf16, as transformers' bf16 activations and the GPU's cuBLAS prefill
// are (8 significant bits: relative error 2^-9 an element), and tile instructions multiply it by
// the weights' own bits: products exact, sums in f32. Decode's few tokens keep f32 x: they are
// bound by memory. On a CPU with AVX512-BF16 but no AMX (Isa::avx512bf16: Zen 4, Cooper Lake)
// vdpbf16ps multiplies the same x tiles by the weights' rows from kAmxTokens tokens; where AMX is,
// the tiles are faster and vdpbf16ps is not used for bf16 weights (docs/performance.md).
// Block-type weights take the same tiles from kQuantPrefillTokens tokens on: their rows are
// dequantised 32 at a time into a bf16 panel (one more rounding of each weight, relative 2^-9),
// which costs about as much as the integer products of a handful of tokens and is then shared by
// every token of the call; with AVX512-BF16 and no AMX, vdpbf16ps multiplies x's tiles by the
// panel, faster than the f32 panels and the integer products and more exact than the K types'
// 8-bit x.
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "operators/cpu/kernels/isa.h"

namespace switchyard::cpu {

// x: [tokens, in] f32; weight: [out, in] in weight_dtype (f32, bf16, f16 or a block type); y:
// [tokens, out] f32, with the chosen instruction set (chosen_isa()).
// y must not overlap x or weight. Throws std::invalid_argument for another weight dtype, or a block
// type with `in` not a multiple of its block.
// Parallel over output rows with OpenMP; inside an enclosing parallel region it runs on the
// calling thread.
void linear(const float* x, std::int64_t tokens, std::int64_t in, const void* weight, DType weight_dtype,
            std::int64_t out, float* y);

// The same with a chosen instruction set; throws std::invalid_argument when this CPU lacks it.
void linear(Isa isa, const float* x, std::int64_t tokens, std::int64_t in, const void* weight, DType weight_dtype,
            std::int64_t out, float* y);

// linear() for a caller that vouches for x across calls (the CPU experts' decode items: hundreds of
// calls a layer on a few x): calls on one thread with the same x pointer and the same non-zero
// `x_version` promise the same x values, so the thread reuses x's quantised bytes without comparing
// x. Version 0 compares, as linear() does. Take versions from new_x_version(), a fresh one whenever
// x's values may have changed.
void linear_versioned_x(std::uint64_t x_version, const float* x, std::int64_t tokens, std::int64_t in,
                        const void* weight, DType weight_dtype, std::int64_t out, float* y);
void linear_versioned_x(Isa isa, std::uint64_t x_version, const float* x, std::int64_t tokens, std::int64_t in,
                        const void* weight, DType weight_dtype, std::int64_t out, float* y);
// A version no earlier call of this process got (thread-safe).
std::uint64_t new_x_version();

// One product of a batch: y = x W^T as linear() takes it. `x_tiles` (optional): x already rounded
// into the tiles a call that rounds x (linear_rounds_x) writes, by write_x_tiles; such a call then
// reads them instead of x, and the batch writes none for it. Other calls ignore them and read x.
struct LinearCall {
  const float* x;
  std::int64_t tokens, in;
  const void* weight;
  DType weight_dtype;
  std::int64_t out;
  float* y;
  const std::uint32_t* x_tiles = nullptr;
};

// x [tokens, in] rounded to bf16 in the tiles' layout, for LinearCall::x_tiles: token tile `tile`
// (tokens [16 tile, 16 tile + 16)) into `tiles`, x_tiles_bytes(tokens, in) bytes, 64-byte aligned
// (zeros where no token or input is). The words linear_batch writes itself, on any CPU.
std::size_t x_tiles_bytes(std::int64_t tokens, std::int64_t in);
void write_x_tiles(const float* x, std::int64_t tokens, std::int64_t in, std::int64_t tile, std::uint32_t* tiles);

// Every call of `calls` in one parallel region: threads take row blocks of all of them as they ask,
// so many small products (a prefill's experts) cost one fork-join, not one each, and no thread waits
// at the end of each. Calls on the same x (pointer, tokens, in) share its bf16 tiles on AMX. No
// call's y may overlap another's x, weight or y. Throws as linear() does, before any work.
void linear_batch(std::span<const LinearCall> calls);
void linear_batch(Isa isa, std::span<const LinearCall> calls);
// An MLP's gated activation straight into its down projection's x tiles, h = silu(x W_gate^T) *
// (x W_up^T) [tokens, out], rounded into `h_tiles` (x_tiles_bytes(tokens, out) bytes, 64-byte
// aligned) as write_x_tiles(h, tokens, out, ...) writes them; x comes as its tiles (write_x_tiles,
// x [tokens, in]). h is never stored in f32 beyond a block: a block takes whole 32-row chunks of
// `out`, computes gate's and up's rows for every token, their SiLU (silu_and_mul), and its chunks
// of h's tiles while they are in cache. Every word is the bits that linear_batch's gate and up
// calls, silu_and_mul and write_x_tiles give. Only where linear_rounds_x holds for both weights
// (gated_takes); throws std::invalid_argument for other calls, before any work. Threads take the
// blocks of every call as they ask (one fork-join a batch).
struct GatedCall {
  const std::uint32_t* x_tiles;
  std::int64_t tokens, in;
  const void* gate;
  DType gate_dtype;
  const void* up;
  DType up_dtype;
  std::int64_t out;
  std::uint32_t* h_tiles;
};
bool gated_takes(Isa isa, DType gate_dtype, DType up_dtype, std::int64_t tokens);
void gated_batch(std::span<const GatedCall> calls);
void gated_batch(Isa isa, std::span<const GatedCall> calls);

// Tokens from which the AMX variant rounds x to bf16 and multiplies tiles (bf16 weights): below,
// a call streams its weights (decode), and the f32 path costs no more.
constexpr std::int64_t kAmxTokens = 8;

// Whether linear(isa, ...) rounds x to bf16 for these weights and this many tokens: with AMX or
// avx512bf16, bf16 weights from kAmxTokens tokens and block types from kQuantPrefillTokens.
bool linear_rounds_x(Isa isa, DType weight_dtype, std::int64_t tokens);

// Tokens from which the 32-weight block types (q4_0 ... q8_0, iq4_nl, mxfp4) are dequantised to f32
// panels and reused across tokens (prefill); below, x is quantised and each weight row streamed
// once for all tokens (decode). The K types' integer products stay faster than f32 panels at every
// token count, so they and the other 256-weight types never switch; the 32-weight types' panels are faster than their integer products from
// about 16 tokens.
constexpr std::int64_t kQuantPrefillTokens = 16;

// Whether linear() quantises x (to 8-bit blocks: relative error up to 1/254 of a block's largest
// |x| an element) for these weights and this many tokens, where linear_rounds_x does not hold.
bool linear_quantizes_x(DType weight_dtype, std::int64_t tokens);

// Whether `linear` accepts this weight dtype.
bool linear_supports(DType weight_dtype);

}  // namespace switchyard::cpu
