#pragma once
// CPU kernel variants switched at run time, so that a benchmark can time both in one process
// (bench experts --ab_env, bench decode --ab_env): read from the environment by
// refresh_kernel_variants(), which runs once at start and again only where no kernel runs (the
// benches call it between timings). A variant changes how a kernel reads or schedules its work,
// never its results: tests hold each variant's outputs equal to the default's, bit for bit.
//   SWITCHYARD_CPU_QUANT_PREFETCH=BYTES  how far ahead the quantised decode rows prefetch their
//                                  weights (0: no prefetch; unset or 1: 2048, the default, measured
//                                  best of 512-4096 on the Xeon, docs/perf-notes.md; at least 64)
//   SWITCHYARD_CPU_QK_SIMD_SCALES=1  Q4_K's and Q5_K's packed 6-bit scales unpacked by byte
//                                  shuffles instead of 32-bit word arithmetic
namespace switchyard::cpu {

struct KernelVariants {
  int quant_prefetch_bytes = 2048;  // 0: none
  bool qk_simd_scales = false;
};

const KernelVariants& kernel_variants();
void refresh_kernel_variants();

}  // namespace switchyard::cpu
