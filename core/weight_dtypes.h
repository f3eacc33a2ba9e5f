#pragma once
// The stored types whose weights `run` takes: the floats f32, bf16 and f16, block-scaled FP8
// (dequantized at load with its weight_scale_inv) and ggml's block types, each used as stored or
// dequantized once at load (operators/ops/build_context.cpp). The one rule
// for both `check`, which refuses a model's tensor of any other type (core/gguf_description.h), and
// the loader, so that `check` passes exactly what `run` can load.
#include "core/dtype.h"

namespace switchyard {

bool is_runnable_weight_dtype(DType dtype);
// The same as text for messages: "f32, bf16, f16 and ggml's block types (q8_0, q6_k, ...)".
const char* runnable_weight_dtypes_text();

}  // namespace switchyard
