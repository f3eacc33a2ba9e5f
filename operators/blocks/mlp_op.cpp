#include "operators/blocks/mlp_op.h"

#include "operators/blocks/activations.h"
#include "operators/kernels/cpu/linear.h"
#include "operators/kernels/cpu/silu_and_mul.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/kernels/cuda/gemv.h"
#include "operators/runtime/gpu_runtime.h"
#endif

namespace switchyard {

MlpOp::MlpOp(const BuildContext& context, const Module& mlp, const char* gate, const char* up, const char* down)
    : gate_(context, context.child(mlp, gate), context.device_of(mlp)),
      up_(context, context.child(mlp, up), context.device_of(mlp)),
      down_(context, context.child(mlp, down), context.device_of(mlp)) {
  for (const char* name : {gate, up, down}) require_same_device(context, mlp, context.child(mlp, name));
}

bool MlpOp::gate_up_fusable() const {
  return gate_.device_dtype() == up_.device_dtype() && !gate_.has_bias() && !up_.has_bias();
}

void MlpOp::forward(const float* x, std::int64_t tokens, float* out) {
  const std::int64_t width = gate_.out_features();
  GpuRuntime* gpu = gate_.gpu();
#if SWITCHYARD_HAVE_CUDA
  // Decode on a GPU: gate, up and SiLU-mul in one launch.
  if (gpu != nullptr && gate_up_fusable() &&
      cuda::gemv_swiglu_supports(tokens, gate_.in_features(), gate_.device_dtype(), gate_.device_weight(),
                                 up_.device_weight(), x)) {
    Scratch h(gpu, tokens * width, "an MLP's activations");
    cuda::gemv_swiglu(tokens, gate_.in_features(), width, gate_.device_weight(), up_.device_weight(),
                      gate_.device_dtype(), x, h, gpu->stream());
    down_.forward(h, tokens, out);
    return;
  }
#endif
  Scratch g(gpu, tokens * width, "an MLP's gate activations"), u(gpu, tokens * width, "an MLP's up activations");
  if (gpu == nullptr && !gate_.has_bias() && !up_.has_bias()) {
    // On the CPU, gate and up in one parallel region, sharing x's AMX tiles where it has them.
    const cpu::LinearCall calls[] = {gate_.cpu_call(x, tokens, g), up_.cpu_call(x, tokens, u)};
    cpu::linear_batch(calls);
  } else {
    gate_.forward(x, tokens, g);
    up_.forward(x, tokens, u);
  }
  silu_and_mul(gpu, g, u, tokens * width, g);
  down_.forward(g, tokens, out);
}

}  // namespace switchyard
