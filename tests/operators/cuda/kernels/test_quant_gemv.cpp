// GPU products on weights kept as ggml blocks (operators/cuda/kernels/quant_gemv.h, and cuda::linear
// above the GEMV's token count) against a double reference over the decoded blocks, on fresh random
// blocks of every block type (tests/operators/cpu/kernels/quant_test_blocks.h: the Q and K types
// decoded by the tests' own decoder, the IQ types and MXFP4 by core's reference); and the GPU's dequantisation to bf16 bit for bit
// against the CPU's quant::dequantize_rows_to_bf16, MXFP4 over all 256 exponents too.
//
// Bounds, with u = 2^-24 and M = sum_k magnitude_k |x_k| (magnitude: the sum of |terms| a decoded
// weight is made of, so cancellation inside a block's arithmetic is covered):
//   decode GEMV: each weight decoded in float (at most 3 roundings of its magnitude) and an f32
//     sum of `in` products: |y - ref| <= (in + 8) u M.
//   prefill: weights and x rounded to bf16 (the reference rounds them the same way, bit for bit
//     through dequantize_rows_to_bf16), an f32 sum on the tensor cores: |y - ref| <= (in + 8) u M'
//     with M' the sum of |products| of the rounded values.
// Skipped visibly without a GPU.
#include <doctest/doctest.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/quant_formats.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/gemv.h"
#include "operators/cuda/kernels/linear.h"
#include "operators/cuda/kernels/quant_gemv.h"
#include "tests/cuda_test_support.h"
#include "tests/operators/cpu/kernels/quant_test_blocks.h"

namespace sy = switchyard;
namespace cuda = switchyard::cuda;
using namespace switchyard::testing;

namespace {

constexpr double kU = 1.0 / (1 << 24);

std::int64_t block_of(sy::DType dtype) { return sy::dtype_info(dtype).block_elements; }

std::size_t row_bytes(sy::DType dtype, std::int64_t in) { return sy::storage_bytes(dtype, static_cast<std::uint64_t>(in)); }

struct Product {
  double value = 0, magnitude = 0;
};

// sum_k w[row, k] x[k] over decoded weights.
Product dot(const std::vector<DecodedWeight>& w, std::int64_t row, std::int64_t in, const float* x) {
  Product p;
  for (std::int64_t k = 0; k < in; ++k) {
    const DecodedWeight& wk = w[static_cast<std::size_t>(row * in + k)];
    p.value += wk.value * x[k];
    p.magnitude += wk.magnitude * std::fabs(x[k]);
  }
  return p;
}

}  // namespace

TEST_CASE("cuda quant gemv: every block type, 1 to 8 tokens, matches the double reference") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  for (const sy::DType dtype : kBlockTypes) {
    for (int round = 0; round < 4; ++round) {
      const std::int64_t tokens = draw(1, cuda::kGemvMaxTokens, random);
      const std::int64_t in = block_of(dtype) * draw(1, 2048 / block_of(dtype) + 3, random);
      const std::int64_t rows = draw(1, 160, random);
      INFO(sy::dtype_name(dtype) << " tokens " << tokens << " in " << in << " rows " << rows);
      const std::vector<std::uint8_t> blocks = random_blocks(dtype, rows * in, random);
      const std::vector<DecodedWeight> w = decode_rows(dtype, blocks.data(), rows, in);
      const std::vector<float> x = uniform(static_cast<std::size_t>(tokens * in), -1, 1, random);
      cuda::DeviceBuffer w_d = to_device(context, blocks), x_d = to_device(context, x);
      cuda::DeviceBuffer y_d = context.allocate(static_cast<std::size_t>(tokens * rows) * 4, "y");
      cuda::GemvShape shape;
      shape.tokens = tokens;
      shape.in = in;
      shape.rows = rows;
      REQUIRE(cuda::gemv_supports(shape, dtype, w_d.data(), x_d.as<float>()));
      cuda::gemv(shape, w_d.data(), dtype, x_d.as<float>(), y_d.as<float>(), context.stream());
      const std::vector<float> y = to_host<float>(context, y_d, static_cast<std::size_t>(tokens * rows));
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t r = 0; r < rows; ++r) {
          const Product ref = dot(w, r, in, x.data() + t * in);
          INFO("token " << t << " row " << r);
          REQUIRE(std::fabs(y[static_cast<std::size_t>(t * rows + r)] - ref.value) <=
                  (static_cast<double>(in) + 8) * kU * ref.magnitude);
        }
    }
  }
}

TEST_CASE("cuda quant gemv: grouped rows with strides and offsets in whole blocks") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  for (const sy::DType dtype : kBlockTypes) {
    // groups of rows_per_group rows each, starting `offset_rows` rows into a group of group_rows
    // rows; x per group at a stride, tokens at a stride (as MLA's per-head products lay them).
    const std::int64_t tokens = draw(1, 3, random), groups = draw(1, 4, random);
    const std::int64_t in = block_of(dtype) * draw(1, 4, random), rows_per_group = draw(1, 24, random);
    const std::int64_t offset_rows = draw(0, 5, random), group_rows = rows_per_group + offset_rows + draw(0, 3, random);
    const std::int64_t x_group_stride = in + 4 * draw(0, 3, random), x_token_stride = groups * x_group_stride;
    INFO(sy::dtype_name(dtype) << " tokens " << tokens << " groups " << groups << " in " << in << " rows/group "
                               << rows_per_group << " offset " << offset_rows << " of " << group_rows);
    const std::vector<std::uint8_t> blocks = random_blocks(dtype, groups * group_rows * in, random);
    const std::vector<DecodedWeight> w = decode_rows(dtype, blocks.data(), groups * group_rows, in);
    const std::vector<float> x = uniform(static_cast<std::size_t>(tokens * x_token_stride), -1, 1, random);
    cuda::DeviceBuffer w_d = to_device(context, blocks), x_d = to_device(context, x);
    const std::int64_t rows = groups * rows_per_group;
    cuda::DeviceBuffer y_d = context.allocate(static_cast<std::size_t>(tokens * rows) * 4, "y");
    cuda::GemvShape shape;
    shape.tokens = tokens;
    shape.in = in;
    shape.rows = rows;
    shape.rows_per_group = rows_per_group;
    shape.weight_group_stride = group_rows * in;
    shape.weight_row_offset = offset_rows * in;
    shape.x_group_stride = x_group_stride;
    shape.x_token_stride = x_token_stride;
    REQUIRE(cuda::gemv_supports(shape, dtype, w_d.data(), x_d.as<float>()));
    cuda::gemv(shape, w_d.data(), dtype, x_d.as<float>(), y_d.as<float>(), context.stream());
    const std::vector<float> y = to_host<float>(context, y_d, static_cast<std::size_t>(tokens * rows));
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t g = 0; g < groups; ++g)
        for (std::int64_t j = 0; j < rows_per_group; ++j) {
          const Product ref = dot(w, g * group_rows + offset_rows + j, in, x.data() + t * x_token_stride + g * x_group_stride);
          INFO("token " << t << " group " << g << " row " << j);
          REQUIRE(std::fabs(y[static_cast<std::size_t>(t * rows + g * rows_per_group + j)] - ref.value) <=
                  (static_cast<double>(in) + 8) * kU * ref.magnitude);
        }
  }
}

TEST_CASE("cuda quant gemv_swiglu: gate, up and SiLU-mul on blocks match the reference") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  for (const sy::DType dtype : kBlockTypes) {
    const std::int64_t tokens = draw(1, cuda::kGemvMaxTokens, random);
    const std::int64_t in = block_of(dtype) * draw(1, 1024 / block_of(dtype) + 2, random), rows = draw(1, 100, random);
    INFO(sy::dtype_name(dtype) << " tokens " << tokens << " in " << in << " rows " << rows);
    const std::vector<std::uint8_t> gate = random_blocks(dtype, rows * in, random), up = random_blocks(dtype, rows * in, random);
    const std::vector<DecodedWeight> wg = decode_rows(dtype, gate.data(), rows, in), wu = decode_rows(dtype, up.data(), rows, in);
    std::vector<float> x = uniform(static_cast<std::size_t>(tokens * in), -1, 1, random);
    cuda::DeviceBuffer g_d = to_device(context, gate), u_d = to_device(context, up), x_d = to_device(context, x);
    cuda::DeviceBuffer h_d = context.allocate(static_cast<std::size_t>(tokens * rows) * 4, "h");
    REQUIRE(cuda::gemv_swiglu_supports(tokens, in, dtype, g_d.data(), u_d.data(), x_d.as<float>()));
    cuda::gemv_swiglu(tokens, in, rows, g_d.data(), u_d.data(), dtype, x_d.as<float>(), h_d.as<float>(), context.stream());
    const std::vector<float> h = to_host<float>(context, h_d, static_cast<std::size_t>(tokens * rows));
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t r = 0; r < rows; ++r) {
        const Product g = dot(wg, r, in, x.data() + t * in), u = dot(wu, r, in, x.data() + t * in);
        const double eg = (static_cast<double>(in) + 8) * kU * g.magnitude, eu = (static_cast<double>(in) + 8) * kU * u.magnitude;
        const double silu = g.value / (1 + std::exp(-g.value));
        // |d silu / dg| <= 1.1; the silu and the product in float add a few u of the result.
        const double bound = 1.1 * eg * (std::fabs(u.value) + eu) + std::fabs(silu) * eu + 8 * kU * std::fabs(silu * u.value) + 1e-30;
        INFO("token " << t << " row " << r << " gate " << g.value << " up " << u.value);
        REQUIRE(std::fabs(h[static_cast<std::size_t>(t * rows + r)] - silu * u.value) <= bound);
      }
  }
}

TEST_CASE("cuda dequantize_to_bf16: bit for bit the CPU's dequantize_rows_to_bf16") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  for (const sy::DType dtype : kBlockTypes) {
    const std::int64_t in = block_of(dtype) * draw(1, 12, random), rows = draw(1, 300, random);
    INFO(sy::dtype_name(dtype) << " rows " << rows << " in " << in);
    const std::vector<std::uint8_t> blocks = random_blocks(dtype, rows * in, random);
    std::vector<std::uint16_t> expected(static_cast<std::size_t>(rows * in));
    sy::quant::dequantize_rows_to_bf16(dtype, blocks.data(), expected.data(), rows, in);
    cuda::DeviceBuffer w_d = to_device(context, blocks);
    cuda::DeviceBuffer out_d = context.allocate(expected.size() * 2, "bf16 rows");
    cuda::dequantize_to_bf16(dtype, w_d.data(), rows, in, out_d.as<std::uint16_t>(), context.stream());
    const std::vector<std::uint16_t> got = to_host<std::uint16_t>(context, out_d, expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("weight " << i);
      REQUIRE(got[i] == expected[i]);
    }
  }
  // MXFP4's scale over every exponent byte, subnormal (0, 1) and infinite products (255) too, in
  // rows of 17-byte blocks that start at every byte offset within a word.
  std::vector<std::uint8_t> blocks = random_blocks(sy::DType::mxfp4, 256 * 32, random);
  for (int e = 0; e < 256; ++e) blocks[static_cast<std::size_t>(17 * e)] = static_cast<std::uint8_t>(e);
  std::vector<std::uint16_t> expected(256 * 32);
  sy::quant::dequantize_rows_to_bf16(sy::DType::mxfp4, blocks.data(), expected.data(), 256, 32);
  cuda::DeviceBuffer w_d = to_device(context, blocks);
  cuda::DeviceBuffer out_d = context.allocate(expected.size() * 2, "bf16 rows");
  cuda::dequantize_to_bf16(sy::DType::mxfp4, w_d.data(), 256, 32, out_d.as<std::uint16_t>(), context.stream());
  const std::vector<std::uint16_t> got = to_host<std::uint16_t>(context, out_d, expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("mxfp4 exponent " << i / 32 << " weight " << i % 32);
    REQUIRE(got[i] == expected[i]);
  }
}

namespace {

// cuda::linear on `tokens` rows of x against blocks, checked on the rows `check` (all when empty).
void check_prefill(cuda::DeviceContext& context, sy::DType dtype, std::int64_t tokens, std::int64_t in, std::int64_t out,
                   std::mt19937& random, const std::vector<std::int64_t>& check) {
  INFO(sy::dtype_name(dtype) << " tokens " << tokens << " in " << in << " out " << out);
  const std::vector<std::uint8_t> blocks = random_blocks(dtype, out * in, random);
  const std::vector<float> x = uniform(static_cast<std::size_t>(tokens * in), -1, 1, random);
  cuda::DeviceBuffer w_d = to_device(context, blocks), x_d = to_device(context, x);
  cuda::DeviceBuffer y_d = context.allocate(static_cast<std::size_t>(tokens * out) * 4, "y");
  cuda::linear(context, x_d.as<float>(), tokens, in, w_d.data(), dtype, out, y_d.as<float>());
  const std::vector<float> y = to_host<float>(context, y_d, static_cast<std::size_t>(tokens * out));
  std::vector<float> x_rounded(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x_rounded[i] = sy::cpu::bf16_to_f32(sy::cpu::f32_to_bf16(x[i]));
  std::vector<std::int64_t> rows = check;
  if (rows.empty())
    for (std::int64_t r = 0; r < out; ++r) rows.push_back(r);
  std::vector<std::uint16_t> w_row(static_cast<std::size_t>(in));
  for (const std::int64_t r : rows) {
    sy::quant::dequantize_rows_to_bf16(dtype, blocks.data() + static_cast<std::size_t>(r) * row_bytes(dtype, in), w_row.data(), 1, in);
    for (std::int64_t t = 0; t < tokens; ++t) {
      double sum = 0, magnitude = 0;
      for (std::int64_t k = 0; k < in; ++k) {
        const double term = double(sy::cpu::bf16_to_f32(w_row[static_cast<std::size_t>(k)])) * x_rounded[static_cast<std::size_t>(t * in + k)];
        sum += term;
        magnitude += std::fabs(term);
      }
      INFO("token " << t << " row " << r);
      REQUIRE(std::fabs(y[static_cast<std::size_t>(t * out + r)] - sum) <= (static_cast<double>(in) + 8) * kU * magnitude + 1e-30);
    }
  }
}

}  // namespace

TEST_CASE("cuda linear: prefill on blocks (dequantised in chunks, cuBLAS) matches the reference") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  for (const sy::DType dtype : kBlockTypes)
    check_prefill(context, dtype, draw(cuda::kGemvMaxTokens + 1, 48, random), block_of(dtype) * draw(1, 6, random),
                  draw(1, 200, random), random, {});
  // More weights than one chunk: several chunks, the last one short; the rows each side of every
  // chunk boundary and the last row are checked.
  const std::vector<sy::DType> types(std::begin(kBlockTypes), std::end(kBlockTypes));
  const sy::DType dtype = types[static_cast<std::size_t>(draw(0, static_cast<std::int64_t>(types.size()) - 1, random))];
  const std::int64_t in = 4096, out = sy::quant::kDequantizeChunkWeights / in * 2 + 37;
  const std::int64_t chunk = sy::quant::dequantize_chunk_rows(out, in);
  REQUIRE(chunk < out);
  std::vector<std::int64_t> rows = {0, out - 1};
  for (std::int64_t r = chunk; r < out; r += chunk) {
    rows.push_back(r - 1);
    rows.push_back(r);
  }
  check_prefill(context, dtype, 12, in, out, random, rows);
}

TEST_CASE("cuda quant gemv: partial blocks and misaligned weights are refused") {
  alignas(256) static std::uint8_t buffer[4096];
  alignas(16) static float x[512];
  cuda::GemvShape shape;
  shape.tokens = 1;
  shape.rows = 2;
  shape.in = 48;  // not whole Q8_0 blocks of 32
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::q8_0, buffer, x));
  CHECK_THROWS_AS(cuda::gemv(shape, buffer, sy::DType::q8_0, x, x, nullptr), std::invalid_argument);
  shape.in = 64;
  CHECK(cuda::gemv_supports(shape, sy::DType::q8_0, buffer, x));
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::q8_0, buffer + 1, x));  // blocks are 2-byte aligned
  shape.in = 256;
  CHECK(cuda::gemv_supports(shape, sy::DType::q4_k, buffer, x));
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::q4_k, buffer + 2, x));  // Q4_K's are 4-byte aligned
  shape.weight_row_offset = 128;                                            // half a super-block
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::q4_k, buffer, x));
  CHECK_FALSE(cuda::gemv_swiglu_supports(1, 128, sy::DType::q6_k, buffer, buffer, x));
  CHECK_THROWS_AS(cuda::dequantize_to_bf16(sy::DType::q4_k, buffer, 1, 128, reinterpret_cast<std::uint16_t*>(x), nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::dequantize_to_bf16(sy::DType::f16, buffer, 1, 128, reinterpret_cast<std::uint16_t*>(x), nullptr),
                  std::invalid_argument);
  shape.weight_row_offset = 0;
  CHECK(cuda::gemv_supports(shape, sy::DType::iq2_xxs, buffer + 2, x));  // the IQ super-blocks: 2 bytes
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::iq2_xxs, buffer + 1, x));
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::iq4_xs, buffer + 2, x));  // IQ4_XS's and IQ1_M's: 4
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::iq1_m, buffer + 2, x));
  CHECK(cuda::gemv_supports(shape, sy::DType::mxfp4, buffer + 1, x));  // 17-byte blocks: any byte
  shape.in = 48;
  CHECK_FALSE(cuda::gemv_supports(shape, sy::DType::mxfp4, buffer, x));
  CHECK_FALSE(cuda::quant_gemv_dtype(sy::DType::bf16));
  CHECK_FALSE(cuda::quant_gemv_dtype(sy::DType::f8_e4m3));
  for (const sy::DType dtype : kBlockTypes) CHECK(cuda::quant_gemv_dtype(dtype));
}

#endif
