#include "operators/ops/mlp_op.h"

#include <span>
#include <utility>
#include <vector>

#include "operators/ops/activations.h"
#include "operators/cpu/kernels/kept_buffer.h"
#include "operators/cpu/kernels/linear.h"
#include "operators/cpu/kernels/silu_and_mul.h"

namespace switchyard {

MlpOp::MlpOp(const BuildContext& context, const Module& mlp, const char* gate, const char* up, const char* down)
    : gate_(context, context.child(mlp, gate), context.device_of(mlp)),
      up_(context, context.child(mlp, up), context.device_of(mlp)),
      down_(context, context.child(mlp, down), context.device_of(mlp)) {
  for (const char* name : {gate, up, down}) require_same_device(context, mlp, context.child(mlp, name));
}

MlpOp::MlpOp(LinearOp gate, LinearOp up, LinearOp down)
    : gate_(std::move(gate)), up_(std::move(up)), down_(std::move(down)) {}

bool MlpOp::gate_up_fusable() const {
  return gate_.device_dtype() == up_.device_dtype() && !gate_.has_bias() && !up_.has_bias();
}

void MlpOp::forward(const float* x, std::int64_t tokens, float* out) {
  const std::int64_t width = gate_.out_features();
  DeviceRuntime* gpu = gate_.gpu();
  // On a device: gate, up and SiLU-mul in one launch where it has one (decode).
  if (gpu != nullptr && gate_up_fusable() &&
      gpu->has_gated_up(x, tokens, gate_.in_features(), *gate_.device_tensor(), *up_.device_tensor())) {
    Scratch h(gpu, tokens * width, "an MLP's activations");
    gpu->gated_up(x, tokens, gate_.in_features(), width, *gate_.device_tensor(), *up_.device_tensor(), h);
    down_.forward(h, tokens, out);
    return;
  }
  if (gated_on_cpu(tokens)) return forward_gated_on_cpu(x, tokens, out);
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

// On the CPU, where gate and up round x to bf16 tiles for `tokens` tokens (gated_takes) and down
// rounds h, with the instruction set linear_batch and gated_batch pick (chosen_isa): the gated
// call's h tiles are the words that gate and up apart, silu_and_mul and down's own rounding of h
// give, so y is the same bits either way. gated_batch adds no bias, so gate and up have none; down's
// is added after its call, as forward adds it.
bool MlpOp::gated_on_cpu(std::int64_t tokens) const {
  if (gate_.gpu() != nullptr || gate_.has_bias() || up_.has_bias()) return false;
  const cpu::Isa isa = cpu::chosen_isa();
  return cpu::gated_takes(isa, gate_.weight().dtype(), up_.weight().dtype(), tokens) &&
         cpu::linear_rounds_x(isa, down_.weight().dtype(), tokens);
}

void MlpOp::forward_gated_on_cpu(const float* x, std::int64_t tokens, float* out) const {
  const std::int64_t in = gate_.in_features(), width = gate_.out_features();
  // x [tokens, in] and h [tokens, width] as bf16 tiles (cpu::x_tiles_bytes), the calling thread's,
  // kept between calls (a prefill's layers ask for the same sizes).
  thread_local std::vector<std::uint32_t> kept_x_tiles, kept_h_tiles;
  std::uint32_t* const x_tiles =
      cpu::kept_aligned_words(kept_x_tiles, static_cast<std::int64_t>(cpu::x_tiles_bytes(tokens, in) / 4));
  std::uint32_t* const h_tiles =
      cpu::kept_aligned_words(kept_h_tiles, static_cast<std::int64_t>(cpu::x_tiles_bytes(tokens, width) / 4));
  const std::int64_t token_tiles = (tokens + 15) / 16;
#pragma omp parallel for if (token_tiles > 1)
  for (std::int64_t tile = 0; tile < token_tiles; ++tile) cpu::write_x_tiles(x, tokens, in, tile, x_tiles);
  const cpu::GatedCall gated{x_tiles, tokens, in, gate_.weight().data(), gate_.weight().dtype(),
                             up_.weight().data(), up_.weight().dtype(), width, h_tiles};
  cpu::gated_batch(std::span(&gated, 1));
  cpu::LinearCall down = down_.cpu_call(nullptr, tokens, out);  // (x unread: h is in its tiles only)
  down.x_tiles = h_tiles;
  cpu::linear_batch(std::span(&down, 1));
  down_.add_cpu_bias(out, tokens);
}

}  // namespace switchyard
