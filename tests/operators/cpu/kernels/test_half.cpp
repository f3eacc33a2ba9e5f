// bf16 / f16 conversions (operators/cpu/kernels/half.h): widening checked exhaustively against the formats'
// definitions, narrowing against the nearest representable value (ties to even) found in double,
// and f16 narrowing against the F16C instruction where the CPU has it. Exact: no tolerance.
#include <doctest/doctest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>

#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/isa.h"
#include "tests/test_seed.h"

using switchyard::testing::test_seed;

namespace cpu = switchyard::cpu;

namespace {

// The value of f16 bits from the definition: (-1)^s * 2^(e-15) * 1.m, 2^-14 * 0.m when e = 0, and
// infinity (m = 0) when e = 31.
double f16_value(std::uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  const double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                           : exponent == 31 ? (mantissa == 0 ? INFINITY : NAN)
                                            : std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

// Nearest of two neighbouring encodings to `value`, ties to the even one.
template <class Decode>
std::uint16_t nearest(double value, std::uint16_t below, std::uint16_t above, Decode decode) {
  const double low = std::fabs(value - decode(below)), high = std::fabs(decode(above) - value);
  if (low != high) return low < high ? below : above;
  return (below & 1) == 0 ? below : above;
}

// Random f32 bit patterns of finite numbers, every exponent equally likely.
float random_finite(std::mt19937& random) {
  for (;;) {
    const float v = std::bit_cast<float>(static_cast<std::uint32_t>(random()));
    if (std::isfinite(v)) return v;
  }
}

__attribute__((target("f16c"))) std::uint16_t f16_by_f16c(float v) {
  return static_cast<std::uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT), 0));
}

}  // namespace

TEST_CASE("cpu kernels: bf16 and f16 widen exactly and narrow back to the same bits") {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float from_f16 = cpu::f16_to_f32(h), from_bf16 = cpu::bf16_to_f32(h);
    if (!std::isnan(from_f16)) {
      REQUIRE_MESSAGE(static_cast<double>(from_f16) == f16_value(h), "f16 bits " << bits);
      REQUIRE_MESSAGE(cpu::f32_to_f16(from_f16) == h, "f16 bits " << bits);
    } else {
      REQUIRE(std::isnan(cpu::f16_to_f32(cpu::f32_to_f16(from_f16))));
    }
    if (!std::isnan(from_bf16))
      REQUIRE_MESSAGE(cpu::f32_to_bf16(from_bf16) == h, "bf16 bits " << bits);
    else
      REQUIRE(std::isnan(cpu::bf16_to_f32(cpu::f32_to_bf16(from_bf16))));
  }
}

TEST_CASE("cpu kernels: f32 narrows to the nearest bf16 and f16, ties to even") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const bool have_f16c = cpu::isa_supported(cpu::Isa::avx2);  // AVX2 needs F16C (operators/cpu/kernels/isa.h)
  if (!have_f16c) MESSAGE("this CPU lacks AVX2 or F16C; f16 narrowing is checked against double only");
  auto bf16_decode = [](std::uint16_t b) { return static_cast<double>(cpu::bf16_to_f32(b)); };
  for (int i = 0; i < 200000; ++i) {
    // Half the samples in f16's range (down to its subnormals), half anywhere in f32's.
    const float v = i % 2 ? random_finite(random)
                          : std::ldexp(std::uniform_real_distribution<float>(-1, 1)(random),
                                       std::uniform_int_distribution<int>(-26, 16)(random));
    INFO("value " << v << " (bits " << std::bit_cast<std::uint32_t>(v) << ")");

    const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
    const auto truncated = static_cast<std::uint16_t>(bits >> 16);
    const std::uint16_t bf16 = cpu::f32_to_bf16(v);
    if ((bits & 0xffff) == 0)
      REQUIRE(bf16 == truncated);
    else if ((truncated & 0x7fff) == 0x7f7f)  // rounding up from the largest finite bf16 reaches inf
      REQUIRE((bf16 == truncated || (bf16 & 0x7fff) == 0x7f80));
    else
      REQUIRE(bf16 == nearest(v, truncated, truncated + 1, bf16_decode));

    const std::uint16_t f16 = cpu::f32_to_f16(v);
    if (have_f16c) REQUIRE(f16 == f16_by_f16c(v));
    if (std::fabs(v) < 65504.0f) {
      // Neighbours of the truncated magnitude (a search over the 31744 finite magnitudes).
      std::uint16_t low = 0;
      for (std::uint16_t step = 0x4000; step; step >>= 1)
        if (low + step < 0x7c00 && f16_value(low + step) <= std::fabs(v)) low += step;
      const std::uint16_t sign = v < 0 ? 0x8000 : 0;
      const std::uint16_t expected = f16_value(low) == std::fabs(v) ? low
                                     : low + 1 == 0x7c00            ? low
                                                                    : nearest(std::fabs(v), low, low + 1, f16_value);
      REQUIRE((f16 & 0x7fff) == expected);
      if (expected != 0) REQUIRE((f16 & 0x8000) == sign);
    }
  }
  CHECK(cpu::f32_to_f16(65520.0f) == 0x7c00);  // halfway past the largest f16 rounds to inf
  CHECK(cpu::f32_to_f16(65519.0f) == 0x7bff);
  CHECK(cpu::f32_to_bf16(INFINITY) == 0x7f80);
  CHECK(std::isnan(cpu::bf16_to_f32(cpu::f32_to_bf16(NAN))));
}
