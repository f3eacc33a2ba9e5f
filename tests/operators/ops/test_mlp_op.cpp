// MlpOp on the CPU: from the token counts at which gate, up and down all round x to bf16 tiles
// (cpu::gated_takes, cpu::linear_rounds_x), gate, up and SiLU run as one gated call into the down
// call's x tiles; that must give the bits of the projections as calls of their own (gate and up in
// one batch, SiLU, down and its bias), at those counts and below them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "operators/ops/mlp_op.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/linear.h"
#include "operators/cpu/kernels/silu_and_mul.h"
#include "tests/operators/cpu/kernels/quant_test_blocks.h"
#include "tests/test_seed.h"

namespace sy = switchyard;
namespace cpu = switchyard::cpu;
using switchyard::testing::test_seed;

namespace {

std::vector<float> random_normal(std::mt19937& random, std::int64_t count, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) v = normal(random);
  return values;
}

// A random [rows, cols] weight in `dtype`: bf16 of normal values of scale 0.1, or random blocks.
sy::Tensor random_weight(sy::DType dtype, std::int64_t rows, std::int64_t cols, std::mt19937& random) {
  sy::Tensor t = sy::Tensor::empty(dtype, {rows, cols});
  if (dtype == sy::DType::bf16) {
    const std::vector<float> values = random_normal(random, rows * cols, 0.1f);
    auto* bits = t.data_as<std::uint16_t>();
    for (std::size_t i = 0; i < values.size(); ++i) bits[i] = cpu::f32_to_bf16(values[i]);
  } else {
    const std::vector<std::uint8_t> bytes = sy::testing::random_blocks(dtype, rows * cols, random);
    std::memcpy(t.data(), bytes.data(), bytes.size());
  }
  return t;
}

}  // namespace

namespace {

// The MLP as calls of their own: gate and up in one batch (as MlpOp runs them where it does not
// gate), silu(g) * u, then down and its bias.
std::vector<float> mlp_apart(const sy::MlpOp& mlp, const std::vector<float>& x, std::int64_t tokens) {
  const sy::LinearOp &gate = mlp.gate_proj(), &up = mlp.up_proj(), &down = mlp.down_proj();
  const std::int64_t width = gate.out_features(), hidden = down.out_features();
  std::vector<float> g(static_cast<std::size_t>(tokens * width)), u(g.size()), out(static_cast<std::size_t>(tokens * hidden));
  const cpu::LinearCall calls[] = {gate.cpu_call(x.data(), tokens, g.data()), up.cpu_call(x.data(), tokens, u.data())};
  cpu::linear_batch(calls);
  cpu::silu_and_mul(g.data(), u.data(), tokens * width, g.data());
  cpu::linear(g.data(), tokens, width, down.weight().data(), down.weight().dtype(), hidden, out.data());
  down.add_cpu_bias(out.data(), tokens);
  return out;
}

}  // namespace

TEST_CASE("MLP on the CPU: gate, up and SiLU as one gated call give the bits of the calls apart") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  const cpu::Isa isa = cpu::chosen_isa();
  struct Case {
    sy::DType gate_up, down;
    std::int64_t hidden, width;
    bool down_bias;
    std::vector<std::int64_t> tokens;
  };
  // bf16 with widths that leave h's and x's last 32-wide chunk part empty; Q8_0 throughout; the
  // Q4_K_M-like mix with a Q5_0 down; bf16 gate and up over a Q8_0 down (gate and up round x from
  // 8 tokens, down only from 16); a down bias. Token counts below, at and past the thresholds
  // (kAmxTokens for bf16, kQuantPrefillTokens for block types), and several token tiles.
  const Case cases[] = {
      {sy::DType::bf16, sy::DType::bf16, 160, 200, false, {3, 8, 13, 37}},
      {sy::DType::q8_0, sy::DType::q8_0, 256, 288, false, {9, 16, 37}},
      {sy::DType::q4_k, sy::DType::q5_0, 512, 256, false, {7, 16, 50}},
      {sy::DType::bf16, sy::DType::q8_0, 192, 224, false, {10, 20}},
      {sy::DType::bf16, sy::DType::bf16, 160, 96, true, {5, 24}},
  };
  int gated_runs = 0;
  for (const Case& c : cases) {
    INFO("gate/up " << std::string(sy::dtype_name(c.gate_up)) << ", down " << std::string(sy::dtype_name(c.down))
                    << ", hidden " << c.hidden << ", width " << c.width << (c.down_bias ? ", down bias" : ""));
    sy::MlpOp mlp(sy::LinearOp(random_weight(c.gate_up, c.width, c.hidden, random)),
                  sy::LinearOp(random_weight(c.gate_up, c.width, c.hidden, random)),
                  sy::LinearOp(random_weight(c.down, c.hidden, c.width, random),
                               c.down_bias ? random_normal(random, c.hidden, 1.0f) : std::vector<float>{}));
    for (const std::int64_t tokens : c.tokens) {
      INFO("tokens " << tokens);
      const std::vector<float> x = random_normal(random, tokens * c.hidden, 1.0f);
      std::vector<float> out(static_cast<std::size_t>(tokens * c.hidden), NAN);
      mlp.forward(x.data(), tokens, out.data());
      if (cpu::gated_takes(isa, c.gate_up, c.gate_up, tokens) && cpu::linear_rounds_x(isa, c.down, tokens)) ++gated_runs;
      const std::vector<float> apart = mlp_apart(mlp, x, tokens);
      std::size_t not_finite = 0;
      for (float v : out) not_finite += std::isfinite(v) ? 0 : 1;
      CHECK(not_finite == 0);
      std::int64_t first_difference = -1;
      for (std::size_t i = 0; i < out.size() && first_difference < 0; ++i)
        if (std::memcmp(&out[i], &apart[i], sizeof(float)) != 0) first_difference = static_cast<std::int64_t>(i);
      INFO("first differing output: token " << first_difference / c.hidden << ", element " << first_difference % c.hidden);
      CHECK(first_difference == -1);
    }
  }
  if (gated_runs == 0)
    MESSAGE("this CPU has neither AMX nor AVX512-BF16: the MLPs ran apart only, the gated path untested");
}
