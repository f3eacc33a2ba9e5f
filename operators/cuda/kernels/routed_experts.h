#pragma once
// The routed experts of one MoE layer on the GPU, as RoutedExperts::forward on the CPU
// (operators/ops/feed_forward_op.h):
//
//   out[t] = sum_k weights[t, k] * down_e(silu(gate_e x[t]) * up_e x[t]),   e = ids[t, k]
//
// Two paths, chosen inside by the number of (token, slot) pairs, tokens * top_k:
//
//   decode  (<= kDecodeMaxSlots): two kernels, no host synchronisation, no allocation, every
//           argument read from device memory, so a decode step can be captured in a CUDA graph and
//           replayed with new ids, weights and x in the same buffers. Each pair reads its expert's
//           rows once (two tokens choosing one expert read it twice). Kernel 1: one warp per
//           (pair, intermediate row) computes h = silu(gate . x) * (up . x) over 16-byte loads of
//           the weights. Kernel 2: one warp per (output row, pair) computes down . h; a block sums
//           its pairs per row in slot order and writes out.
//           Numerics: x stays f32; each bf16 weight is widened exactly; products are accumulated in
//           f32 (per lane, then a warp tree); h is f32. So the only error is f32 accumulation.
//
//   prefill (more pairs): the pairs are grouped by expert on the device (counts, offsets, then a
//           stable placement: within an expert, rows in slot order), x's rows are gathered, the
//           experts' projections run, and a last kernel sums each token's pairs in slot order into
//           out. Deterministic (no atomics in any sum). Allocates no device memory. The projections:
//           grouped  bf16 experts with hidden and inter multiples of 8 and 16-byte aligned weights,
//                    on compute capability 8.0 or later (routed_experts_prefill_is_grouped): one
//                    tensor-core launch for gate, up and SwiGLU over all experts, one for down
//                    (grouped_gemm.h). No host synchronisation: capturable in a CUDA graph.
//           per expert  otherwise: one cuBLAS GEMM per expert and projection. Synchronises once,
//                    to read the groups' sizes to the host; not capturable. It calls cuBLAS itself
//                    rather than cuda::linear, so that x and h are rounded to bf16 once for all
//                    experts into the workspace instead of once per expert into the pool.
//           blocks   per expert as well: each expert that has rows has its gate and up, then its
//                    down, dequantized to bf16 into the workspace just before its GEMMs (so every
//                    used expert's blocks are read once a call; unused experts not at all).
//           Numerics as cuda::linear (linear.h): with bf16 weights x and h are rounded to bf16 and
//           products accumulated in f32 (what transformers computes with a bf16 model on a GPU);
//           blocks likewise, each weight decoded exactly and rounded to bf16 (quant_gemv.h's
//           dequantize_to_bf16); with f32 weights plain f32 GEMMs (no TF32).
//   decode on blocks: each weight decoded exactly in registers, products with f32 x and h summed
//           in f32 (the float path's numerics, on the dequantized weights).
//
// Shapes: any hidden and inter. When hidden (kernel 1) or inter (kernel 2) is a multiple of 8
// (bf16) or 4 (f32) and the weights and x start 16-byte aligned, the decode kernels read 16 bytes a
// load; otherwise they read element by element (correct, slower). Blocks: whole blocks per row
// (hidden a multiple of gate's block, inter of down's) and x 16-byte aligned.
//
// Ids outside [0, experts): the pair contributes nothing; neither its weight nor any weight row is
// read. A caller may mark pairs served elsewhere (experts on another device) with -1. Ids are
// device memory, so they cannot be checked on the host here; callers that have them on the host
// check them there.
//
// Memory: every temporary is carved out of the caller's workspace, routed_experts_workspace_bytes;
// with slots = tokens * top_k and each part rounded up to 256 bytes:
//   decode  slots * inter * 4 (h, f32)
//   prefill experts * 4 + 2 * (experts + 1) * 4 + 2 * slots * 4 (counts, offsets, tile_first, the slot -> row and
//           row -> slot maps, int32) + slots * hidden * 4 (the gathered x, then the down
//           projections' outputs) + 2 * slots * inter * 4 (gate's and up's outputs; h reuses them),
//           plus for blocks 2 * inter * hidden * 2 (one expert's gate and up, or down, in bf16).
// For V3 (hidden 7168, inter 2048, top-8) a prefill of 4096 tokens needs about 1.4 GiB; callers
// that bound memory split prefill into smaller batches.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "operators/cuda/kernels/device_context.h"

namespace switchyard::cuda {

// One layer's experts stacked on the device, in transformers' [out, in] layout per expert:
// gate, up: [experts, inter, hidden]; down: [experts, hidden, inter]. Either floats, bf16 or f32
// (all three alike), or ggml blocks (routed_experts_blocks.h): gate and up of one block type,
// down of its own (a Q4_K_M file often stores down as Q6_K), each expert's rows of whole blocks.
struct ExpertStack {
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* down = nullptr;
  DType dtype = DType::bf16;  // gate's and up's
  std::int64_t experts = 0, hidden = 0, inter = 0;
  std::optional<DType> down_dtype = std::nullopt;  // nullopt: dtype
  DType down_type() const { return down_dtype.value_or(dtype); }
};

// The most (token, slot) pairs the graph-capturable decode path takes.
constexpr std::int64_t kDecodeMaxSlots = 32;

// True when routed_experts takes the decode path (no synchronisation, capturable in a CUDA graph).
constexpr bool routed_experts_uses_decode_path(std::int64_t tokens, int top_k) {
  return tokens * top_k <= kDecodeMaxSlots;
}

// Whether the prefill path runs the grouped kernels for this stack on the current device (above).
bool routed_experts_prefill_is_grouped(const ExpertStack& stack);

// Workspace for any call with tokens <= max_tokens and this top_k. Throws std::invalid_argument
// for a stack or sizes routed_experts refuses (a dtype other than f32/bf16 or ggml's block types,
// floats of mixed dtypes, blocks of partial rows, a dimension < 1 or beyond
// cuBLAS's 32-bit sizes, top_k < 1, max_tokens < 0 or max_tokens * top_k >= 2^31).
std::size_t routed_experts_workspace_bytes(const ExpertStack& stack, std::int64_t max_tokens, int top_k);

// Device pointers. x: [tokens, hidden] f32; ids: [tokens, top_k] int32; weights: [tokens, top_k]
// f32; out: [tokens, hidden] f32, overwritten; out may be x (x is read completely before out is
// written). workspace: 256-byte aligned (cudaMalloc's and the pool's blocks are), at least
// routed_experts_workspace_bytes(stack, tokens, top_k) bytes. Queued on the context's stream, on
// the current device (the context's). Throws std::invalid_argument for bad arguments (as
// routed_experts_workspace_bytes, null pointers, a small or misaligned workspace); the prefill
// path may throw std::runtime_error from CUDA or cuBLAS.
void routed_experts(DeviceContext& context, const ExpertStack& stack, const float* x, std::int64_t tokens,
                    const std::int32_t* ids, const float* weights, int top_k, float* out, void* workspace,
                    std::size_t workspace_bytes);

}  // namespace switchyard::cuda
