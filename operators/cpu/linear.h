#pragma once
// Linear layer on the CPU: y = x W^T, the weight in transformers' layout [out_features, in_features]
// row-major, stored as f32, bf16 or f16 and widened to f32 in registers; activations and
// accumulation are f32.
//
// Decode (a few tokens) is memory-bandwidth bound: every weight row is streamed once, split across
// threads by output rows. Prefill reuses each block of weight rows across a block of tokens while
// both sit in cache. The vector code is chosen at run time (isa.h); tests force each variant.
//
// No AVX512-BF16 (vdpbf16ps) or AMX variant yet: both multiply bf16 by bf16, so x would be rounded
// to bf16 (8 significant bits), far from the f32 results transformers gives. Splitting x exactly
// into three bf16 parts keeps f32 accuracy at three times the multiplies: no gain for decode,
// which is bound by memory; it is the way to a faster prefill with AMX.
#include <cstdint>

#include "core/dtype.h"
#include "operators/cpu/isa.h"

namespace switchyard::cpu {

// x: [tokens, in] f32; weight: [out, in] in weight_dtype (f32, bf16 or f16); y: [tokens, out] f32.
// y must not overlap x or weight. Throws std::invalid_argument for another weight dtype.
// Parallel over output rows with OpenMP; inside an enclosing parallel region it runs on the
// calling thread.
void linear(const float* x, std::int64_t tokens, std::int64_t in, const void* weight, DType weight_dtype,
            std::int64_t out, float* y);

// The same with a chosen instruction set; throws std::invalid_argument when this CPU lacks it.
void linear(Isa isa, const float* x, std::int64_t tokens, std::int64_t in, const void* weight, DType weight_dtype,
            std::int64_t out, float* y);

// Whether `linear` accepts this weight dtype.
bool linear_supports(DType weight_dtype);

}  // namespace switchyard::cpu
