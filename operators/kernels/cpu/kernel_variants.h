#pragma once
// CPU kernel variants switched at run time, so that a benchmark can time both in one process
// (bench experts --ab_env, bench decode --ab_env): read from the environment by
// refresh_kernel_variants(), which runs once at start and again only where no kernel runs (the
// benches call it between timings). A variant changes how a kernel reads or schedules its work,
// never its results: tests hold each variant's outputs equal to the default's, bit for bit.
//   SWITCHYARD_CPU_QUANT_PREFETCH=BYTES  how far ahead the quantised decode rows prefetch their
//                                  weights (0: no prefetch; unset or 1: 2048, the default, measured
//                                  best of 512-4096 on the Xeon, docs/performance.md; at least 64)
//   SWITCHYARD_CPU_QK_SIMD_SCALES=1  Q4_K's and Q5_K's packed 6-bit scales unpacked by byte
//                                  shuffles instead of 32-bit word arithmetic
//   SWITCHYARD_CPU_TILES_F32_PANEL=1  AMX's prefill on block types dequantises each panel to f32
//                                  and rounds it to bf16 in a second pass, instead of writing the
//                                  bf16 panel in one (AVX512-BF16)
//   SWITCHYARD_CPU_TILES_ROW_MAJOR=1  the tiles path's one-pass bf16 panels row-major (a tile's 16
//                                  rows `in` values apart) instead of chunk-major (the 16 rows of
//                                  32 inputs contiguous, 1 KiB)
//   SWITCHYARD_CPU_PANELS_BY_ROW=1|0  a chunk-major bf16 panel written a row at a time (its 64-byte
//                                  pieces 2 KiB apart: 1), or 8 chunks of every row at a time (8
//                                  sequential streams of stores: 0); unset: a row at a time where
//                                  AMX is, 8 chunks elsewhere (each the faster where measured)
//   SWITCHYARD_CPU_PANELS_PREFETCH=0  a chunk-major bf16 panel written 8 chunks at a time reads its
//                                  blocks without prefetching each row's next strip of them
//   SWITCHYARD_CPU_FRESH_SCRATCH=1  a batch of linear calls writes each x's tiles and quantised x
//                                  into an allocation of its own, freed at the batch's end, instead
//                                  of the calling thread's kept scratch
//   SWITCHYARD_CPU_TILES_BLOCK_ROWS=N  a batch's tiles calls (a prefill's experts) cut into blocks
//                                  of at least N rows (whole 32-row groups) while the batch keeps
//                                  kBlocksPerThread blocks a thread, so that a thread reads an
//                                  expert's x tiles once per N rows (unset: 128, the Xeon's expert
//                                  prefill 5-9% faster than 0; 0: each call in up to
//                                  kBlocksPerThread blocks a thread, as alone, often 32 rows)
//   SWITCHYARD_CPU_AMX_KEEP_TILES=1  AMX's blocks keep the tiles configured on their thread between
//                                  calls, instead of loading the configuration and releasing the
//                                  tiles at every call
//   SWITCHYARD_CPU_AMX_SCALAR_STORE=1  AMX's blocks move each C tile into y by 256 scalar loads
//                                  and stores, instead of a transpose in AVX-512 registers and a
//                                  store of each token's rows
//   SWITCHYARD_CPU_BF16_FULL_TILES=1  the AVX512-BF16 tiles product (no AMX) computes a last token
//                                  tile of at most 8 tokens in 16 lanes, as every other, instead of
//                                  in 8
//   SWITCHYARD_CPU_EXPERTS_BARRIER=1  the CPU experts' decode waits at a barrier between the gate/up
//                                  and the down items, instead of each down item waiting for its
//                                  own slot's gate/up items
//   SWITCHYARD_CPU_EXPERTS_GATHER_ROWS=1  the CPU experts' prefill gathers every expert's rows of x
//                                  into one matrix and the gate and up batch rounds them into x's
//                                  tiles, instead of each token tile's 16 rows going from x into
//                                  the tiles while in cache
//   SWITCHYARD_CPU_EXPERTS_SILU_APART=1  the CPU experts' prefill writes silu(gate) * up to memory
//                                  and the down batch rounds it into x's tiles, instead of each
//                                  token tile's 16 rows rounded into them as SiLU computes them
//                                  (gate and up apart too, as with GATE_UP_APART)
//   SWITCHYARD_CPU_EXPERTS_GATE_UP_APART=1  the CPU experts' prefill runs an expert's gate and up
//                                  projections as two calls of a batch into f32 g and u, and SiLU
//                                  in a pass of its own, instead of one gated call (cpu::gated_batch)
//                                  whose blocks write silu(gate) * up straight into the down call's
//                                  x tiles; the CPU MLPs (MlpOp: dense layers, shared experts) the
//                                  same, for the token counts whose projections take tiles
//   SWITCHYARD_CPU_EXPERTS_COMPARE_X=1  the CPU experts' decode items compare x with the thread's
//                                  last x before reusing its quantised bytes, instead of trusting
//                                  the call's version (cpu::linear_versioned_x)
namespace switchyard::cpu {

struct KernelVariants {
  int quant_prefetch_bytes = 2048;  // 0: none
  bool qk_simd_scales = false;
  bool tiles_f32_panel = false;
  bool amx_keep_tiles = false;
  bool amx_scalar_store = false;
  bool bf16_full_tiles = false;
  bool fresh_scratch = false;
  int tiles_block_rows = 128;  // 0: off
  bool tiles_row_major = false;
  bool panels_by_row = false;  // read_variants sets this CPU's default
  bool panels_prefetch = true;
  bool experts_phase_barrier = false;
  bool experts_compare_x = false;
  bool experts_silu_apart = false;
  bool experts_gather_rows = false;
  bool experts_gate_up_apart = false;
};

const KernelVariants& kernel_variants();
void refresh_kernel_variants();

}  // namespace switchyard::cpu
