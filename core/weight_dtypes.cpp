#include "core/weight_dtypes.h"

namespace switchyard {

bool is_runnable_weight_dtype(DType dtype) {
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::f8_e4m3 ||
         is_block_quantized(dtype);
}

const char* runnable_weight_dtypes_text() {
  return "f32, bf16, f16, block-scaled FP8 (f8_e4m3 with weight_scale_inv) and ggml's block types (q8_0, q6_k, q5_k, q4_k, q3_k, q2_k, q4_0, q4_1, q5_0, q5_1, "
         "iq4_xs, iq4_nl, iq3_s, iq3_xxs, iq2_s, iq2_xs, iq2_xxs, iq1_m, iq1_s, mxfp4)";
}

}  // namespace switchyard
