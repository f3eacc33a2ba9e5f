// The quantised kernels' pieces (operators/cpu/kernels/quant_dot.h): activation quantisation and
// the decoders of every block type, against the tests' own element-by-element decoder
// (quant_test_blocks.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/quant_blocks.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/isa.h"
#include "operators/cpu/kernels/kernel_options.h"
#include "operators/cpu/kernels/quant_dot.h"
#include "tests/operators/cpu/kernels/quant_test_blocks.h"
#include "tests/test_seed.h"

namespace sy = switchyard;
namespace cpu = switchyard::cpu;
namespace detail = switchyard::cpu::detail;
using switchyard::testing::test_seed;

namespace {

struct AlignedBytes {
  explicit AlignedBytes(std::size_t bytes) : data(static_cast<std::uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {}
  ~AlignedBytes() { std::free(data); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  std::uint8_t* data;
};

// Each block of `n` inputs: d = max |x| / 127, |d q - x| <= d / 2 (round to nearest, up to the
// rounding of x / d), |q| <= 127, and the sums the kernels use are the bytes' sums.
void check_block(const float* x, int n, float d, const std::int8_t* qs) {
  float max_abs = 0.0f;
  for (int i = 0; i < n; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
  CHECK(d == doctest::Approx(max_abs / 127.0f).epsilon(1e-6));
  for (int i = 0; i < n; ++i) {
    CHECK(std::abs(int{qs[i]}) <= 127);
    if (!(std::fabs(d * qs[i] - x[i]) <= 0.5f * d * (1.0f + 1e-5f) + 1e-30f))
      FAIL_CHECK("input " << i << ": " << x[i] << " quantised to " << int{qs[i]} << " * " << d);
  }
}

}  // namespace

TEST_CASE("quant dot: activations round each block to bytes with its own scale") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  constexpr std::int64_t tokens = 3, in = 512;
  std::vector<float> x(tokens * in);
  for (float& v : x) v = normal(random);
  std::fill(x.begin() + in, x.begin() + in + 32, 0.0f);  // an all-zero block: d = 0, q = 0

  SUBCASE("32-input blocks") {
    AlignedBytes out(static_cast<std::size_t>(tokens * detail::activation_bytes(sy::DType::q4_0, in)));
    detail::quantize_activations(sy::DType::q4_0, x.data(), 0, tokens, in, out.data);
    const auto* blocks = reinterpret_cast<const detail::ActivationBlock32*>(out.data);
    for (std::int64_t b = 0; b < tokens * in / 32; ++b) {
      const detail::ActivationBlock32& block = blocks[b];
      check_block(x.data() + b * 32, 32, block.d, block.qs);
      int sum = 0;
      for (std::int8_t q : block.qs) sum += q;
      CHECK(block.sum == sum);
      CHECK(block.d_sum == doctest::Approx(block.d * static_cast<float>(sum)));
    }
    CHECK(blocks[in / 32].d == 0.0f);
  }
  SUBCASE("256-input blocks with the sums of each 16") {
    AlignedBytes out(static_cast<std::size_t>(tokens * detail::activation_bytes(sy::DType::q4_k, in)));
    detail::quantize_activations(sy::DType::q4_k, x.data(), 0, tokens, in, out.data);
    const auto* blocks = reinterpret_cast<const sy::quant::BlockQ8_K*>(out.data);
    for (std::int64_t b = 0; b < tokens * in / 256; ++b) {
      check_block(x.data() + b * 256, 256, blocks[b].d, blocks[b].qs);
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += blocks[b].qs[16 * g + i];
        CHECK(blocks[b].bsums[g] == sum);
      }
    }
  }
}

TEST_CASE("quant dot: every block type decodes as the element-by-element reference") {
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t rows = 3, in = 512;
  for (sy::DType dtype : sy::testing::kBlockTypes) {
    INFO("dtype " << std::string(sy::dtype_name(dtype)));
    const std::vector<std::uint8_t> blocks = sy::testing::random_blocks(dtype, rows * in, random);
    const auto expected = sy::testing::decode_rows(dtype, blocks.data(), rows, in);
    std::vector<void (*)(sy::DType, const void*, std::int64_t, std::int64_t, float*)> decoders{detail::dequantize_rows_scalar};
#if defined(__x86_64__)
    if (cpu::isa_supported(cpu::Isa::avx2)) decoders.push_back(detail::dequantize_rows_avx2);
#endif
    for (std::size_t which = 0; which < decoders.size(); ++which) {
      INFO("decoder " << (which == 0 ? "scalar" : "avx2"));
      std::vector<float> out(rows * in, NAN);
      decoders[which](dtype, blocks.data(), in, rows, out.data());
      int failures = 0;
      for (std::int64_t i = 0; i < rows * in && failures < 5; ++i) {
        // Up to three float roundings of terms of `magnitude`.
        const double bound = 3 * std::ldexp(1.0, -24) * expected[i].magnitude;
        if (!(std::fabs(out[i] - expected[i].value) <= bound)) {
          ++failures;
          FAIL_CHECK("weight " << i << " = " << out[i] << ", reference " << expected[i].value);
        }
      }
    }
  }
}

// bf16 bits equal, or both NaN: a NaN that a scale's infinity or NaN makes takes its sign and
// payload from the instructions' order (x86 makes a negative one, 0 * inf, or passes on an input
// NaN), which differs between compilers and flags (clang's sanitizer build), so NaN matches NaN.
namespace {
bool same_bf16(std::uint16_t a, std::uint16_t b) {
  const auto nan = [](std::uint16_t v) { return (v & 0x7f80u) == 0x7f80u && (v & 0x007fu) != 0; };
  return a == b || (nan(a) && nan(b));
}
}  // namespace

TEST_CASE("quant dot: the bf16 panel decoder writes the AVX2 decoder's values rounded to bf16, bit for bit") {
#if defined(__x86_64__)
  if (!detail::has_avx512_bf16() || !cpu::isa_supported(cpu::Isa::avx512)) {
    MESSAGE("skipped: this CPU has no AVX512-BF16");
    return;
  }
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  constexpr std::int64_t rows = 5;
  for (sy::DType dtype : sy::testing::kBlockTypes) {
    // The chunk-major writer goes 8 chunks at a time: 27 32-weight blocks end on a part of 8.
    const std::int64_t in = sy::dtype_info(dtype).block_elements == 32 ? 32 * 27 : 768;
    INFO("dtype " << std::string(sy::dtype_name(dtype)) << ", in " << in);
    std::vector<std::uint8_t> blocks = sy::testing::random_blocks(dtype, rows * in, random);
    // Blocks of the last row with every byte random, scales included: subnormal, infinite and NaN
    // half-floats among them, which the two roundings must treat alike too.
    const std::size_t row_bytes = blocks.size() / rows;
    for (std::size_t i = (rows - 1) * row_bytes; i < blocks.size(); ++i) blocks[i] = static_cast<std::uint8_t>(random());
    std::vector<float> f32(rows * in, NAN);
    detail::dequantize_rows_avx2(dtype, blocks.data(), in, rows, f32.data());
    std::vector<std::uint16_t> expected(rows * in);
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = cpu::f32_to_bf16(f32[i]);
    // Chunk-major (AMX's tiles read 16 rows of a chunk in a row): each 32 of a row at chunk c, row r
    // of a panel of `chunk_rows` rows; the rows past `rows` left as they were. Both store orders
    // (KernelOptions::panels_by_row).
    constexpr std::int64_t chunk_rows = 8;
    const cpu::KernelOptions kept = cpu::kernel_options();
    for (const bool by_row : {false, true}) {
      INFO("panel written " << (by_row ? "row by row" : "8 chunks at a time"));
      cpu::KernelOptions options;
      options.panels_by_row = by_row;
      cpu::set_kernel_options(options);
      std::vector<std::uint16_t> chunked(chunk_rows * in, 0xABCD);
      detail::dequantize_rows_bf16_avx512(dtype, blocks.data(), in, rows, chunked.data(), chunk_rows);
      cpu::set_kernel_options(kept);
      int failures = 0;
      for (std::int64_t r = 0; r < chunk_rows; ++r)
        for (std::int64_t k = 0; k < in && failures < 5; ++k) {
          const std::uint16_t value = chunked[static_cast<std::size_t>(((k / 32) * chunk_rows + r) * 32 + k % 32)];
          const std::uint16_t want = r < rows ? expected[static_cast<std::size_t>(r * in + k)] : 0xABCD;
          if (!same_bf16(value, want)) {
            ++failures;
            FAIL_CHECK("row " << r << ", input " << k << ": bf16 bits " << value << ", expected " << want << " (f32 "
                              << (r < rows ? f32[static_cast<std::size_t>(r * in + k)] : 0.0f) << ")");
          }
        }
      CHECK(failures == 0);
    }
  }
#else
  MESSAGE("skipped: not an x86-64 build");
#endif
}

TEST_CASE("quant dot: the AVX2 activation quantiser writes the scalar one's bytes") {
#if defined(__x86_64__)
  if (!cpu::isa_supported(cpu::Isa::avx2)) {
    MESSAGE("skipped: this CPU has no AVX2");
    return;
  }
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr std::int64_t in = 1024;
  std::vector<float> x(in);
  for (float& v : x) v = normal(random);
  // Ties of the rounding (x / d exactly half-way), a NaN, an infinity and an all-zero block.
  x[0] = 127.0f;  // d = 1 in the first block (the normals stay far below 127)
  x[5] = 2.5f;
  x[40] = NAN;
  x[300] = INFINITY;
  std::fill(x.begin() + 512, x.begin() + 768, 0.0f);
  for (const int block : {32, 256}) {
    INFO("block " << block);
    const auto blocks = static_cast<std::size_t>(in / block);
    std::vector<float> d_scalar(blocks), d_avx2(blocks);
    std::vector<std::int8_t> q_scalar(in), q_avx2(in);
    std::vector<std::int32_t> sums_scalar(in / 16), sums_avx2(in / 16, -1);
    // One block a call (stride unused), into separate d, qs and sums arrays.
    for (std::size_t b = 0; b < blocks; ++b) {
      detail::quantize_blocks_scalar(x.data() + b * block, block, block, 0, &d_scalar[b], q_scalar.data() + b * block,
                                     sums_scalar.data() + b * block / 16);
      detail::quantize_blocks_avx2(x.data() + b * block, block, block, 0, &d_avx2[b], q_avx2.data() + b * block,
                                   sums_avx2.data() + b * block / 16);
    }
    for (std::size_t b = 0; b < blocks; ++b) CHECK(std::memcmp(&d_scalar[b], &d_avx2[b], 4) == 0);
    CHECK(std::isnan(d_scalar[40 / block]));
    CHECK(q_scalar == q_avx2);
    CHECK(sums_scalar == sums_avx2);
    for (std::size_t g = 0; g < sums_scalar.size(); ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q_scalar[16 * g + i];
      CHECK(sums_scalar[g] == sum);
    }
  }
#else
  MESSAGE("skipped: the AVX2 quantiser is built for x86-64 only");
#endif
}
