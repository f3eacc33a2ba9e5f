// cpu::linear on block-quantised weights: every block type, every instruction-set variant this
// machine runs, decode and prefill, against a double-precision reference over the tests' own decoder
// of the weights (quant_test_blocks.h).
//
// Bounds, with u = 2^-24 and M = sum_k magnitude_k |x_k| (magnitude: the sum of |terms| a decoded
// weight is made of, as the kernels' float arithmetic sees it):
// (a) decode against the quantised-then-dequantised x (d * q, exact in double): the integer sums
//     are exact, each block adds a few float roundings and the blocks' sum rounds once a term:
//     |y - ref| <= 8 u (blocks + 8) M. A wrong or missing block (about M / blocks) exceeds it.
// (b) decode against f32 x: each quantised input is off by at most d_b / 2 (d_b = its block's
//     max |x| / 127), so |y - ref_f32| <= sum_k |w_k| d_b(k) / 2 + bound (a), stated per element.
// (c) prefill (kQuantPrefillTokens tokens or more) against f32 x: weights dequantised to f32
//     (3 roundings of magnitude each) and an f32 sum of `in` products: |y - ref| <= (in + 8) u M.
// (d) AMX's tiles (cpu::linear_rounds_x): (c)'s weights and x each rounded once more, to bf16
//     (relative 2^-9 each): |y - ref| <= 2^-8 sum_k |w_k x_k| (1 + 1%) + (in + 16) u M.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "operators/cpu/routed_experts.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/kernel_options.h"
#include "operators/cpu/kernels/linear.h"
#include "operators/cpu/kernels/linear_kernels.h"
#include "operators/cpu/kernels/prefill_stages.h"
#include "operators/cpu/kernels/quant_dot.h"
#include "operators/cpu/kernels/silu_and_mul.h"
#include "tests/operators/cpu/kernels/amx_emulation.h"
#include "tests/operators/cpu/kernels/quant_test_blocks.h"
#include "tests/test_seed.h"

namespace sy = switchyard;
namespace cpu = switchyard::cpu;
namespace detail = switchyard::cpu::detail;
using switchyard::testing::DecodedWeight;
using switchyard::testing::test_seed;

namespace {

std::vector<cpu::Isa> supported_isas() {
  std::vector<cpu::Isa> isas;
  for (cpu::Isa isa : cpu::kAllIsas)
    if (cpu::isa_supported(isa)) isas.push_back(isa);
  return isas;
}

std::vector<float> random_x(std::mt19937& random, std::int64_t count) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (float& v : x) v = normal(random);
  return x;
}

// x as the kernels quantise it for `dtype`, dequantised (d * q), and each input's block scale d.
struct QuantizedX {
  std::vector<double> value, d;
};
QuantizedX quantized_x(sy::DType dtype, const std::vector<float>& x, std::int64_t tokens, std::int64_t in) {
  const std::int64_t stride = detail::activation_bytes(dtype, in);
  // 64-byte aligned, as the kernels' buffers are (BlockQ8_K's alignment).
  std::vector<std::uint8_t> storage(static_cast<std::size_t>(tokens * stride + 64));
  auto* bytes = storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64;
  detail::quantize_activations(dtype, x.data(), 0, tokens, in, bytes);
  QuantizedX q{std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t k = 0; k < in; ++k) {
      const auto i = static_cast<std::size_t>(t * in + k);
      if (detail::takes_q8_k(dtype)) {
        const auto& block = reinterpret_cast<const sy::quant::BlockQ8_K*>(bytes + t * stride)[k / 256];
        q.d[i] = block.d;
        q.value[i] = static_cast<double>(block.d) * block.qs[k % 256];
      } else {
        const auto& block = reinterpret_cast<const detail::ActivationBlock32*>(bytes + t * stride)[k / 32];
        q.d[i] = block.d;
        q.value[i] = static_cast<double>(block.d) * block.qs[k % 32];
      }
    }
  return q;
}

struct Case {
  sy::DType dtype;
  std::int64_t tokens, in, out;
};

// y from cpu::linear(isa) against the bounds of the header.
void expect_close(cpu::Isa isa, const Case& c, const std::vector<std::uint8_t>& weight, const std::vector<float>& x,
                  const std::vector<float>& y) {
  const auto w = sy::testing::decode_rows(c.dtype, weight.data(), c.out, c.in);
  const bool tiles = cpu::linear_rounds_x(isa, c.dtype, c.tokens);
  const bool decode = !tiles && cpu::linear_quantizes_x(c.dtype, c.tokens);
  const QuantizedX q = decode ? quantized_x(c.dtype, x, c.tokens, c.in) : QuantizedX{};
  const double u = std::ldexp(1.0, -24);
  const double blocks = static_cast<double>(c.in / sy::dtype_info(c.dtype).block_elements);
  int failures = 0;
  for (std::int64_t t = 0; t < c.tokens && failures < 5; ++t)
    for (std::int64_t o = 0; o < c.out && failures < 5; ++o) {
      double exact = 0, with_q = 0, magnitude = 0, q_error = 0, products = 0;
      for (std::int64_t k = 0; k < c.in; ++k) {
        const auto i = static_cast<std::size_t>(t * c.in + k);
        const DecodedWeight& wk = w[static_cast<std::size_t>(o * c.in + k)];
        exact += wk.value * x[i];
        products += std::fabs(wk.value * x[i]);
        if (decode) {
          with_q += wk.value * q.value[i];
          magnitude += wk.magnitude * std::fabs(q.value[i]);
          q_error += std::fabs(wk.value) * q.d[i] / 2;
        } else {
          magnitude += wk.magnitude * std::fabs(x[i]);
        }
      }
      const double got = y[static_cast<std::size_t>(t * c.out + o)];
      if (decode) {
        const double bound_a = 8 * u * (blocks + 8) * magnitude;
        const double bound_b = q_error * (1 + 1e-5) + bound_a;
        if (!(std::fabs(got - with_q) <= bound_a)) {
          ++failures;
          FAIL_CHECK("y[" << t << ", " << o << "] = " << got << ", reference on quantised x " << with_q << ", bound "
                          << bound_a);
        }
        if (!(std::fabs(got - exact) <= bound_b)) {
          ++failures;
          FAIL_CHECK("y[" << t << ", " << o << "] = " << got << ", reference on f32 x " << exact << ", bound " << bound_b);
        }
      } else if (tiles) {
        const double bound_d = std::ldexp(1.0, -8) * products * 1.01 + (static_cast<double>(c.in) + 16) * u * magnitude;
        if (!(std::fabs(got - exact) <= bound_d)) {
          ++failures;
          FAIL_CHECK("y[" << t << ", " << o << "] = " << got << ", reference " << exact << ", bound " << bound_d << " (tiles)");
        }
      } else {
        const double bound_c = (static_cast<double>(c.in) + 8) * u * magnitude;
        if (!(std::fabs(got - exact) <= bound_c)) {
          ++failures;
          FAIL_CHECK("y[" << t << ", " << o << "] = " << got << ", reference " << exact << ", bound " << bound_c);
        }
      }
    }
}

void check_case(cpu::Isa isa, const Case& c, std::mt19937& random) {
  INFO("isa " << std::string(cpu::isa_name(isa)) << ", weights " << std::string(sy::dtype_name(c.dtype)) << ", tokens "
              << c.tokens << ", in " << c.in << ", out " << c.out);
  const std::vector<std::uint8_t> weight = sy::testing::random_blocks(c.dtype, c.out * c.in, random);
  const std::vector<float> x = random_x(random, c.tokens * c.in);
  std::vector<float> y(static_cast<std::size_t>(c.tokens * c.out), NAN);
  cpu::linear(isa, x.data(), c.tokens, c.in, weight.data(), c.dtype, c.out, y.data());
  expect_close(isa, c, weight, x, y);
}

}  // namespace

TEST_CASE("quant linear: every block type and variant against the double reference") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  for (sy::DType dtype : sy::testing::kBlockTypes) {
    CHECK(cpu::linear_supports(dtype));
    const std::int64_t block = sy::dtype_info(dtype).block_elements;
    for (cpu::Isa isa : supported_isas()) {
      // One block per row; several; out not a multiple of 16 (the row groups), or a single row.
      for (const std::int64_t in : {block, 3 * block})
        for (const std::int64_t out : {std::int64_t{1}, std::int64_t{19}})
          for (const std::int64_t tokens : {1, 2, 7, 15, 16, 17, 40})
            check_case(isa, Case{dtype, tokens, in, out}, random);
    }
  }
}

TEST_CASE("quant linear: AMX's tiles path (emulated) on every block type, from kQuantPrefillTokens tokens") {
  // The AMX variant's arithmetic (bf16 panels of the dequantised rows, x's bf16 tiles) in plain C++,
  // so that any CPU tests what an AMX machine runs; an AMX machine also runs it through check_case.
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  CHECK_FALSE(cpu::linear_rounds_x(cpu::Isa::amx, sy::DType::q4_k, cpu::kQuantPrefillTokens - 1));
  CHECK_FALSE(cpu::linear_rounds_x(cpu::Isa::avx512, sy::DType::q8_0, 64));
  for (sy::DType dtype : sy::testing::kBlockTypes) {
    REQUIRE(cpu::linear_rounds_x(cpu::Isa::amx, dtype, cpu::kQuantPrefillTokens));
    const std::int64_t block = sy::dtype_info(dtype).block_elements;
    // Rows past a panel of 32 and past a tile of 16, tokens past a tile of 16; two calls on one x
    // share its tiles.
    for (const std::int64_t tokens : {cpu::kQuantPrefillTokens - 1, cpu::kQuantPrefillTokens, std::int64_t{33}}) {
      const std::int64_t in = 2 * block, out = 45;
      INFO("weights " << std::string(sy::dtype_name(dtype)) << ", tokens " << tokens);
      const std::vector<std::uint8_t> a = sy::testing::random_blocks(dtype, out * in, random),
                                      b = sy::testing::random_blocks(dtype, 7 * in, random);
      const std::vector<float> x = random_x(random, tokens * in);
      std::vector<float> ya(static_cast<std::size_t>(tokens * out), NAN), yb(static_cast<std::size_t>(tokens * 7), NAN);
      const cpu::LinearCall calls[] = {{x.data(), tokens, in, a.data(), dtype, out, ya.data()},
                                       {x.data(), tokens, in, b.data(), dtype, 7, yb.data()}};
      sy::testing::linear_batch_emulating_amx(calls);
      expect_close(cpu::Isa::amx, Case{dtype, tokens, in, out}, a, x, ya);
      expect_close(cpu::Isa::amx, Case{dtype, tokens, in, 7}, b, x, yb);
    }
  }
}

TEST_CASE("quant linear: the SIMD variants equal the scalar variant (AMX's tiles their emulation) up to the order of float sums") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t in = 2048, out = 37;
  for (sy::DType dtype : sy::testing::kBlockTypes)
    for (const std::int64_t tokens : {1, 4, 15, 24}) {
      INFO("weights " << std::string(sy::dtype_name(dtype)) << ", tokens " << tokens);
      const std::vector<std::uint8_t> weight = sy::testing::random_blocks(dtype, out * in, random);
      const std::vector<float> x = random_x(random, tokens * in);
      std::vector<float> scalar(static_cast<std::size_t>(tokens * out));
      cpu::linear(cpu::Isa::scalar, x.data(), tokens, in, weight.data(), dtype, out, scalar.data());
      const auto w = sy::testing::decode_rows(dtype, weight.data(), out, in);
      // AMX's tiles path (bf16 x and weights) against its plain C++ emulation, the rest against
      // the scalar variant; either pair sums the same products in another order.
      std::vector<float> emulated(scalar.size(), NAN);
      const cpu::LinearCall call{x.data(), tokens, in, weight.data(), dtype, out, emulated.data()};
      sy::testing::linear_batch_emulating_amx(std::span(&call, 1));
      for (cpu::Isa isa : supported_isas()) {
        if (isa == cpu::Isa::scalar) continue;
        INFO("isa " << std::string(cpu::isa_name(isa)));
        const bool tiles = cpu::linear_rounds_x(isa, dtype, tokens);
        const std::vector<float>& baseline = tiles ? emulated : scalar;
        std::vector<float> y(scalar.size(), NAN);
        cpu::linear(isa, x.data(), tokens, in, weight.data(), dtype, out, y.data());
        for (std::int64_t t = 0; t < tokens; ++t)
          for (std::int64_t o = 0; o < out; ++o) {
            double magnitude = 0;  // of the terms, on f32 x (quantised x is within 1/254 of a block's max)
            for (std::int64_t k = 0; k < in; ++k)
              magnitude += w[static_cast<std::size_t>(o * in + k)].magnitude * std::fabs(x[static_cast<std::size_t>(t * in + k)]);
            // Tiles: two f32 sums of `in` bf16 products (bf16 values within 1% of the terms' own).
            const double bound = (tiles ? 2.0 * (in + 8) : 2 * 8.0 * (in / 32 + 8)) * std::ldexp(1.0, -24) * magnitude * 1.01;
            const auto i = static_cast<std::size_t>(t * out + o);
            if (!(std::fabs(double{y[i]} - baseline[i]) <= bound))
              FAIL_CHECK("y[" << t << ", " << o << "] = " << y[i] << (tiles ? ", emulated tiles " : ", scalar ") << baseline[i]
                              << ", bound " << bound);
          }
      }
    }
}

TEST_CASE("quant linear: a batch of mixed dtypes, some calls sharing x, equals the calls one by one") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t hidden = 512, inter = 256;
  for (cpu::Isa isa : supported_isas())
    for (const std::int64_t tokens : {1, 3, 20}) {
      INFO("isa " << std::string(cpu::isa_name(isa)) << ", tokens " << tokens);
      const std::vector<float> x = random_x(random, tokens * hidden), h = random_x(random, tokens * inter);
      struct Weight {
        sy::DType dtype;
        std::int64_t in, out;
        const float* x;
        std::vector<std::uint8_t> bytes;
      };
      std::vector<Weight> weights;
      // Gate and up on x (Q4_K, sharing its Q8_K bytes with an IQ2_XXS call), a Q8_0, a Q5_1 and an
      // MXFP4 call on the same x (its 32-input bytes), a Q6_K down on h, and bf16 weights on x.
      for (sy::DType dtype : {sy::DType::q4_k, sy::DType::q4_k, sy::DType::iq2_xxs, sy::DType::q8_0, sy::DType::q5_1,
                              sy::DType::mxfp4})
        weights.push_back({dtype, hidden, inter, x.data(), sy::testing::random_blocks(dtype, hidden * inter, random)});
      weights.push_back({sy::DType::q6_k, inter, hidden, h.data(), sy::testing::random_blocks(sy::DType::q6_k, hidden * inter, random)});
      std::vector<std::uint8_t> bf16(static_cast<std::size_t>(2 * hidden * 16));
      for (std::size_t i = 0; i < bf16.size(); i += 2) {
        const std::uint16_t bits = cpu::f32_to_bf16(std::normal_distribution<float>(0.0f, 1.0f)(random));
        bf16[i] = static_cast<std::uint8_t>(bits);
        bf16[i + 1] = static_cast<std::uint8_t>(bits >> 8);
      }
      weights.push_back({sy::DType::bf16, hidden, 16, x.data(), bf16});
      std::vector<std::vector<float>> batched, single;
      std::vector<cpu::LinearCall> calls;
      for (const Weight& w : weights) {
        batched.emplace_back(static_cast<std::size_t>(tokens * w.out), NAN);
        single.emplace_back(static_cast<std::size_t>(tokens * w.out), NAN);
      }
      for (std::size_t i = 0; i < weights.size(); ++i) {
        const Weight& w = weights[i];
        calls.push_back({w.x, tokens, w.in, w.bytes.data(), w.dtype, w.out, batched[i].data()});
        cpu::linear(isa, w.x, tokens, w.in, w.bytes.data(), w.dtype, w.out, single[i].data());
      }
      cpu::linear_batch(isa, calls);
      for (std::size_t i = 0; i < weights.size(); ++i) {
        INFO("call " << i << ", " << std::string(sy::dtype_name(weights[i].dtype)));
        // Each row's arithmetic is the same whichever thread or batch runs it.
        CHECK(batched[i] == single[i]);
        if (weights[i].dtype != sy::DType::bf16)
          expect_close(isa, Case{weights[i].dtype, tokens, weights[i].in, weights[i].out}, weights[i].bytes,
                       weights[i].x == x.data() ? x : h, batched[i]);
      }
    }
}

TEST_CASE("quant linear: inside a parallel region each thread's call runs on its own") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t in = 1024, out = 48, threads = 4;
  const std::vector<std::uint8_t> weight = sy::testing::random_blocks(sy::DType::q4_k, in * out, random);
  const std::vector<float> x = random_x(random, threads * in);
  std::vector<float> alone(static_cast<std::size_t>(threads * out)), inside(alone.size(), NAN);
  for (std::int64_t t = 0; t < threads; ++t)
    cpu::linear(x.data() + t * in, 1, in, weight.data(), sy::DType::q4_k, out, alone.data() + t * out);
#pragma omp parallel for num_threads(threads)
  for (std::int64_t t = 0; t < threads; ++t)
    cpu::linear(x.data() + t * in, 1, in, weight.data(), sy::DType::q4_k, out, inside.data() + t * out);
  CHECK(alone == inside);
}

TEST_CASE("quant linear: rows that are not whole blocks are refused, naming the dtype and sizes") {
  std::vector<float> x(300, 1.0f), y(4, -1.0f);
  std::vector<std::uint8_t> weight(4096, 0);
  for (sy::DType dtype : sy::testing::kBlockTypes) {
    const std::int64_t in = sy::dtype_info(dtype).block_elements + 4;
    INFO("dtype " << std::string(sy::dtype_name(dtype)));
    try {
      cpu::linear(x.data(), 1, in, weight.data(), dtype, 2, y.data());
      FAIL_CHECK("no exception");
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      INFO("message: " << message);
      CHECK(message.find(sy::dtype_name(dtype)) != std::string::npos);
      CHECK(message.find("in = " + std::to_string(in)) != std::string::npos);
      CHECK(message.find("out = 2") != std::string::npos);
    }
    // In a batch, before any call runs: the good call's y stays as it was.
    std::vector<float> good_y(2, -1.0f);
    const cpu::LinearCall calls[] = {
        {x.data(), 1, 256, weight.data(), sy::DType::q4_k, 2, good_y.data()},
        {x.data(), 1, in, weight.data(), dtype, 2, y.data()},
    };
    CHECK_THROWS_AS(cpu::linear_batch(calls), std::invalid_argument);
    CHECK(good_y == std::vector<float>(2, -1.0f));
  }
}

TEST_CASE("quant linear: a decode call on x changed in place, or on weights of the other kind, quantises x again") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t in = 512, out = 8, tokens = 2;
  const std::vector<std::uint8_t> k_weight = sy::testing::random_blocks(sy::DType::q4_k, in * out, random);
  const std::vector<std::uint8_t> weight32 = sy::testing::random_blocks(sy::DType::q8_0, in * out, random);
  std::vector<float> x = random_x(random, tokens * in), y(tokens * out);
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    if (round == 2) x[static_cast<std::size_t>(tokens * in - 1)] += 1.0f;  // one input changes, in place
    cpu::linear(x.data(), tokens, in, k_weight.data(), sy::DType::q4_k, out, y.data());
    expect_close(cpu::chosen_isa(), Case{sy::DType::q4_k, tokens, in, out}, k_weight, x, y);
    cpu::linear(x.data(), tokens, in, weight32.data(), sy::DType::q8_0, out, y.data());
    expect_close(cpu::chosen_isa(), Case{sy::DType::q8_0, tokens, in, out}, weight32, x, y);
    // The same floats read as one token of twice the inputs.
    std::vector<float> y_one(out);
    cpu::linear(x.data(), 1, 2 * in, k_weight.data(), sy::DType::q4_k, out / 2, y_one.data());
    expect_close(cpu::chosen_isa(), Case{sy::DType::q4_k, 1, 2 * in, out / 2}, k_weight, x, y_one);
  }
}

TEST_CASE("quant linear: NaN and infinite inputs or scales give NaN in their outputs only, on every path") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t in = 512, out = 5;
  for (sy::DType dtype : sy::testing::kBlockTypes)
    for (cpu::Isa isa : supported_isas())
      for (const std::int64_t tokens : {3, 20}) {
        INFO("isa " << std::string(cpu::isa_name(isa)) << ", weights " << std::string(sy::dtype_name(dtype)) << ", tokens "
                    << tokens);
        std::vector<std::uint8_t> weight = sy::testing::random_blocks(dtype, in * out, random);
        // Row 1's first scale d becomes NaN; MXFP4's exponent has no NaN (nor infinity), so its
        // weights stay finite.
        const auto row_bytes = static_cast<std::size_t>(sy::storage_bytes(dtype, in));
        const bool nan_scale = dtype != sy::DType::mxfp4;
        if (dtype == sy::DType::iq1_m) sy::quant::set_block_scales(dtype, weight.data() + row_bytes, NAN, 0.0f);
        if (nan_scale && dtype != sy::DType::iq1_m) {
          const auto d_offset = static_cast<std::size_t>(sy::quant::half_scale_offsets(dtype).front());
          weight[row_bytes + d_offset] = 0x00;
          weight[row_bytes + d_offset + 1] = 0x7e;  // f16 quiet NaN
        }
        std::vector<float> x = random_x(random, tokens * in), y(static_cast<std::size_t>(tokens * out));
        x[7] = NAN;                   // token 0
        x[in + 300] = INFINITY;       // token 1
        cpu::linear(isa, x.data(), tokens, in, weight.data(), dtype, out, y.data());
        for (std::int64_t t = 0; t < tokens; ++t)
          for (std::int64_t o = 0; o < out; ++o) {
            const bool poisoned = t < 2 || (o == 1 && nan_scale);
            INFO("y[" << t << ", " << o << "] = " << y[static_cast<std::size_t>(t * out + o)]);
            CHECK(std::isfinite(y[static_cast<std::size_t>(t * out + o)]) == !poisoned);
          }
      }
}

TEST_CASE("quant linear: the CPU routed experts run block-quantised weights as the linear calls they are made of") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t hidden = 512, inter = 256;
  constexpr int experts = 6, top_k = 2;
  // Q4_K gate and up, Q6_K down (the Q4_K_M mix); Q8_0 throughout; IQ2_XXS gate and up, IQ4_XS
  // down (an IQ mix); MXFP4 throughout (gpt-oss).
  const sy::DType mixes[][2] = {{sy::DType::q4_k, sy::DType::q6_k}, {sy::DType::q8_0, sy::DType::q8_0},
                                {sy::DType::iq2_xxs, sy::DType::iq4_xs}, {sy::DType::mxfp4, sy::DType::mxfp4}};
  for (const auto& mix : mixes) {
    const sy::DType gate_up = mix[0], down = mix[1];
    const bool k_types = detail::takes_q8_k(gate_up);
    INFO("gate/up " << std::string(sy::dtype_name(gate_up)) << ", down " << std::string(sy::dtype_name(down)));
    std::vector<std::vector<std::uint8_t>> bytes;
    auto tensor = [&](sy::DType dtype, std::int64_t rows, std::int64_t cols) {
      bytes.push_back(sy::testing::random_blocks(dtype, rows * cols, random));
      sy::Tensor t = sy::Tensor::empty(dtype, {rows, cols});
      std::copy(bytes.back().begin(), bytes.back().end(), t.data_as<std::uint8_t>());
      return t;
    };
    std::vector<sy::RoutedExperts::Expert> list;
    for (int e = 0; e < experts; ++e)
      list.push_back({sy::LinearOp(tensor(gate_up, inter, hidden)), sy::LinearOp(tensor(gate_up, inter, hidden)),
                      sy::LinearOp(tensor(down, hidden, inter))});
    const sy::RoutedExperts op(std::move(list));
    // 1 and 3 tokens: the fused decode path; 64 tokens: groups of about 21 tokens an expert, most past
    // kQuantPrefillTokens.
    for (const std::int64_t tokens : {1, 3, 64}) {
      INFO("tokens " << tokens);
      const std::vector<float> x = random_x(random, tokens * hidden);
      std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * top_k));
      std::vector<float> weights(ids.size());
      for (std::int64_t t = 0; t < tokens; ++t) {
        const int first = static_cast<int>(random() % experts);
        ids[static_cast<std::size_t>(t * top_k)] = first;
        ids[static_cast<std::size_t>(t * top_k + 1)] = (first + 1 + static_cast<int>(random() % (experts - 1))) % experts;
        weights[static_cast<std::size_t>(t * top_k)] = 0.7f;
        weights[static_cast<std::size_t>(t * top_k + 1)] = 0.3f;
      }
      std::vector<float> out(static_cast<std::size_t>(tokens * hidden), NAN);
      op.forward(x.data(), tokens, ids.data(), weights.data(), top_k, out.data());
      // Each token through its experts one call at a time (one token each: the integer path).
      std::vector<float> g(inter), u(inter), y(hidden), expected(out.size(), 0.0f);
      for (std::int64_t t = 0; t < tokens; ++t)
        for (int k = 0; k < top_k; ++k) {
          const auto e = static_cast<std::size_t>(ids[static_cast<std::size_t>(t * top_k + k)]);
          const float* xt = x.data() + t * hidden;
          cpu::linear(xt, 1, hidden, bytes[3 * e].data(), gate_up, inter, g.data());
          cpu::linear(xt, 1, hidden, bytes[3 * e + 1].data(), gate_up, inter, u.data());
          cpu::silu_and_mul(g.data(), u.data(), inter, g.data());
          cpu::linear(g.data(), 1, inter, bytes[3 * e + 2].data(), down, hidden, y.data());
          for (std::int64_t i = 0; i < hidden; ++i)
            expected[static_cast<std::size_t>(t * hidden + i)] += weights[static_cast<std::size_t>(t * top_k + k)] * y[static_cast<std::size_t>(i)];
        }
      // The grouped path's 32-weight types switch to f32 panels (f32 x), and on AMX every block type
      // to bf16 tiles: the difference is then the activation quantisation's (of order 1/254 of a
      // block's largest input a term) and bf16's; the integer paths compute every row as the
      // one-token calls do, up to float rounding.
      const bool panels = (!k_types || cpu::linear_rounds_x(cpu::chosen_isa(), gate_up, cpu::kQuantPrefillTokens)) &&
                          tokens * top_k > 16;
      double max_abs = 0;
      for (float v : expected) max_abs = std::max(max_abs, std::fabs(double{v}));
      int failures = 0;
      for (std::size_t i = 0; i < out.size() && failures < 5; ++i) {
        const double bound = (panels ? 0.05 : 1e-5) * max_abs;
        if (!(std::fabs(double{out[i]} - expected[i]) <= bound)) {
          ++failures;
          FAIL_CHECK("out[" << i / hidden << ", " << i % hidden << "] = " << out[i] << ", calls one by one " << expected[i]
                            << ", bound " << bound);
        }
      }
      // x changed in place between two calls gives what a fresh copy of it gives (no quantised x
      // kept from the last).
      std::vector<float> changed = x, copy(x.size());
      for (float& v : changed) v = -0.5f * v;
      std::copy(changed.begin(), changed.end(), copy.begin());
      std::vector<float> in_place(out.size(), NAN), fresh(out.size(), NAN);
      op.forward(changed.data(), tokens, ids.data(), weights.data(), top_k, in_place.data());
      for (std::size_t i = 0; i < changed.size(); ++i) changed[i] = x[i];
      op.forward(changed.data(), tokens, ids.data(), weights.data(), top_k, in_place.data());
      op.forward(x.data(), tokens, ids.data(), weights.data(), top_k, fresh.data());
      CHECK(std::memcmp(in_place.data(), fresh.data(), out.size() * sizeof(float)) == 0);
      op.forward(copy.data(), tokens, ids.data(), weights.data(), top_k, fresh.data());
      CHECK(std::memcmp(in_place.data(), fresh.data(), out.size() * sizeof(float)) != 0);
    }
  }
}

TEST_CASE("quant linear: a gated batch writes the words that gate, up, SiLU and the tile writer give, on every path that takes it") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::int64_t> tokens_of(cpu::kQuantPrefillTokens, 50), plain_out_of(1, 150);
  // The real paths this CPU takes (AMX or AVX512-BF16), and AMX's emulated (any CPU).
  std::vector<cpu::Isa> isas;
  for (cpu::Isa isa : supported_isas())
    if (cpu::gated_takes(isa, sy::DType::q8_0, sy::DType::q8_0, cpu::kQuantPrefillTokens)) isas.push_back(isa);
  const bool emulated_only = isas.empty();
  isas.push_back(cpu::Isa::scalar);  // (stands for the emulation)
  const sy::DType dtypes[][2] = {{sy::DType::bf16, sy::DType::bf16}, {sy::DType::q8_0, sy::DType::q8_0},
                                 {sy::DType::q4_k, sy::DType::q4_k}, {sy::DType::q4_k, sy::DType::q5_0}};
  for (int round = 0; round < 6; ++round)
    for (cpu::Isa isa : isas) {
      const bool emulate = isa == cpu::Isa::scalar;
      const std::string path = emulate ? "AMX emulated" : std::string("isa ") + cpu::isa_name(isa);
      INFO("round " << round << ", " << path);
      // A batch of every dtype pair: bf16 with odd widths (h's last chunk partly past `out`), the
      // block types with whole blocks; the threads' items split each call's rows.
      struct Case {
        std::int64_t tokens, in, out;
        sy::DType gate_dtype, up_dtype;
        std::vector<std::uint8_t> gate, up;
        std::vector<float> x;
        cpu::detail::AlignedWords x_tiles, h_tiles, expected;
        std::int64_t h_words;
      };
      std::vector<Case> cases;
      for (const auto& pair : dtypes) {
        Case c;
        c.gate_dtype = pair[0];
        c.up_dtype = pair[1];
        const bool plain = pair[0] == sy::DType::bf16;
        c.tokens = tokens_of(random);
        c.in = plain ? 32 * (1 + static_cast<std::int64_t>(random() % 6)) + static_cast<std::int64_t>(random() % 2) * 2 : 256;
        c.out = plain ? plain_out_of(random) : 32 * (1 + static_cast<std::int64_t>(random() % 8));
        auto weight = [&](sy::DType dtype) {
          if (dtype != sy::DType::bf16) return sy::testing::random_blocks(dtype, c.out * c.in, random);
          std::vector<std::uint8_t> bytes(static_cast<std::size_t>(c.out * c.in * 2));
          const std::vector<float> values = random_x(random, c.out * c.in);
          for (std::size_t i = 0; i < values.size(); ++i) {
            const std::uint16_t bits = cpu::f32_to_bf16(values[i]);
            std::memcpy(bytes.data() + 2 * i, &bits, 2);
          }
          return bytes;
        };
        c.gate = weight(c.gate_dtype);
        c.up = weight(c.up_dtype);
        c.x = random_x(random, c.tokens * c.in);
        c.x_tiles = cpu::detail::aligned_words(cpu::x_tiles_bytes(c.tokens, c.in));
        for (std::int64_t t = 0; t * 16 < c.tokens; ++t) cpu::write_x_tiles(c.x.data(), c.tokens, c.in, t, c.x_tiles.get());
        c.h_words = static_cast<std::int64_t>(cpu::x_tiles_bytes(c.tokens, c.out) / 4);
        c.h_tiles = cpu::detail::aligned_words(cpu::x_tiles_bytes(c.tokens, c.out));
        std::fill(c.h_tiles.get(), c.h_tiles.get() + c.h_words, 0xdeadbeefu);  // every word must be written
        // The same by the calls one at a time: g and u, silu(g) * u, h's tiles.
        std::vector<float> g(static_cast<std::size_t>(c.tokens * c.out)), u(g.size());
        const cpu::LinearCall gate{c.x.data(), c.tokens, c.in, c.gate.data(), c.gate_dtype, c.out, g.data()};
        const cpu::LinearCall up{c.x.data(), c.tokens, c.in, c.up.data(), c.up_dtype, c.out, u.data()};
        if (emulate) {
          sy::testing::linear_batch_emulating_amx(std::span(&gate, 1));
          sy::testing::linear_batch_emulating_amx(std::span(&up, 1));
        } else {
          cpu::linear_batch(isa, std::span(&gate, 1));
          cpu::linear_batch(isa, std::span(&up, 1));
        }
        cpu::silu_and_mul(g.data(), u.data(), c.tokens * c.out, g.data());
        c.expected = cpu::detail::aligned_words(cpu::x_tiles_bytes(c.tokens, c.out));
        for (std::int64_t t = 0; t * 16 < c.tokens; ++t) cpu::write_x_tiles(g.data(), c.tokens, c.out, t, c.expected.get());
        cases.push_back(std::move(c));
      }
      std::vector<cpu::GatedCall> calls;
      for (const Case& c : cases)
        calls.push_back({c.x_tiles.get(), c.tokens, c.in, c.gate.data(), c.gate_dtype, c.up.data(), c.up_dtype, c.out, c.h_tiles.get()});
      if (emulate) sy::testing::gated_batch_emulating_amx(calls);
      else cpu::gated_batch(isa, calls);
      for (const Case& c : cases) {
        INFO(std::string(sy::dtype_name(c.gate_dtype)) << "/" << std::string(sy::dtype_name(c.up_dtype)) << ", tokens " << c.tokens
                                                       << ", in " << c.in << ", out " << c.out);
        std::int64_t first_difference = -1;
        for (std::int64_t i = 0; i < c.h_words && first_difference < 0; ++i)
          if (c.h_tiles[static_cast<std::size_t>(i)] != c.expected[static_cast<std::size_t>(i)]) first_difference = i;
        INFO("first differing word " << first_difference);
        CHECK(first_difference == -1);
      }
    }
  if (emulated_only) MESSAGE("this CPU has neither AMX nor AVX512-BF16: the gated batch ran emulated only");
  // Calls that would not round x are refused, naming the variant and the weights.
  const std::vector<float> x = random_x(random, 4 * 256);
  const std::vector<std::uint8_t> w = sy::testing::random_blocks(sy::DType::q8_0, 32 * 256, random);
  std::uint32_t words[1024];
  const cpu::GatedCall few{words, 4, 256, w.data(), sy::DType::q8_0, w.data(), sy::DType::q8_0, 32, words};
  CHECK_THROWS_WITH_AS(cpu::gated_batch(cpu::Isa::scalar, std::span(&few, 1)),
                       doctest::Contains("does not round x for 4 tokens of q8_0/q8_0"), std::invalid_argument);
}

TEST_CASE("quant linear: every setting of the kernel options (kernel_options.h) gives the default's results bit for bit") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t in = 1024, out = 29;
  struct Setting {
    const char* name;
    cpu::KernelOptions options;
  };
  std::vector<Setting> settings;
  auto add = [&settings](const char* name, auto change) {
    cpu::KernelOptions options;
    change(options);
    settings.push_back({name, options});
  };
  add("prefetch 0", [](cpu::KernelOptions& o) { o.prefetch_bytes = 0; });
  add("prefetch 192", [](cpu::KernelOptions& o) { o.prefetch_bytes = 192; });
  add("tile block rows 0", [](cpu::KernelOptions& o) { o.tile_block_rows = 0; });
  add("tile block rows 64", [](cpu::KernelOptions& o) { o.tile_block_rows = 64; });
  add("panels by row", [](cpu::KernelOptions& o) { o.panels_by_row = true; });
  add("panels 8 chunks at a time", [](cpu::KernelOptions& o) { o.panels_by_row = false; });
  const cpu::KernelOptions kept = cpu::kernel_options();
  // 17 tokens: the tiles path, where the CPU has AMX or AVX512-BF16; 150: 10 token tiles, the last
  // of 6 tokens.
  for (sy::DType dtype : sy::testing::kBlockTypes)
    for (const std::int64_t tokens : {1, 3, 8, 9, 17, 150})
      for (cpu::Isa isa : supported_isas()) {
        INFO("weights " << std::string(sy::dtype_name(dtype)) << ", tokens " << tokens << ", isa " << std::string(cpu::isa_name(isa)));
        const std::vector<std::uint8_t> weight = sy::testing::random_blocks(dtype, out * in, random);
        const std::vector<float> x = random_x(random, tokens * in);
        std::vector<float> base(static_cast<std::size_t>(tokens * out), NAN);
        cpu::linear(isa, x.data(), tokens, in, weight.data(), dtype, out, base.data());
        for (const Setting& setting : settings) {
          INFO(setting.name);
          cpu::set_kernel_options(setting.options);
          std::vector<float> y(base.size(), NAN);
          cpu::linear(isa, x.data(), tokens, in, weight.data(), dtype, out, y.data());
          cpu::set_kernel_options(kept);
          CHECK(std::memcmp(y.data(), base.data(), y.size() * sizeof(float)) == 0);
        }
      }
}

TEST_CASE("quant linear: kernel options out of range are refused, naming the setting") {
  cpu::KernelOptions options;
  CHECK(cpu::kernel_options_problem(options).empty());
  options.prefetch_bytes = cpu::kMinPrefetchBytes - 1;
  CHECK_THROWS_WITH_AS(cpu::set_kernel_options(options), doctest::Contains("prefetch distance is 63 bytes"),
                       std::invalid_argument);
  options.prefetch_bytes = cpu::kMaxPrefetchBytes + 1;
  CHECK_FALSE(cpu::kernel_options_problem(options).empty());
  options = cpu::KernelOptions{};
  options.tile_block_rows = -1;
  CHECK_THROWS_WITH_AS(cpu::set_kernel_options(options), doctest::Contains("block rows are -1"), std::invalid_argument);
  // A refused setting leaves the options as they were; unset, panels_by_row takes this CPU's default.
  CHECK(cpu::kernel_options().prefetch_bytes == cpu::KernelOptions{}.prefetch_bytes);
  CHECK(cpu::kernel_options().panels_by_row.has_value());
}

TEST_CASE("quant linear: the tiles prefill's stages time every 32-row panel of every matrix, and refuse other dtypes") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  const std::vector<std::uint8_t> a = sy::testing::random_blocks(sy::DType::q8_0, 40 * 64, random),
                                  b = sy::testing::random_blocks(sy::DType::q4_k, 33 * 256, random);
  const cpu::PanelSource matrices[] = {{a.data(), sy::DType::q8_0, 40, 64}, {b.data(), sy::DType::q4_k, 33, 256}};
  CHECK(cpu::prefill_stages_supported() ==
        (cpu::isa_supported(cpu::Isa::amx) || cpu::isa_supported(cpu::Isa::avx512bf16)));
  if (!cpu::prefill_stages_supported()) {
    CHECK_THROWS_WITH_AS(cpu::time_prefill_stages(matrices, 3), doctest::Contains("needs AMX or AVX512-BF16"),
                         std::invalid_argument);
    MESSAGE("this CPU has no tiles prefill: its stages are not timed here");
    return;
  }
  const cpu::PrefillStageTimes times = cpu::time_prefill_stages(matrices, 3);
  CHECK(times.panels == 2 + 2);
  CHECK(times.weights == 40 * 64 + 33 * 256);
  CHECK(times.panels_seconds > 0);
  CHECK(times.tiles_seconds > 0);
  CHECK(times.both_seconds > 0);
  CHECK(std::string(times.tiles_kernel) == (cpu::isa_supported(cpu::Isa::amx) ? "amx" : "avx512bf16"));
  const std::vector<float> f32(64 * 8, 1.0f);
  const cpu::PanelSource plain[] = {{f32.data(), sy::DType::f32, 8, 64}};
  CHECK_THROWS_AS(cpu::time_prefill_stages(plain, 3), std::invalid_argument);
  const cpu::PanelSource ragged[] = {{a.data(), sy::DType::q8_0, 40, 48}};
  CHECK_THROWS_AS(cpu::time_prefill_stages(ragged, 3), std::invalid_argument);
  CHECK_THROWS_AS(cpu::time_prefill_stages(matrices, 0), std::invalid_argument);
}
