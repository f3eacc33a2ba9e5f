// CPU Linear (operators/cpu/kernels/linear.h): every instruction-set variant this machine runs, every
// weight dtype, shapes that hit every tile edge, against the double-precision reference.
//
// Tolerance, all dtypes: |y - y_ref| <= 2 * 2^-24 * sqrt(in) * sum_k |x_k * w_k|. bf16 and f16
// weights widen to f32 exactly, so only the f32 accumulation rounds; sum_k |x_k w_k| is the scale
// its errors grow with, and sqrt(in) their growth for a sum of `in` terms in any order. A wrong or
// missing term (about sum / in) exceeds the bound for every `in` up to ~10^6. Where the AMX variant
// rounds x to bf16 (cpu::linear_rounds_x), the reference is fed the same rounded x: the products
// of two bf16 values are exact in f32, so the same bound holds.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/linear.h"
#include "operators/cpu/kernels/linear_kernels.h"
#include "tests/operators/cpu/kernels/amx_emulation.h"
#include "tests/operators/cpu/kernels/reference.h"
#include "tests/test_seed.h"

using switchyard::testing::test_seed;

namespace sy = switchyard;
namespace cpu = switchyard::cpu;

namespace {

struct Weights {
  std::vector<float> f32;
  std::vector<std::uint16_t> half;  // bf16 or f16 bits
  const void* data(sy::DType dtype) const {
    return dtype == sy::DType::f32 ? static_cast<const void*>(f32.data()) : static_cast<const void*>(half.data());
  }
};

// Uniform in [-1, 1], away from zero so that no product vanishes.
float nonzero_uniform(std::mt19937& random) {
  std::uniform_real_distribution<float> magnitude(0.01f, 1.0f);
  return std::bernoulli_distribution(0.5)(random) ? magnitude(random) : -magnitude(random);
}

Weights random_weights(std::mt19937& random, std::int64_t count, sy::DType dtype) {
  Weights w;
  w.f32.resize(count);
  for (float& v : w.f32) v = nonzero_uniform(random);
  if (dtype == sy::DType::bf16)
    for (float v : w.f32) w.half.push_back(cpu::f32_to_bf16(v));
  if (dtype == sy::DType::f16)
    for (float v : w.f32) w.half.push_back(cpu::f32_to_f16(v));
  return w;
}

// y (from `isa`) against the reference of x W^T, with the bound above.
void expect_linear(cpu::Isa isa, sy::DType dtype, std::vector<float> x, std::int64_t tokens, std::int64_t in,
                   const Weights& w, std::int64_t out, const std::vector<float>& y) {
  if (cpu::linear_rounds_x(isa, dtype, tokens))
    for (float& v : x) v = cpu::bf16_to_f32(cpu::f32_to_bf16(v));
  std::vector<double> expected(tokens * out), magnitude(tokens * out);
  cpu::reference::linear(x.data(), tokens, in, w.data(dtype), dtype, out, expected.data(), magnitude.data());
  const double unit = std::ldexp(1.0, -24);
  int failures = 0;
  for (std::int64_t i = 0; i < tokens * out && failures < 5; ++i) {
    const double bound = 2 * unit * std::sqrt(static_cast<double>(in)) * magnitude[i];
    if (!(std::fabs(y[i] - expected[i]) <= bound)) {
      ++failures;
      FAIL_CHECK("y[" << i / out << ", " << i % out << "] = " << y[i] << ", reference " << expected[i] << ", bound "
                      << bound);
    }
  }
}

std::vector<float> random_x(std::mt19937& random, std::int64_t count) {
  std::vector<float> x(static_cast<std::size_t>(count));
  for (float& v : x) v = nonzero_uniform(random);
  return x;
}

void check_linear(cpu::Isa isa, sy::DType dtype, std::int64_t tokens, std::int64_t in, std::int64_t out,
                  std::mt19937& random) {
  INFO("isa " << std::string(cpu::isa_name(isa)) << ", weights " << std::string(sy::dtype_name(dtype)) << ", tokens "
              << tokens << ", in " << in << ", out " << out);
  const std::vector<float> x = random_x(random, tokens * in);
  const Weights w = random_weights(random, out * in, dtype);
  std::vector<float> y(tokens * out, NAN);
  cpu::linear(isa, x.data(), tokens, in, w.data(dtype), dtype, out, y.data());
  expect_linear(isa, dtype, x, tokens, in, w, out, y);
}

std::vector<cpu::Isa> supported_isas() {
  std::vector<cpu::Isa> isas;
  for (cpu::Isa isa : cpu::kAllIsas) {
    if (cpu::isa_supported(isa))
      isas.push_back(isa);
    else
      MESSAGE("this CPU lacks " << std::string(cpu::isa_name(isa)) << "; its linear variant is not tested here");
  }
  return isas;
}

constexpr sy::DType kWeightDtypes[] = {sy::DType::f32, sy::DType::bf16, sy::DType::f16};

}  // namespace

TEST_CASE("cpu kernels: linear matches the reference at every tile edge, for every variant and dtype") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  // Inputs around the vector widths (8, 16) and rows/tokens around the tile sizes (4 x 2, 4 x 4).
  const std::int64_t ins[] = {1, 7, 8, 15, 16, 17, 33, 100};
  const std::int64_t shapes[][2] = {{1, 1}, {1, 5}, {1, 16}, {1, 37}, {2, 3}, {3, 4}, {4, 9}, {5, 17}, {9, 6}};
  for (cpu::Isa isa : supported_isas())
    for (sy::DType dtype : kWeightDtypes)
      for (std::int64_t in : ins)
        for (const auto& shape : shapes) check_linear(isa, dtype, shape[0], in, shape[1], random);
}

TEST_CASE("cpu kernels: linear's bf16 tiles (AMX, AVX512-BF16) match the reference at every tile edge") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  for (const cpu::Isa isa : {cpu::Isa::amx, cpu::Isa::avx512bf16}) {
    INFO("isa " << cpu::isa_name(isa));
    CHECK_FALSE(cpu::linear_rounds_x(isa, sy::DType::bf16, 7));  // decode keeps f32 x
    CHECK_FALSE(cpu::linear_rounds_x(isa, sy::DType::f16, 64));
  }
  CHECK_FALSE(cpu::linear_rounds_x(cpu::Isa::avx512, sy::DType::bf16, 64));
  for (const cpu::Isa isa : {cpu::Isa::amx, cpu::Isa::avx512bf16}) {
    if (!cpu::isa_supported(isa)) {
      MESSAGE("this CPU (or its OS) offers no " << cpu::isa_name(isa) << "; its linear variant is not tested here");
      continue;
    }
    // Tokens from the first that rounds x (8) around the 16-token tile and the 2-tile step; inputs
    // around a tile row's 32 values, odd ones included; rows around the 16-row tile, AVX512-BF16's
    // 12 rows and the 2-tile step.
    const std::int64_t tokens[] = {8, 15, 16, 17, 32, 33, 70};
    const std::int64_t ins[] = {1, 2, 31, 32, 33, 100, 2048};
    const std::int64_t outs[] = {1, 11, 12, 13, 15, 16, 17, 32, 33, 50};
    for (std::int64_t t : tokens)
      for (std::int64_t in : ins)
        for (std::int64_t out : outs) {
          REQUIRE(cpu::linear_rounds_x(isa, sy::DType::bf16, t));
          check_linear(isa, sy::DType::bf16, t, in, out, random);
        }
  }
}

TEST_CASE("cpu kernels: linear matches the reference on decode and prefill sizes, across thread counts") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const int threads_before = omp_get_max_threads();
  // (tokens, in, out): decode rows split over threads; prefill with several input blocks (512)
  // and token blocks (64); few rows and many tokens, where threads split tokens instead.
  const std::int64_t sizes[][3] = {{1, 1100, 300}, {2, 2049, 70}, {3, 513, 129}, {70, 1100, 40}, {130, 700, 21}};
  for (int threads : {1, 3, 8}) {
    omp_set_num_threads(threads);
    INFO("threads " << threads);
    for (cpu::Isa isa : supported_isas())
      for (sy::DType dtype : kWeightDtypes)
        for (const auto& size : sizes) check_linear(isa, dtype, size[0], size[1], size[2], random);
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE("cpu kernels: linear with random shapes uses the best variant") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it); best variant "
               << std::string(cpu::isa_name(cpu::best_isa())));
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::int64_t> tokens(1, 12), in(1, 600), out(1, 90);
  for (int i = 0; i < 20; ++i)
    for (sy::DType dtype : kWeightDtypes)
      check_linear(cpu::best_isa(), dtype, tokens(random), in(random), out(random), random);
  CHECK(cpu::isa_supported(cpu::best_isa()));
}

TEST_CASE("cpu kernels: a chosen variant is what linear runs, and one this CPU lacks is refused") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  for (cpu::Isa isa : cpu::kAllIsas) {
    REQUIRE(cpu::isa_named(cpu::isa_name(isa)) == isa);
    if (!cpu::isa_supported(isa)) CHECK_THROWS_AS(cpu::choose_isa(isa), std::invalid_argument);
  }
  CHECK_FALSE(cpu::isa_named("sse").has_value());
  const std::int64_t tokens = 20, in = 300, out = 40;
  std::vector<float> x(tokens * in);
  for (float& v : x) v = nonzero_uniform(random);
  const Weights w = random_weights(random, out * in, sy::DType::bf16);
  std::vector<float> chosen(tokens * out), forced(tokens * out);
  cpu::linear(cpu::Isa::scalar, x.data(), tokens, in, w.data(sy::DType::bf16), sy::DType::bf16, out, forced.data());
  cpu::choose_isa(cpu::Isa::scalar);
  CHECK(cpu::chosen_isa() == cpu::Isa::scalar);
  cpu::linear(x.data(), tokens, in, w.data(sy::DType::bf16), sy::DType::bf16, out, chosen.data());
  cpu::choose_isa(cpu::best_isa());  // as the other tests expect
  CHECK(chosen == forced);  // the same code on the same inputs: bit for bit
}

TEST_CASE("cpu kernels: a batch of linear calls gives each call's product, calls on one x included") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::int64_t> tokens_of(1, 70), in_of(1, 600), out_of(1, 90), dtype_of(0, 2);
  for (cpu::Isa isa : supported_isas()) {
    INFO("isa " << std::string(cpu::isa_name(isa)));
    // Pairs of calls on one x (an MLP's gate and up projections), singles, an empty call.
    struct Case {
      std::int64_t tokens, in, out;
      sy::DType dtype;
      std::size_t x;  // index into xs
      Weights w;
      std::vector<float> y;
    };
    std::vector<std::vector<float>> xs;
    std::vector<Case> cases;
    for (int group = 0; group < 6; ++group) {
      const std::int64_t tokens = tokens_of(random), in = in_of(random);
      xs.push_back(random_x(random, tokens * in));
      for (int pair = 0; pair < 1 + group % 2; ++pair) {
        const std::int64_t out = out_of(random);
        const sy::DType dtype = kWeightDtypes[dtype_of(random)];
        cases.push_back({tokens, in, out, dtype, xs.size() - 1, random_weights(random, out * in, dtype),
                         std::vector<float>(static_cast<std::size_t>(tokens * out), NAN)});
      }
    }
    std::vector<cpu::LinearCall> calls;
    for (Case& c : cases)
      calls.push_back({xs[c.x].data(), c.tokens, c.in, c.w.data(c.dtype), c.dtype, c.out, c.y.data()});
    calls.push_back({xs[0].data(), 0, 5, cases[0].w.data(cases[0].dtype), cases[0].dtype, 7, nullptr});  // no tokens
    cpu::linear_batch(isa, calls);
    for (const Case& c : cases) {
      INFO("weights " << std::string(sy::dtype_name(c.dtype)) << ", tokens " << c.tokens << ", in " << c.in
                      << ", out " << c.out);
      expect_linear(isa, c.dtype, xs[c.x], c.tokens, c.in, c.w, c.out, c.y);
    }
  }
}

TEST_CASE("cpu kernels: the AMX variant's tiles of x, shared by calls on one x, hold x (emulated on any CPU)") {
  // The batch as the AMX variant runs it (x rounded into tiles once per distinct x, calls split by
  // rows only), with the tile product in plain C++: the layout and the batch's bookkeeping are
  // tested here; the tile instructions where the CPU has AMX (the tests above).
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::int64_t> tokens_of(1, 70), in_of(1, 300), out_of(1, 60);
  std::vector<std::vector<float>> xs;
  struct Case {
    std::int64_t tokens, in, out;
    std::size_t x;
    Weights w;
    std::vector<float> y;
  };
  std::vector<Case> cases;
  std::int64_t tokens = 0, in = 0;
  for (int group = 0; group < 8; ++group) {
    // Group 0 below the tiles' tokens, 1 at the first, 3 the shape of 2 on another x (no sharing).
    if (group != 3) tokens = group == 0 ? 7 : group == 1 ? 8 : tokens_of(random), in = in_of(random);
    xs.push_back(random_x(random, tokens * in));
    for (int pair = 0; pair < 1 + group % 2; ++pair) {
      const std::int64_t out = out_of(random);
      cases.push_back({tokens, in, out, xs.size() - 1, random_weights(random, out * in, sy::DType::bf16),
                       std::vector<float>(static_cast<std::size_t>(tokens * out), NAN)});
    }
  }
  std::vector<cpu::LinearCall> calls;
  for (Case& c : cases)
    calls.push_back({xs[c.x].data(), c.tokens, c.in, c.w.data(sy::DType::bf16), sy::DType::bf16, c.out, c.y.data()});
  sy::testing::linear_batch_emulating_amx(calls);
  for (const Case& c : cases) {
    INFO("tokens " << c.tokens << ", in " << c.in << ", out " << c.out);
    // Below the AMX variant's tokens: f32 x on its fallback (expect_linear knows which).
    expect_linear(cpu::Isa::amx, sy::DType::bf16, xs[c.x], c.tokens, c.in, c.w, c.out, c.y);
  }
  // The same calls with x's tiles written by the caller (LinearCall::x_tiles, cpu::write_x_tiles)
  // where a call rounds x: the same bits, with x itself out of reach (null).
  std::vector<cpu::detail::AlignedWords> own;
  std::vector<std::vector<float>> again;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    again.emplace_back(c.y.size(), NAN);
    calls[i].y = again.back().data();
    if (!cpu::linear_rounds_x(cpu::Isa::amx, sy::DType::bf16, c.tokens)) continue;
    own.push_back(cpu::detail::aligned_words(cpu::x_tiles_bytes(c.tokens, c.in)));
    for (std::int64_t tile = 0; tile * 16 < c.tokens; ++tile)
      cpu::write_x_tiles(xs[c.x].data(), c.tokens, c.in, tile, own.back().get());
    calls[i].x_tiles = own.back().get();
    calls[i].x = nullptr;
  }
  sy::testing::linear_batch_emulating_amx(calls);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("call " << i << ", tokens " << cases[i].tokens << (calls[i].x_tiles ? ", the caller's tiles" : ""));
    CHECK(std::memcmp(again[i].data(), cases[i].y.data(), cases[i].y.size() * sizeof(float)) == 0);
  }
  // Tiles for a call that reads f32 x (group 0's 7 tokens) are refused, before any work.
  REQUIRE(calls[0].x_tiles == nullptr);
  calls[0].x_tiles = own.front().get();
  CHECK_THROWS_WITH_AS(sy::testing::linear_batch_emulating_amx(calls), doctest::Contains("does not round x"),
                       std::invalid_argument);
}

TEST_CASE("cpu kernels: the AVX-512 writer of x's AMX tiles writes the scalar writer's words, whole tiles or chunks of them") {
#if defined(__x86_64__)
  if (!cpu::isa_supported(cpu::Isa::avx512)) {
    MESSAGE("skipped: this CPU has no AVX-512");
    return;
  }
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  // Values that rounding can get wrong: NaNs (signed, with payloads), infinities, zeros, denormals,
  // ties (a low half of exactly 0x8000, odd and even), the largest finite floats (they round to
  // infinity), and plain normals.
  const std::uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu, 0x7f800000u, 0xff800000u,
                                   0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u,
                                   0xbf808000u, 0x7f7fffffu, 0xff7fffffu, 0x3f80ffffu};
  std::uniform_int_distribution<std::int64_t> tokens_of(1, 40), in_of(1, 130);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(special) - 1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int round = 0; round < 60; ++round) {
    const std::int64_t tokens = round < 4 ? 16 * (round + 1) : tokens_of(random);
    const std::int64_t in = round < 4 ? 32 * (round + 1) : in_of(random);
    INFO("tokens " << tokens << ", in " << in);
    std::vector<float> x(static_cast<std::size_t>(tokens * in));
    for (float& v : x) v = random() % 4 == 0 ? std::bit_cast<float>(special[pick(random)]) : normal(random);
    const std::int64_t tiles = (tokens + 15) / 16, words = tiles * ((in + 31) / 32) * 256;
    const std::size_t bytes = cpu::detail::x_tiles_bytes(tokens, in);
    REQUIRE(bytes == static_cast<std::size_t>(words) * 4);
    const cpu::detail::AlignedWords scalar = cpu::detail::aligned_words(bytes), vector = cpu::detail::aligned_words(bytes);
    std::fill(scalar.get(), scalar.get() + words, 0xdeadbeefu);  // every word must be written
    std::fill(vector.get(), vector.get() + words, 0x12345678u);
    for (std::int64_t tile = 0; tile < tiles; ++tile) {
      cpu::detail::write_x_tile_scalar(x.data(), tokens, in, tile, scalar.get());
      cpu::detail::write_x_tile_avx512(x.data(), tokens, in, tile, vector.get());
    }
    std::int64_t first_difference = -1;
    for (std::int64_t i = 0; i < words && first_difference < 0; ++i)
      if (scalar[static_cast<std::size_t>(i)] != vector[static_cast<std::size_t>(i)]) first_difference = i;
    INFO("first differing word " << first_difference);
    CHECK(first_difference == -1);
    // A range of chunks from a slice of x's columns (its own row stride, a gated block's h): those
    // chunks' words as the whole tile's, every other word untouched, by both writers.
    const std::int64_t chunks = (in + 31) / 32;
    const std::int64_t chunk_begin = static_cast<std::int64_t>(random() % chunks);
    const std::int64_t chunk_end = chunk_begin + 1 + static_cast<std::int64_t>(random() % (chunks - chunk_begin));
    const std::int64_t width = std::min(in, 32 * chunk_end) - 32 * chunk_begin, stride = width + static_cast<std::int64_t>(random() % 3);
    std::vector<float> slice(static_cast<std::size_t>(tokens * stride), NAN);
    for (std::int64_t t = 0; t < tokens; ++t)
      std::copy_n(x.data() + t * in + 32 * chunk_begin, width, slice.data() + t * stride);
    INFO("chunks [" << chunk_begin << ", " << chunk_end << "), stride " << stride);
    for (const bool avx512 : {false, true}) {
      const char* const writer = avx512 ? "AVX-512 writer" : "scalar writer";
      INFO(writer);
      const cpu::detail::AlignedWords part = cpu::detail::aligned_words(bytes);
      std::fill(part.get(), part.get() + words, 0x5a5a5a5au);
      for (std::int64_t tile = 0; tile < tiles; ++tile)
        (avx512 ? cpu::detail::write_x_tile_chunks_avx512 : cpu::detail::write_x_tile_chunks_scalar)(
            slice.data(), stride, tokens, in, tile, chunk_begin, chunk_end, part.get());
      std::int64_t wrong = -1;
      for (std::int64_t i = 0; i < words && wrong < 0; ++i) {
        const std::int64_t chunk = i / 256 % chunks;
        const std::uint32_t want = chunk >= chunk_begin && chunk < chunk_end ? scalar[static_cast<std::size_t>(i)] : 0x5a5a5a5au;
        if (part[static_cast<std::size_t>(i)] != want) wrong = i;
      }
      INFO("first wrong word " << wrong);
      CHECK(wrong == -1);
    }
  }
#else
  MESSAGE("skipped: the AVX-512 writer is built for x86-64 only");
#endif
}

TEST_CASE("cpu kernels: the AVX-512 store puts a C tile into y transposed, nothing past it") {
#if defined(__x86_64__)
  if (!cpu::isa_supported(cpu::Isa::avx512)) {
    MESSAGE("skipped: this CPU has no AVX-512");
    return;
  }
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<std::int64_t> count_of(1, 16), extra_of(0, 9);
  alignas(64) float c[256];
  for (int round = 0; round < 200; ++round) {
    // Whole tiles first, then ragged edges (a call's last rows and tokens), in a y wider than the tile.
    const std::int64_t rows = round == 0 ? 16 : count_of(random), tokens = round == 0 ? 16 : count_of(random);
    const std::int64_t stride = 16 + extra_of(random);
    INFO("rows " << rows << ", tokens " << tokens << ", stride " << stride);
    for (float& v : c) v = normal(random);
    const float untouched = -1234.5f;
    std::vector<float> expected(static_cast<std::size_t>(17 * stride), untouched);
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t r = 0; r < rows; ++r) expected[static_cast<std::size_t>(t * stride + r)] = c[16 * r + t];
    std::vector<float> y(expected.size(), untouched);
    cpu::detail::store_c_tile_avx512(c, rows, tokens, y.data(), stride);
    CHECK(y == expected);
  }
#else
  MESSAGE("skipped: not an x86-64 build");
#endif
}

TEST_CASE("cpu kernels: linear refuses weight dtypes it cannot read") {
  std::vector<float> x(4, 1.0f), y(2);
  std::vector<std::uint8_t> weight(8, 1);
  CHECK_FALSE(cpu::linear_supports(sy::DType::i8));
  CHECK_THROWS_AS(cpu::linear(x.data(), 1, 4, weight.data(), sy::DType::i8, 2, y.data()), std::invalid_argument);
}
