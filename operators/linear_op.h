#pragma once
// LinearOp and NormOp: a placed nn.Linear / RMSNorm with its weights used in place from the
// checkpoint mapping.
#include "operators/build_context.h"

namespace switchyard {

class LinearOp {
 public:
  LinearOp() = default;
  LinearOp(const BuildContext& context, const Module& linear);
  // A weight that does not come from a checkpoint (benchmarks, tests): [out, in].
  explicit LinearOp(Tensor weight) : weight_(std::move(weight)) {}
  // x: [tokens, in] f32 -> y: [tokens, out] f32
  void forward(const float* x, std::int64_t tokens, float* y) const;
  std::int64_t in_features() const { return weight_.dim(1); }
  std::int64_t out_features() const { return weight_.dim(0); }
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;             // [out, in] f32 | bf16 | f16
  std::vector<float> bias_;   // [out] or empty
};

class NormOp {
 public:
  NormOp() = default;
  NormOp(const BuildContext& context, const Module& norm, float eps);
  // x, out: [rows, width] f32, not overlapping.
  void forward(const float* x, std::int64_t rows, float* out) const;
  std::int64_t width() const { return weight_.numel(); }

 private:
  Tensor weight_;  // [width]
  float eps_ = 1e-6f;
};

}  // namespace switchyard
