#include "operators/linear_op.h"

#include "operators/cpu/linear.h"
#include "operators/cpu/rms_norm.h"

namespace switchyard {

LinearOp::LinearOp(const BuildContext& context, const Module& linear)
    : weight_(context.param(linear, "weight", {DType::f32, DType::bf16, DType::f16})) {
  context.require_cpu(linear);
  for (const Parameter& p : linear.params)
    if (p.name == "bias") bias_ = context.param_f32(linear, "bias");
}

void LinearOp::forward(const float* x, std::int64_t tokens, float* y) const {
  cpu::linear(x, tokens, in_features(), weight_.data(), weight_.dtype(), out_features(), y);
  if (bias_.empty()) return;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t o = 0; o < out_features(); ++o) y[t * out_features() + o] += bias_[static_cast<std::size_t>(o)];
}

NormOp::NormOp(const BuildContext& context, const Module& norm, float eps)
    : weight_(context.param(norm, "weight", {DType::f32, DType::bf16})), eps_(eps) {
  context.require_cpu(norm);
}

void NormOp::forward(const float* x, std::int64_t rows, float* out) const {
  cpu::rms_norm(x, rows, width(), weight_.data(), weight_.dtype(), eps_, out);
}

}  // namespace switchyard
