// Decode matrix-vector kernels (operators/cuda/kernels/gemv.h) against plain double references on fresh
// random inputs, in the grouped shapes MLA decode uses: the per-head value projection (rows of
// kv_b_proj) and the query absorption (rows of its transposed key part, strided q_nope as x).
// Tolerance: |y - ref| <= 1e-5 * sum |terms| (f32 accumulation of exactly widened bf16 weights
// and f32 inputs; no rounding of the inputs). Skipped visibly without a GPU.
#include <doctest/doctest.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <cmath>
#include <random>
#include <vector>

#include "operators/cpu/kernels/half.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/gemv.h"
#include "tests/cuda_test_support.h"
#include "tests/swiglu_test_support.h"

namespace sy = switchyard;
namespace cuda = switchyard::cuda;
using namespace switchyard::testing;
using switchyard::swiglu_testing::check_swiglu;

namespace {

std::vector<float> uniform_values(std::size_t n, std::mt19937& random) { return uniform(n, -1, 1, random); }


}  // namespace

TEST_CASE("cuda gemv: per-head value projection and query absorption match the reference") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  std::mt19937 random(std::random_device{}());
  for (int round = 0; round < 12; ++round) {
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    const std::int64_t tokens = 1 + round % 3, heads = 1 + round % 5, nope = 8 * (1 + round % 4);
    const std::int64_t v_dim = 8 + round, latent = 8 * (4 + round), rope = 8, q_head = nope + rope;
    const std::int64_t head_rows = nope + v_dim;
    INFO(sy::dtype_name(dtype) << " tokens " << tokens << " heads " << heads << " nope " << nope << " v " << v_dim
                               << " latent " << latent);
    const Weight w(static_cast<std::size_t>(heads * head_rows * latent), dtype, random);
    const std::vector<float> q = uniform_values(static_cast<std::size_t>(tokens * heads * q_head), random);
    const std::vector<float> ol = uniform_values(static_cast<std::size_t>(tokens * heads * latent), random);
    cuda::DeviceBuffer w_dev = w.upload(context);
    cuda::DeviceBuffer q_dev = context.upload(q.data(), q.size() * 4, "q"), ol_dev = context.upload(ol.data(), ol.size() * 4, "ol");
    cuda::DeviceBuffer absorbed = context.allocate(static_cast<std::size_t>(tokens * heads * latent) * 4, "out");
    cuda::DeviceBuffer values = context.allocate(static_cast<std::size_t>(tokens * heads * v_dim) * 4, "out");
    // W_UK^T per head: [heads, latent, nope], as GpuMlaAttention keeps it.
    Weight w_t(static_cast<std::size_t>(heads * latent * nope), dtype, random);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < nope; ++i)
        for (std::int64_t c = 0; c < latent; ++c) {
          const auto from = static_cast<std::size_t>((h * head_rows + i) * latent + c);
          const auto to = static_cast<std::size_t>((h * latent + c) * nope + i);
          w_t.f32[to] = w.f32[from];
          if (dtype == sy::DType::bf16) w_t.bf16[to] = w.bf16[from];
        }
    cuda::DeviceBuffer w_t_dev = w_t.upload(context);
    cuda::GemvShape absorb;
    absorb.tokens = tokens;
    absorb.in = nope;
    absorb.rows = heads * latent;
    absorb.rows_per_group = latent;
    absorb.weight_group_stride = latent * nope;
    absorb.x_group_stride = q_head;
    absorb.x_token_stride = heads * q_head;
    REQUIRE(cuda::gemv_supports(absorb, dtype, w_t_dev.data(), q_dev.as<float>()));
    cuda::gemv(absorb, w_t_dev.data(), dtype, q_dev.as<float>(), absorbed.as<float>(), context.stream());
    cuda::GemvShape shape;
    shape.tokens = tokens;
    shape.in = latent;
    shape.rows = heads * v_dim;
    shape.rows_per_group = v_dim;
    shape.weight_group_stride = head_rows * latent;
    shape.weight_row_offset = nope * latent;
    shape.x_group_stride = latent;
    shape.x_token_stride = heads * latent;
    REQUIRE(cuda::gemv_supports(shape, dtype, w_dev.data(), ol_dev.as<float>()));
    cuda::gemv(shape, w_dev.data(), dtype, ol_dev.as<float>(), values.as<float>(), context.stream());
    std::vector<float> got_absorbed(static_cast<std::size_t>(tokens * heads * latent));
    std::vector<float> got_values(static_cast<std::size_t>(tokens * heads * v_dim));
    context.copy_to_host(got_absorbed.data(), absorbed.data(), got_absorbed.size() * 4);
    context.copy_to_host(got_values.data(), values.data(), got_values.size() * 4);
    context.synchronize();
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t c = 0; c < latent; ++c) {
          double sum = 0, scale = 0;
          for (std::int64_t i = 0; i < nope; ++i) {
            const double term = double(q[(t * heads + h) * q_head + i]) * w.f32[(h * head_rows + i) * latent + c];
            sum += term;
            scale += std::fabs(term);
          }
          REQUIRE(std::fabs(got_absorbed[(t * heads + h) * latent + c] - sum) <= 1e-5 * scale);
        }
        for (std::int64_t j = 0; j < v_dim; ++j) {
          double sum = 0, scale = 0;
          for (std::int64_t c = 0; c < latent; ++c) {
            const double term = double(w.f32[(h * head_rows + nope + j) * latent + c]) * ol[(t * heads + h) * latent + c];
            sum += term;
            scale += std::fabs(term);
          }
          REQUIRE(std::fabs(got_values[(t * heads + h) * v_dim + j] - sum) <= 1e-5 * scale);
        }
      }
  }
}

TEST_CASE("cuda gemv: gate, up and SiLU-mul in one launch match the reference") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  std::mt19937 random(std::random_device{}());
  for (int round = 0; round < 10; ++round) {
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    const std::int64_t tokens = 1 + round % cuda::kGemvMaxTokens, in = 8 * (1 + round * 7), rows = 3 + round * 5;
    INFO(sy::dtype_name(dtype) << " tokens " << tokens << " in " << in << " rows " << rows);
    const Weight gate(static_cast<std::size_t>(rows * in), dtype, random), up(static_cast<std::size_t>(rows * in), dtype, random);
    std::vector<float> x = uniform_values(static_cast<std::size_t>(tokens * in), random);
    for (float& v : x) v *= 3;  // gate values well into silu's curve
    cuda::DeviceBuffer gate_d = gate.upload(context), up_d = up.upload(context);
    cuda::DeviceBuffer x_d = context.upload(x.data(), x.size() * 4, "x");
    cuda::DeviceBuffer h_d = context.allocate(static_cast<std::size_t>(tokens * rows) * 4, "h");
    REQUIRE(cuda::gemv_swiglu_supports(tokens, in, dtype, gate_d.data(), up_d.data(), x_d.as<float>()));
    cuda::gemv_swiglu(tokens, in, rows, gate_d.data(), up_d.data(), dtype, x_d.as<float>(), h_d.as<float>(),
                      context.stream());
    std::vector<float> h(static_cast<std::size_t>(tokens * rows));
    context.copy_to_host(h.data(), h_d.data(), h.size() * 4);
    context.synchronize();
    for (std::int64_t t = 0; t < tokens; ++t) {
      INFO("token " << t);
      check_swiglu(gate, up, in, rows, x.data() + t * in, h.data() + t * rows);
    }
  }
}

TEST_CASE("cuda gemv: shapes it cannot take are refused before any launch") {
  cuda::GemvShape shape;
  shape.tokens = 1;
  shape.in = 12;  // not a multiple of 8
  shape.rows = 4;
  alignas(16) static float buffer[64];
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::f32, buffer, buffer));
  CHECK_THROWS_AS(cuda::gemv(shape, buffer, sy::DType::f32, buffer, buffer, nullptr), std::invalid_argument);
  shape.in = 16;
  shape.tokens = cuda::kGemvMaxTokens + 1;
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::bf16, buffer, buffer));
  shape.tokens = 1;
  CHECK(cuda::gemv_supports(shape, sy::DType::bf16, buffer, buffer));
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::f16, buffer, buffer));
}

#endif
