// CUDA kernels (operators/cuda/kernels/) against the CPU references on fresh random inputs, and the device
// memory pool's promises. Without a GPU (CI) every GPU test says "skipped: no CUDA device" and
// returns; the tests that need no GPU (device_count, config checks) run everywhere.
//
// Tolerances (u = 2^-24, the f32 unit roundoff):
//   rms_norm      |out - ref| <= 1e-5 |ref|: an f32 tree sum of squares (<= 40 terms per thread,
//                 then 10 levels: ~50u), the inverse root rounded once, two products (2u).
//   silu_and_mul  |out - ref| <= 1e-5 |ref|: expf (2 ulps), one sum, one quotient, one product.
//   embedding     exact: widening bf16/f16/f32 to f32 is exact; rows of blocks equal the CPU's
//                 quant::dequantize_row bit for bit.
//   rope          bit-identical to the CPU kernel for the same cos/sin tables (both round each
//                 product, no fused multiply-add); the CPU tests bound the CPU against the formulas.
//   moe_gate      ids identical to the reference and the CPU kernel, in order, on inputs drawn so
//                 that rounding cannot reorder choices (as tests/operators/cpu/kernels/test_moe_gate.cpp);
//                 |w - ref| <= 2e-6 |ref| + 1e-7 (expf and f32 sums). With exact ties (integer
//                 logits) ids are identical to the CPU kernel's: the lower index wins on both.
//   linear f32    |y - ref| <= 1e-5 * sum_k |x W| (f32 accumulation over <= 1100 terms: ~sqrt(k) u
//                 expected, far below; not a worst-case bound).
//   linear bf16   cuBLAS path: x is rounded to bf16 (relative 2^-9 each), so |y - ref| <= 2^-8 *
//                 sum_k |x W| (a worst-case bound: 2^-9 from x, the rest f32 accumulation); against
//                 the reference fed the bf16-rounded x, the f32 bound above applies. Decode path
//                 (gemv.h: <= 8 tokens, in % 8 == 0): x stays f32, so the f32 bound applies.
#include <doctest/doctest.h>

#include <sys/mman.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant_formats.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/moe_gate.h"
#include "tests/operators/cpu/kernels/reference.h"
#include "tests/gate_presets.h"
#include "tests/gate_test_support.h"
#include "tests/operators/cpu/kernels/quant_test_blocks.h"
#include "operators/cpu/kernels/rope.h"
#include "operators/cpu/kernels/sampling.h"
#include "operators/cuda/kernels/argmax.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/kernels/embedding.h"
#include "operators/cuda/kernels/host_table.h"
#include "operators/cuda/kernels/gemv.h"
#include "operators/cuda/kernels/host_flag.h"
#include "operators/cuda/kernels/linear.h"
#include "operators/cuda/kernels/moe_gate.h"
#include "operators/cuda/kernels/rms_norm.h"
#include "operators/cuda/kernels/rope.h"
#include "operators/cuda/kernels/silu_and_mul.h"
#include "tests/cuda_test_support.h"

namespace sy = switchyard;
namespace cpu = switchyard::cpu;
namespace cuda = switchyard::cuda;
namespace presets = switchyard::gate_presets;
using namespace switchyard::testing;

namespace {

std::vector<std::uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = cpu::f32_to_bf16(values[i]);
  return out;
}

// A float's bits: equal bits where == would let -0 pass for +0.
std::uint32_t bits_of(float value) { return std::bit_cast<std::uint32_t>(value); }

// Largest |got - expected| / |expected|, for the report.
double max_relative_error(const std::vector<float>& got, const std::vector<double>& expected) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (expected[i] != 0) worst = std::max(worst, std::fabs(got[i] - expected[i]) / std::fabs(expected[i]));
  return worst;
}

}  // namespace

TEST_CASE("cuda: device_count is 0 without a GPU, and a missing device is a clear error") {
  const int count = cuda::device_count();
  CHECK(count >= 0);
  MESSAGE("CUDA devices: " << count);
  try {
    cuda::DeviceContext context(count);  // one past the last
    FAIL("no error for cuda:" << count);
  } catch (const sy::InputError& error) {
    const std::string message = error.what();
    INFO(message);
    CHECK(message.find("cuda:" + std::to_string(count)) != std::string::npos);
    CHECK(message.find("not present") != std::string::npos);
  }
}

TEST_CASE("cuda: moe_gate refuses bad configs before touching the GPU") {
  CHECK_THROWS_AS(cuda::moe_gate(presets::qwen3_moe_gate(8, 9, true), nullptr, 1, nullptr, nullptr, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::moe_gate(presets::qwen3_moe_gate(1024, 8, true), nullptr, 1, nullptr, nullptr, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::rms_norm(nullptr, 1, 1, nullptr, sy::DType::f16, 1e-6f, nullptr, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::apply_rope(nullptr, 1, 1, 8, 8, 7, nullptr, nullptr, switchyard::RopeLayout::half_split, nullptr),
                  std::invalid_argument);
}

TEST_CASE("cuda: the pool reuses blocks, copies round-trip, and 1 PiB is an InputError naming the device") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);

  void* first = nullptr;
  {
    cuda::DeviceBuffer buffer = context.allocate(1000, "a test buffer");
    first = buffer.data();
    CHECK(buffer.bytes() == 1000);
  }
  CHECK(context.pool().bytes_cached() >= 1024);
  cuda::DeviceBuffer again = context.allocate(900, "a test buffer");
  CHECK(again.data() == first);  // same size class: the cached block

  // host -> pinned -> device -> device -> host
  const std::vector<float> values = uniform(4096, -5, 5, random);
  cuda::PinnedBuffer pinned(values.size() * sizeof(float), "a test staging buffer");
  std::copy(values.begin(), values.end(), pinned.as<float>());
  cuda::DeviceBuffer a = context.allocate(pinned.bytes(), "a"), b = context.allocate(pinned.bytes(), "b");
  context.copy_to_device(a.data(), pinned.data(), pinned.bytes());
  context.copy_on_device(b.data(), a.data(), pinned.bytes());
  CHECK(to_host<float>(context, b, values.size()) == values);

  const std::size_t pebibyte = std::size_t{1} << 50;
  try {
    cuda::DeviceBuffer absurd = context.allocate(pebibyte, "the experts of layer 3 (a test)");
    FAIL("1 PiB was allocated");
  } catch (const sy::InputError& error) {
    const std::string message = error.what();
    MESSAGE(message);
    CHECK(error.exit_code() == 1);
    CHECK(message.find("cuda:0") != std::string::npos);
    CHECK(message.find("1.00 PiB") != std::string::npos);
    CHECK(message.find("the experts of layer 3") != std::string::npos);
  }
  // The failure left no error behind: the device still works.
  cuda::DeviceBuffer after = context.upload(values.data(), values.size() * sizeof(float), "after");
  CHECK(to_host<float>(context, after, values.size()) == values);
}

TEST_CASE("cuda kernels: rms_norm matches the reference with f32 and bf16 weights, in place too") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_int_distribution<std::int64_t> rows_of(1, 9), dim_of(1, 9000);
  std::uniform_real_distribution<float> log_scale(-6, 6);
  double worst = 0;
  for (int round = 0; round < 40; ++round) {
    const std::int64_t rows = rows_of(random), dim = round < 4 ? std::int64_t{7168} >> round : dim_of(random);
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    const float eps = round % 3 ? 1e-6f : 1e-5f;
    std::vector<float> x = uniform(rows * dim, -3, 3, random);
    for (std::int64_t r = 0; r < rows; ++r) {  // rows of very different scales, so eps matters for some
      const float scale = std::exp2(log_scale(random));
      for (std::int64_t i = 0; i < dim; ++i) x[r * dim + i] *= scale;
    }
    const std::vector<float> weight_f32 = uniform(dim, 0.05f, 2.0f, random);
    const std::vector<std::uint16_t> weight_bf16 = to_bf16(weight_f32);
    const void* weight = dtype == sy::DType::bf16 ? static_cast<const void*>(weight_bf16.data()) : weight_f32.data();
    INFO("rows " << rows << ", dim " << dim << ", weights " << sy::dtype_name(dtype) << ", eps " << eps);

    std::vector<double> expected(rows * dim);
    cpu::reference::rms_norm(x.data(), rows, dim, weight, dtype, eps, expected.data());
    cuda::DeviceBuffer x_device = to_device(context, x);
    cuda::DeviceBuffer weight_device =
        dtype == sy::DType::bf16 ? to_device(context, weight_bf16) : to_device(context, weight_f32);
    cuda::DeviceBuffer out = context.allocate(x.size() * sizeof(float), "out");
    cuda::rms_norm(x_device.as<float>(), rows, dim, weight_device.data(), dtype, eps, out.as<float>(),
                   context.stream());
    const std::vector<float> got = to_host<float>(context, out, x.size());
    cuda::rms_norm(x_device.as<float>(), rows, dim, weight_device.data(), dtype, eps, x_device.as<float>(),
                   context.stream());
    const std::vector<float> in_place = to_host<float>(context, x_device, x.size());
    CHECK(in_place == got);
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i << ": " << got[i] << " vs " << expected[i]);
      REQUIRE(std::fabs(got[i] - expected[i]) <= 1e-5 * std::fabs(expected[i]));
    }
    worst = std::max(worst, max_relative_error(got, expected));
  }
  MESSAGE("rms_norm: largest relative error " << worst);
}

TEST_CASE("cuda kernels: silu_and_mul, plain and fused, match the reference") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  double worst = 0;
  for (int round = 0; round < 10; ++round) {
    const std::int64_t tokens = std::uniform_int_distribution<std::int64_t>(1, 7)(random);
    const std::int64_t width = std::uniform_int_distribution<std::int64_t>(1, 5000)(random);
    INFO("tokens " << tokens << ", width " << width);
    const std::vector<float> gate_up = uniform(tokens * 2 * width, -20, 20, random);
    std::vector<double> expected(tokens * width);
    for (std::int64_t t = 0; t < tokens; ++t)
      cpu::reference::silu_and_mul(gate_up.data() + t * 2 * width, gate_up.data() + t * 2 * width + width, width,
                                   expected.data() + t * width);
    cuda::DeviceBuffer input = to_device(context, gate_up);
    cuda::DeviceBuffer out = context.allocate(expected.size() * sizeof(float), "out");
    cuda::silu_and_mul_fused(input.as<float>(), tokens, width, out.as<float>(), context.stream());
    const std::vector<float> fused = to_host<float>(context, out, expected.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      INFO("element " << i << ": " << fused[i] << " vs " << expected[i]);
      REQUIRE(std::fabs(fused[i] - expected[i]) <= 1e-5 * std::fabs(expected[i]));
    }
    worst = std::max(worst, max_relative_error(fused, expected));
    // Plain form on the first row, in place into the up half.
    float* gate = input.as<float>();
    cuda::silu_and_mul(gate, gate + width, width, gate + width, context.stream());
    const std::vector<float> row = to_host<float>(context, input, 2 * width);
    CHECK(std::equal(row.begin() + width, row.end(), fused.begin()));
  }
  MESSAGE("silu_and_mul: largest relative error " << worst);
}

namespace {

// A copy of `bytes` at `source` in anonymous pages of its own, then made read-only (none without a
// source).
class ReadOnlyPages {
 public:
  ReadOnlyPages(const void* source, std::size_t bytes) : bytes_(bytes) {
    if (source == nullptr) return;
    void* pages = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(pages != MAP_FAILED);
    std::memcpy(pages, source, bytes);
    REQUIRE(mprotect(pages, bytes, PROT_READ) == 0);
    data_ = pages;
  }
  ~ReadOnlyPages() {
    if (data_ != nullptr) munmap(data_, bytes_);
  }
  ReadOnlyPages(const ReadOnlyPages&) = delete;
  ReadOnlyPages& operator=(const ReadOnlyPages&) = delete;
  const void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

}  // namespace

TEST_CASE("cuda kernels: embedding gathers f32, bf16 and f16 rows exactly; bad ids give NaN rows") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  // Each dtype with a width of any size (element by element), one of whole 16-byte pieces, and that
  // again from a table in host-mapped memory (the decode graph's table with the embedding on the CPU).
  for (int round = 0; round < 9; ++round) {
    const sy::DType dtype = std::array{sy::DType::f32, sy::DType::bf16, sy::DType::f16}[round % 3];
    const bool whole_pieces = round >= 3, from_host = round >= 6;
    const std::int64_t vocab = std::uniform_int_distribution<std::int64_t>(2, 3000)(random);
    std::int64_t hidden = std::uniform_int_distribution<std::int64_t>(1, 3000)(random);
    if (whole_pieces) hidden = 8 * std::uniform_int_distribution<std::int64_t>(1, 1200)(random);
    else if (hidden % 8 == 0) hidden += 1;
    const std::int64_t tokens = std::uniform_int_distribution<std::int64_t>(1, 40)(random);
    INFO(sy::dtype_name(dtype) << ": vocab " << vocab << ", hidden " << hidden << ", tokens " << tokens
                               << (from_host ? ", table in host memory" : ""));
    const std::vector<float> values = uniform(vocab * hidden, -4, 4, random);
    std::vector<std::uint16_t> narrow(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      narrow[i] = dtype == sy::DType::bf16 ? cpu::f32_to_bf16(values[i]) : cpu::f32_to_f16(values[i]);
    const void* table_host = dtype == sy::DType::f32 ? static_cast<const void*>(values.data()) : narrow.data();
    std::vector<std::int32_t> ids(tokens);
    std::uniform_int_distribution<std::int32_t> id_of(0, static_cast<std::int32_t>(vocab - 1));
    for (auto& id : ids) id = id_of(random);
    ids.back() = static_cast<std::int32_t>(vocab);  // out of range

    cuda::DeviceBuffer table = dtype == sy::DType::f32 ? to_device(context, values) : to_device(context, narrow);
    // From host memory: read-only pages of its own registered (rounds 6-7, as a checkpoint's
    // mapping), or a page-locked copy of heap memory, whose pages it may share (8).
    const std::size_t table_bytes = values.size() * (dtype == sy::DType::f32 ? 4 : 2);
    const ReadOnlyPages pages(from_host && round < 8 ? table_host : nullptr, table_bytes);  // outlives host_table
    std::unique_ptr<cuda::HostTable> host_table;
    if (from_host) {
      host_table = std::make_unique<cuda::HostTable>(round < 8 ? pages.data() : table_host, table_bytes, "the table",
                                                     /*read_only_pages=*/round < 8);
      if (round == 8) CHECK_FALSE(host_table->registered());
      const std::string registered = host_table->registered() ? "yes" : "no";
      if (round == 6) MESSAGE("a host table's pages registered in place: " << registered);
    }
    cuda::DeviceBuffer ids_device = to_device(context, ids);
    cuda::DeviceBuffer out = context.allocate(tokens * hidden * sizeof(float), "out");
    cuda::embedding(ids_device.as<std::int32_t>(), tokens, from_host ? host_table->device_view() : table.data(), dtype,
                    vocab, hidden, out.as<float>(), context.stream());
    const std::vector<float> got = to_host<float>(context, out, tokens * hidden);
    for (std::int64_t t = 0; t + 1 < tokens; ++t)
      for (std::int64_t i = 0; i < hidden; ++i)
        REQUIRE(got[t * hidden + i] == cpu::reference::element(table_host, dtype, ids[t] * hidden + i));
    for (std::int64_t i = 0; i < hidden; ++i) REQUIRE(std::isnan(got[(tokens - 1) * hidden + i]));
  }
}

TEST_CASE("cuda kernels: embedding decodes rows of every block type bit for bit as the CPU, from HBM and host pages") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  // Each type three ways: the table in HBM (the embedding on a GPU), in read-only pages registered
  // in place (a GGUF's mapping, the decode graph's table with the embedding on the CPU), and in a
  // page-locked copy; `out` 16-byte aligned or not.
  for (const sy::DType dtype : sy::testing::kBlockTypes) {
    for (int round = 0; round < 3; ++round) {
      const std::int64_t block = sy::dtype_info(dtype).block_elements;
      const std::int64_t vocab = std::uniform_int_distribution<std::int64_t>(2, 500)(random);
      const std::int64_t hidden = block * std::uniform_int_distribution<std::int64_t>(1, 4096 / block + 2)(random);
      const std::int64_t tokens = std::uniform_int_distribution<std::int64_t>(2, 24)(random);
      INFO(sy::dtype_name(dtype) << ": vocab " << vocab << ", hidden " << hidden << ", tokens " << tokens << ", round "
                                 << round);
      const std::vector<std::uint8_t> table_host = sy::testing::random_blocks(dtype, vocab * hidden, random);
      std::vector<std::int32_t> ids(tokens);
      std::uniform_int_distribution<std::int32_t> id_of(0, static_cast<std::int32_t>(vocab - 1));
      for (auto& id : ids) id = id_of(random);
      ids.back() = round == 1 ? -1 : static_cast<std::int32_t>(vocab);  // out of range

      const ReadOnlyPages pages(round == 1 ? table_host.data() : nullptr, table_host.size());
      std::unique_ptr<cuda::HostTable> host_table;
      cuda::DeviceBuffer table;
      const void* table_view = nullptr;
      if (round == 0) {
        table = to_device(context, table_host);
        table_view = table.data();
      } else {
        host_table = std::make_unique<cuda::HostTable>(round == 1 ? pages.data() : table_host.data(), table_host.size(),
                                                       "the table", /*read_only_pages=*/round == 1);
        table_view = host_table->device_view();
      }
      cuda::DeviceBuffer ids_device = to_device(context, ids);
      // One float past the start when unaligned.
      const std::int64_t skew = round == 2 ? 1 : 0;
      cuda::DeviceBuffer out = context.allocate((tokens * hidden + skew) * sizeof(float), "out");
      cuda::embedding(ids_device.as<std::int32_t>(), tokens, table_view, dtype, vocab, hidden, out.as<float>() + skew,
                      context.stream());
      const std::vector<float> got = to_host<float>(context, out.as<float>() + skew, tokens * hidden);
      const std::size_t row_bytes = sy::storage_bytes(dtype, static_cast<std::uint64_t>(hidden));
      std::vector<float> expected(hidden);
      for (std::int64_t t = 0; t + 1 < tokens; ++t) {
        sy::quant::dequantize_row(dtype, table_host.data() + ids[t] * row_bytes, expected.data(), hidden);
        for (std::int64_t i = 0; i < hidden; ++i) REQUIRE(bits_of(got[t * hidden + i]) == bits_of(expected[i]));
      }
      for (std::int64_t i = 0; i < hidden; ++i) REQUIRE(std::isnan(got[(tokens - 1) * hidden + i]));
    }
  }
  // MXFP4's scale over every exponent byte (row e has exponent e): subnormal scales (0, 1) and
  // infinite products (255) too.
  std::vector<std::uint8_t> mxfp4 = sy::testing::random_blocks(sy::DType::mxfp4, 256 * 64, random);
  for (int e = 0; e < 256; ++e)
    for (int block = 0; block < 2; ++block) mxfp4[static_cast<std::size_t>(34 * e + 17 * block)] = static_cast<std::uint8_t>(e);
  std::vector<std::int32_t> every_row(256);
  for (int e = 0; e < 256; ++e) every_row[static_cast<std::size_t>(e)] = e;
  cuda::DeviceBuffer mxfp4_device = to_device(context, mxfp4), rows_device = to_device(context, every_row);
  cuda::DeviceBuffer mxfp4_out = context.allocate(256 * 64 * sizeof(float), "out");
  cuda::embedding(rows_device.as<std::int32_t>(), 256, mxfp4_device.data(), sy::DType::mxfp4, 256, 64,
                  mxfp4_out.as<float>(), context.stream());
  const std::vector<float> mxfp4_got = to_host<float>(context, mxfp4_out, 256 * 64);
  std::vector<float> mxfp4_expected(256 * 64);
  sy::quant::dequantize_rows(sy::DType::mxfp4, mxfp4.data(), mxfp4_expected.data(), 256, 64);
  for (std::size_t i = 0; i < mxfp4_got.size(); ++i) {
    INFO("mxfp4 exponent " << i / 64 << " weight " << i % 64);
    REQUIRE(bits_of(mxfp4_got[i]) == bits_of(mxfp4_expected[i]));
  }
  // A width that is not whole blocks is refused before anything runs.
  cuda::DeviceBuffer ids_device = to_device(context, std::vector<std::int32_t>{0});
  cuda::DeviceBuffer table = context.allocate(1024, "table"), out = context.allocate(1024, "out");
  CHECK_THROWS_AS(cuda::embedding(ids_device.as<std::int32_t>(), 1, table.data(), sy::DType::q4_k, 1, 128,
                                  out.as<float>(), context.stream()),
                  std::invalid_argument);
}

TEST_CASE("cuda kernels: rope is bit-identical to the CPU kernel in all three layouts, strided heads too") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const switchyard::RopeLayout layouts[] = {switchyard::RopeLayout::half_split, switchyard::RopeLayout::interleaved_to_half_split,
                                     switchyard::RopeLayout::interleaved};
  for (int round = 0; round < 24; ++round) {
    const switchyard::RopeLayout layout = layouts[round % 3];
    const int rope_dim = round < 3 ? 1024 : 2 * std::uniform_int_distribution<int>(1, 96)(random);
    const std::int64_t tokens = std::uniform_int_distribution<std::int64_t>(1, 20)(random);
    const std::int64_t heads = std::uniform_int_distribution<std::int64_t>(1, 40)(random);
    const std::int64_t nope = round % 2 ? std::uniform_int_distribution<std::int64_t>(1, 128)(random) : 0;
    const std::int64_t first_position = std::uniform_int_distribution<std::int64_t>(0, 100000)(random);
    INFO("layout " << static_cast<int>(layout) << ", rope_dim " << rope_dim << ", tokens " << tokens << ", heads "
                   << heads << ", nope " << nope << ", first position " << first_position);
    switchyard::RopeFrequencies frequencies;
    if (round % 4 < 2) {
      frequencies = switchyard::rope_frequencies_default(rope_dim, round % 4 ? 1e6 : 10000);
    } else {
      switchyard::YarnConfig yarn;  // DeepSeek-V3's
      yarn.rope_dim = rope_dim, yarn.factor = 40, yarn.mscale = 1, yarn.mscale_all_dim = 0.707;
      frequencies = switchyard::rope_frequencies_yarn(yarn);
    }
    std::vector<float> cos(tokens * rope_dim / 2), sin(cos.size());
    switchyard::rope_cos_sin(frequencies, first_position, tokens, cos.data(), sin.data());

    // q: [tokens, heads, nope + rope], the rope part last (DeepSeek's MLA); nope = 0 is plain.
    const std::int64_t head_stride = nope + rope_dim, token_stride = heads * head_stride;
    std::vector<float> q = uniform(tokens * token_stride, -4, 4, random);
    cuda::DeviceBuffer q_device = to_device(context, q);
    cuda::DeviceBuffer cos_device = to_device(context, cos), sin_device = to_device(context, sin);
    cuda::apply_rope(q_device.as<float>() + nope, tokens, heads, token_stride, head_stride, rope_dim,
                     cos_device.as<float>(), sin_device.as<float>(), layout, context.stream());
    const std::vector<float> got = to_host<float>(context, q_device, q.size());
    cpu::apply_rope(q.data() + nope, tokens, heads, token_stride, head_stride, rope_dim, cos.data(), sin.data(),
                    layout);
    std::size_t differing = 0;
    for (std::size_t i = 0; i < q.size(); ++i) differing += got[i] != q[i];
    CHECK(differing == 0);
  }
}

namespace {

using switchyard::gate_testing::gate_cases;
using switchyard::gate_testing::GateCase;
using switchyard::gate_testing::separated;
using switchyard::gate_testing::well_separated;

struct GateRun {
  std::vector<std::int32_t> ids;
  std::vector<float> weights;
};

// The GPU kernel; `bias` is the host copy of the config's bias, copied to the device.
GateRun gate_on_gpu(cuda::DeviceContext& context, switchyard::MoeGateConfig c, const std::vector<float>& bias,
                    const std::vector<float>& logits, std::int64_t tokens) {
  cuda::DeviceBuffer bias_device;
  if (!bias.empty()) {
    bias_device = to_device(context, bias);
    c.score_correction_bias = bias_device.as<float>();
  }
  cuda::DeviceBuffer logits_device = to_device(context, logits);
  cuda::DeviceBuffer ids = context.allocate(tokens * c.top_k * sizeof(std::int32_t), "ids");
  cuda::DeviceBuffer weights = context.allocate(tokens * c.top_k * sizeof(float), "weights");
  cuda::moe_gate(c, logits_device.as<float>(), tokens, ids.as<std::int32_t>(), weights.as<float>(), context.stream());
  return {to_host<std::int32_t>(context, ids, tokens * c.top_k), to_host<float>(context, weights, tokens * c.top_k)};
}

}  // namespace

TEST_CASE("cuda kernels: moe_gate matches the reference and the CPU kernel for every preset") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::normal_distribution<float> logit(0, 2);
  double worst = 0;
  for (const GateCase& gate : gate_cases(random)) {
    const switchyard::MoeGateConfig& c = gate.config;
    INFO(gate.name);
    const std::int64_t tokens = 37;
    std::vector<float> logits(tokens * c.n_experts);
    for (std::int64_t t = 0; t < tokens; ++t) {
      float* row = logits.data() + t * c.n_experts;
      for (int attempt = 0;; ++attempt) {
        // Redraw until rounding cannot reorder the choices; a config where that never happens is a bug.
        REQUIRE_MESSAGE(attempt < 10000, "no well-separated logits after 10000 draws");
        for (int e = 0; e < c.n_experts; ++e) row[e] = logit(random);
        if (well_separated(c, row)) break;
      }
    }
    const GateRun got = gate_on_gpu(context, c, gate.bias, logits, tokens);
    std::vector<std::int32_t> expected_ids, cpu_ids(got.ids.size());
    std::vector<double> expected_weights;
    std::vector<float> cpu_weights(got.weights.size());
    cpu::reference::moe_gate(c, logits.data(), tokens, expected_ids, expected_weights);
    cpu::moe_gate(c, logits.data(), tokens, cpu_ids.data(), cpu_weights.data());
    CHECK(got.ids == expected_ids);
    CHECK(got.ids == cpu_ids);
    for (std::size_t i = 0; i < got.weights.size(); ++i) {
      INFO("token " << i / c.top_k << ", slot " << i % c.top_k);
      REQUIRE(std::fabs(got.weights[i] - expected_weights[i]) <= 2e-6 * std::fabs(expected_weights[i]) + 1e-7);
    }
    worst = std::max(worst, max_relative_error(got.weights, expected_weights));
  }
  MESSAGE("moe_gate: largest relative weight error " << worst);
}

TEST_CASE("cuda kernels: moe_gate breaks exact ties like the CPU kernel (the lower index wins)") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  // Logits from a few integers: many exactly equal scores, distinct ones far apart. Non-negative for
  // the sigmoid gate, where s(a) + s(-a) = 1 would make different pairs' group scores nearly equal.
  for (const GateCase& gate : gate_cases(random)) {
    const switchyard::MoeGateConfig& c = gate.config;
    if (!gate.bias.empty()) continue;  // biases make ties inexact
    INFO(gate.name);
    const std::int64_t tokens = 50;
    std::uniform_int_distribution<int> level(c.scoring == switchyard::GateScoring::sigmoid ? 0 : -2, 2);
    std::vector<float> logits(tokens * c.n_experts);
    for (float& l : logits) l = static_cast<float>(level(random));
    const GateRun got = gate_on_gpu(context, c, {}, logits, tokens);
    std::vector<std::int32_t> cpu_ids(got.ids.size());
    std::vector<float> cpu_weights(got.weights.size());
    cpu::moe_gate(c, logits.data(), tokens, cpu_ids.data(), cpu_weights.data());
    CHECK(got.ids == cpu_ids);
  }
  switchyard::MoeGateConfig v3 = presets::deepseek_v3_gate(256, 8, 8, 4, nullptr, true, 2.5f);
  const std::int64_t tokens = 50;
  std::vector<float> logits(tokens * 256);
  for (float& l : logits) l = static_cast<float>(std::uniform_int_distribution<int>(0, 2)(random));
  const GateRun got = gate_on_gpu(context, v3, {}, logits, tokens);
  std::vector<std::int32_t> cpu_ids(got.ids.size());
  std::vector<float> cpu_weights(got.weights.size());
  cpu::moe_gate(v3, logits.data(), tokens, cpu_ids.data(), cpu_weights.data());
  CHECK(got.ids == cpu_ids);
}

TEST_CASE("cuda kernels: write_to_host and add_from_host move mapped host memory exactly, and clear the flag") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  auto mapped = [](const cuda::PinnedBuffer& buffer) { return buffer.device_view_as<float>(); };
  cuda::HostFlags flags(1);
  for (int round = 0; round < 6; ++round) {
    // Counts that take the 16-byte path (multiples of 4) and that do not; with and without an addend.
    const std::int64_t count = round < 3 ? 4 * draw(1, 3000, random) : 4 * draw(1, 3000, random) + draw(1, 3, random);
    const bool with_add = round % 2 == 0;
    INFO("count " << count << (with_add ? " with" : " without") << " an addend");
    const std::vector<float> x = uniform(static_cast<std::size_t>(count), -5, 5, random);
    const std::vector<float> add = uniform(static_cast<std::size_t>(count), -5, 5, random);
    cuda::PinnedBuffer host(static_cast<std::size_t>(count) * sizeof(float), "host values");
    cuda::PinnedBuffer ids(4 * sizeof(std::int32_t), "host ids"), weights(4 * sizeof(float), "host weights");
    cuda::DeviceBuffer x_d = to_device(context, x), add_d = to_device(context, add);
    const std::vector<std::int32_t> k_ids = {3, 1, 4, 1};
    const std::vector<float> k_weights = uniform(4, 0, 1, random);
    cuda::DeviceBuffer ids_d = to_device(context, k_ids), weights_d = to_device(context, k_weights);
    cuda::write_to_host(x_d.as<float>(), count, ids_d.as<std::int32_t>(), weights_d.as<float>(), 4, mapped(host),
                        reinterpret_cast<std::int32_t*>(mapped(ids)), mapped(weights), context.stream());
    context.synchronize();
    CHECK(std::memcmp(host.data(), x.data(), x.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(ids.data(), k_ids.data(), k_ids.size() * sizeof(std::int32_t)) == 0);
    CHECK(std::memcmp(weights.data(), k_weights.data(), k_weights.size() * sizeof(float)) == 0);
    // The CPU's side: new values, then the flag the launch clears.
    const std::vector<float> routed = uniform(static_cast<std::size_t>(count), -5, 5, random);
    std::memcpy(host.data(), routed.data(), routed.size() * sizeof(float));
    flags.host_write(0, 1);
    cuda::DeviceBuffer out = context.allocate(static_cast<std::size_t>(count) * sizeof(float), "out");
    cuda::add_from_host(mapped(host), with_add ? add_d.as<float>() : nullptr, count, out.as<float>(),
                        context.stream(), flags.device_flag(0));
    const std::vector<float> got = to_host<float>(context, out, static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
      INFO("element " << i);
      REQUIRE(got[i] == (with_add ? routed[i] + add[i] : routed[i]));
    }
    flags.host_wait(0, 0, context.stream());  // cleared, or this throws once the stream is idle
  }
  // A launch that waits for the flag itself: queued first, the host writes values and flag later.
  const std::int64_t count = 2048;
  const std::vector<float> add = uniform(count, -5, 5, random), routed = uniform(count, -5, 5, random);
  cuda::PinnedBuffer host(count * sizeof(float), "host values");
  std::memset(host.data(), 0xff, count * sizeof(float));  // NaN until the host's release
  cuda::DeviceBuffer add_d = to_device(context, add);
  cuda::DeviceBuffer out = context.allocate(count * sizeof(float), "out");
  cuda::add_from_host(mapped(host), add_d.as<float>(), count, out.as<float>(), context.stream(), flags.device_flag(0),
                      /*wait_first=*/true);
  std::thread cpu([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::memcpy(host.data(), routed.data(), count * sizeof(float));
    flags.host_write(0, 1);
  });
  const std::vector<float> got = to_host<float>(context, out, count);
  cpu.join();
  for (std::int64_t i = 0; i < count; ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == routed[i] + add[i]);
  }
  flags.host_wait(0, 0, context.stream());
  CHECK_THROWS_AS(cuda::add_from_host(mapped(host), nullptr, count, out.as<float>(), context.stream(), nullptr, true),
                  std::invalid_argument);
}

TEST_CASE("cuda kernels: add_rms_norm equals add_in_place then rms_norm, bit for bit") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  for (int round = 0; round < 6; ++round) {
    const std::int64_t rows = 1 + round, dim = std::vector<std::int64_t>{2048, 7168, 512, 100, 1408, 4096}[round];
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    const std::vector<float> x = uniform(rows * dim, -3, 3, random), delta = uniform(rows * dim, -1, 1, random);
    const std::vector<float> weight_f32 = uniform(dim, 0.5f, 1.5f, random);
    const std::vector<std::uint16_t> weight_bf16 = to_bf16(weight_f32);
    cuda::DeviceBuffer weight =
        dtype == sy::DType::bf16 ? to_device(context, weight_bf16) : to_device(context, weight_f32);
    cuda::DeviceBuffer fused_x = to_device(context, x), plain_x = to_device(context, x), d = to_device(context, delta);
    cuda::DeviceBuffer fused_out = context.allocate(x.size() * 4, "out"), plain_out = context.allocate(x.size() * 4, "out");
    cuda::add_rms_norm(fused_x.as<float>(), d.as<float>(), rows, dim, weight.data(), dtype, 1e-6f,
                       fused_out.as<float>(), context.stream());
    cuda::add_in_place(plain_x.as<float>(), d.as<float>(), rows * dim, context.stream());
    cuda::rms_norm(plain_x.as<float>(), rows, dim, weight.data(), dtype, 1e-6f, plain_out.as<float>(), context.stream());
    CHECK(to_host<float>(context, fused_x, x.size()) == to_host<float>(context, plain_x, x.size()));
    CHECK(to_host<float>(context, fused_out, x.size()) == to_host<float>(context, plain_out, x.size()));
  }
}

// The decode hand-off's read-back folded into the next norm: the launch waits for the CPU's flag
// itself (queued before the host writes anything), reads the host's values and adds them with the
// device's part, bit for bit what the separate read-back and add + norm launches give.
TEST_CASE("cuda kernels: add_rms_norm with a host addend waits for the flag and equals add_from_host then add_rms_norm") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  cuda::HostFlags flags(1);
  // 2048 (V2-Lite) and 7168 (V3): 16-byte host reads; 1001 and the unaligned round: 4-byte reads;
  // 10240: the unstaged loop (more than 8 values a thread).
  const std::vector<std::int64_t> dims = {2048, 7168, 1001, 10240, 2048, 512};
  for (std::size_t round = 0; round < dims.size(); ++round) {
    const std::int64_t dim = dims[round];
    const bool with_device = round % 3 != 2, unaligned = round == 4;
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    INFO("dim " << dim << (with_device ? ", with" : ", without") << " a device part" << (unaligned ? ", unaligned" : ""));
    const std::vector<float> x = uniform(dim, -3, 3, random), device_part = uniform(dim, -1, 1, random),
                             routed = uniform(dim, -1, 1, random), weight_f32 = uniform(dim, 0.5f, 1.5f, random);
    cuda::DeviceBuffer weight =
        dtype == sy::DType::bf16 ? to_device(context, to_bf16(weight_f32)) : to_device(context, weight_f32);
    cuda::PinnedBuffer host((dim + 1) * sizeof(float), "host values");
    std::memset(host.data(), 0xff, (dim + 1) * sizeof(float));  // NaN until the host's release
    float* host_values = host.as<float>() + (unaligned ? 1 : 0);
    const float* host_device = host.device_view_as<float>() + (unaligned ? 1 : 0);
    cuda::DeviceBuffer fused_x = to_device(context, x), d = to_device(context, device_part);
    cuda::DeviceBuffer fused_out = context.allocate(dim * sizeof(float), "out");
    const float* device_addend = with_device ? d.as<float>() : nullptr;
    cuda::add_rms_norm(fused_x.as<float>(), device_addend, 1, dim, weight.data(), dtype, 1e-6f, fused_out.as<float>(),
                       context.stream(), cuda::HostAddend{host_device, flags.device_flag(0)});
    std::thread cpu([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::memcpy(host_values, routed.data(), dim * sizeof(float));
      flags.host_write(0, 1);
    });
    context.synchronize();
    cpu.join();
    flags.host_wait(0, 0, context.stream());  // cleared by the launch, or this throws
    // The two launches it replaces, on the same inputs (the flag raised before them).
    cuda::DeviceBuffer plain_x = to_device(context, x), sum = context.allocate(dim * sizeof(float), "sum");
    cuda::DeviceBuffer plain_out = context.allocate(dim * sizeof(float), "out");
    flags.host_write(0, 1);
    cuda::add_from_host(host_device, device_addend, dim, sum.as<float>(), context.stream(), flags.device_flag(0), true);
    cuda::add_rms_norm(plain_x.as<float>(), sum.as<float>(), 1, dim, weight.data(), dtype, 1e-6f,
                       plain_out.as<float>(), context.stream());
    CHECK(to_host<float>(context, fused_x, dim) == to_host<float>(context, plain_x, dim));
    CHECK(to_host<float>(context, fused_out, dim) == to_host<float>(context, plain_out, dim));
    // And against the plain sum on the host: x + (routed + device).
    const std::vector<float> new_x = to_host<float>(context, fused_x, dim);
    for (std::int64_t i = 0; i < dim; ++i) {
      INFO("element " << i);
      REQUIRE(new_x[i] == x[i] + (with_device ? routed[i] + device_part[i] : routed[i]));
    }
  }
}

// The norm takes the host's flag and row before its wait for the previous kernel (rms_norm.cu);
// what the previous kernel writes must still be read after that wait. Here the device part comes
// from a GEMV over 256 MiB of weights, still running while the norm's block is resident and has
// the host's row (the flag is up from the start); the device part starts as NaN, so an early read
// shows.
TEST_CASE("cuda kernels: add_rms_norm with a host addend reads the previous kernel's output after it ends") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::int64_t dim = 2048, in = 65536;
  cuda::DeviceBuffer slow_weight = context.allocate(static_cast<std::size_t>(dim * in) * 2, "a long GEMV's weights");
  // Every weight bf16 0x3c3c (about 0.0115): the GEMV is here for its length, not its values.
  REQUIRE(cudaMemsetAsync(slow_weight.data(), 0x3c, slow_weight.bytes(), context.stream()) == cudaSuccess);
  const std::vector<float> x = uniform(dim, -3, 3, random), routed = uniform(dim, -1, 1, random),
                           weight = uniform(dim, 0.5f, 1.5f, random), slow_x = uniform(in, -1, 1, random);
  cuda::DeviceBuffer x_device = to_device(context, x), weight_device = to_device(context, weight);
  cuda::DeviceBuffer slow_x_device = to_device(context, slow_x);
  cuda::DeviceBuffer delta = context.allocate(dim * sizeof(float), "the device part");
  REQUIRE(cudaMemsetAsync(delta.data(), 0xff, delta.bytes(), context.stream()) == cudaSuccess);  // NaN until written
  cuda::DeviceBuffer out = context.allocate(dim * sizeof(float), "out");
  cuda::PinnedBuffer host(dim * sizeof(float), "host values");
  std::memcpy(host.data(), routed.data(), dim * sizeof(float));
  cuda::HostFlags flags(1);
  flags.host_write(0, 1);
  context.synchronize();
  cuda::GemvShape shape;
  shape.in = in;
  shape.rows = dim;
  cuda::gemv(shape, slow_weight.data(), sy::DType::bf16, slow_x_device.as<float>(), delta.as<float>(),
             context.stream());
  cuda::add_rms_norm(x_device.as<float>(), delta.as<float>(), 1, dim, weight_device.data(), sy::DType::f32, 1e-6f,
                     out.as<float>(), context.stream(),
                     cuda::HostAddend{host.device_view_as<float>(), flags.device_flag(0)});
  context.synchronize();
  const std::vector<float> device_part = to_host<float>(context, delta, dim);
  const std::vector<float> new_x = to_host<float>(context, x_device, dim);
  for (std::int64_t i = 0; i < dim; ++i) {
    INFO("element " << i);
    REQUIRE(std::isfinite(device_part[i]));
    REQUIRE(new_x[i] == x[i] + (routed[i] + device_part[i]));
  }
  flags.host_wait(0, 0, context.stream());  // cleared by the launch, or this throws
}

// Refused before anything reaches a device, so these run without a GPU.
TEST_CASE("cuda kernels: add_rms_norm refuses a host addend without its flag, for more than one row, or too long") {
  std::vector<float> buffer(16);
  std::uint32_t flag = 0;
  float* p = buffer.data();
  auto call = [&](std::int64_t rows, std::int64_t dim, std::uint32_t* with_flag) {
    cuda::add_rms_norm(p, p, rows, dim, p, sy::DType::f32, 1e-6f, p, nullptr, cuda::HostAddend{p, with_flag});
  };
  CHECK_THROWS_AS(call(1, 16, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(call(2, 16, &flag), std::invalid_argument);
  CHECK_THROWS_AS(call(1, cuda::kMaxHostDim + 1, &flag), std::invalid_argument);
}

TEST_CASE("cuda kernels: argmax chooses as cpu::argmax, ties, NaN and infinities included, in one block or many") {
  int dummy = 0;
  CHECK_THROWS_AS(cuda::argmax(nullptr, 0, &dummy, nullptr), std::invalid_argument);
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  cuda::DeviceBuffer out = context.allocate(sizeof(std::int32_t), "the chosen index");
  // Every other round over many blocks (their scratch left zero by each launch, as a graph needs).
  cuda::DeviceBuffer candidates = context.allocate(cuda::kArgmaxBlocks * 8, "candidates");
  cuda::DeviceBuffer counter = to_device(context, std::vector<std::int32_t>{0});
  const cuda::ArgmaxScratch scratch{candidates.data(), counter.as<std::int32_t>()};
  for (int round = 0; round < 48; ++round) {
    const bool many_blocks = round % 2 == 1;
    const int kind = round / 2;  // the same kinds of input for both
    const std::int64_t n = kind == 0 ? 1 : kind < 12 ? draw(2, 3000, random) : draw(100000, 160000, random);
    std::vector<float> x = uniform(static_cast<std::size_t>(n), -30, 30, random);
    // Rounds 4+: the largest value repeated (the first one wins); 6+: NaN scattered; then NaN
    // first, all NaN, all -inf, +inf twice.
    if (kind >= 4 && n > 3) {
      const float top = *std::max_element(x.begin(), x.end());
      for (int i = 0; i < 3; ++i) x[static_cast<std::size_t>(draw(0, n - 1, random))] = top;
    }
    if (kind >= 6)
      for (int i = 0; i < 5; ++i) x[static_cast<std::size_t>(draw(0, n - 1, random))] = nan;
    if (kind == 8) x[0] = nan;
    if (kind == 9) std::fill(x.begin(), x.end(), nan);
    if (kind == 10) std::fill(x.begin(), x.end(), -inf);
    if (kind == 11 && n > 3) x[n / 2] = x[n - 1] = inf;
    INFO("round " << round << ", n " << n << (many_blocks ? ", many blocks" : ", one block"));
    cuda::DeviceBuffer x_device = to_device(context, x);
    cuda::argmax(x_device.as<float>(), n, out.as<std::int32_t>(), context.stream(), {},
                 many_blocks ? &scratch : nullptr);
    CHECK(to_host<std::int32_t>(context, out.data(), 1)[0] == cpu::argmax(x.data(), n));
    if (many_blocks) CHECK(to_host<std::int32_t>(context, counter, 1)[0] == 0);
  }
}

TEST_CASE("cuda kernels: argmax hands the next decode step its token and position (NextStep)") {
  int dummy = 0;
  std::uint64_t slots[2] = {};
  CHECK_THROWS_AS(cuda::argmax(reinterpret_cast<const float*>(&dummy), 1, &dummy, nullptr, {nullptr, slots}),
                  std::invalid_argument);
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  cuda::PinnedBuffer chosen(sizeof(std::int32_t), "the chosen id"), tokens(2 * sizeof(std::uint64_t), "token slots");
  std::memset(tokens.data(), 0xff, tokens.bytes());
  cuda::DeviceBuffer candidates = context.allocate(cuda::kArgmaxBlocks * 8, "candidates");
  cuda::DeviceBuffer counter = to_device(context, std::vector<std::int32_t>{0});
  const cuda::ArgmaxScratch scratch{candidates.data(), counter.as<std::int32_t>()};
  const std::int32_t first_position = static_cast<std::int32_t>(draw(0, 100000, random));
  cuda::DeviceBuffer step = to_device(context, std::vector<std::int32_t>{first_position, -1, 7});
  // Steps back to back, as CausalLM::decode_greedy queues them: each advances the record by one
  // position and leaves its id there and in slot (position % 2); the other slot keeps the step before.
  std::vector<std::int32_t> expected;
  for (int k = 0; k < 5; ++k) {
    const std::int64_t n = draw(2, 150000, random);
    const std::vector<float> x = uniform(static_cast<std::size_t>(n), -30, 30, random);
    cuda::DeviceBuffer x_device = to_device(context, x);
    cuda::argmax(x_device.as<float>(), n, chosen.device_view_as<std::int32_t>(), context.stream(),
                 {step.as<std::int32_t>(), tokens.device_view_as<std::uint64_t>()}, k % 2 == 1 ? &scratch : nullptr);
    context.synchronize();
    expected.push_back(static_cast<std::int32_t>(cpu::argmax(x.data(), n)));
    const std::int64_t position = first_position + k + 1;
    INFO("step " << k);
    CHECK(*chosen.as<std::int32_t>() == expected.back());
    CHECK(to_host<std::int32_t>(context, step, 3) == std::vector<std::int32_t>{static_cast<std::int32_t>(position),
                                                                                expected.back(), 7});
    CHECK(tokens.as<std::uint64_t>()[position % 2] == cuda::token_slot_value(position, expected.back()));
    if (k > 0) CHECK(tokens.as<std::uint64_t>()[(position + 1) % 2] == cuda::token_slot_value(position - 1, expected[k - 1]));
  }
}

TEST_CASE("cuda kernels: linear with bf16 and f32 weights matches the reference") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  double worst_f32 = 0, worst_bf16 = 0, worst_bf16_emulated = 0;
  for (int round = 0; round < 16; ++round) {
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    const std::int64_t tokens = std::vector<std::int64_t>{1, 1, 3, 17, 64, 130}[round % 6];
    std::int64_t in = std::uniform_int_distribution<std::int64_t>(1, 1100)(random);
    if (round % 4 < 2) in = (in + 7) / 8 * 8;  // the decode path's shapes
    // Every third round x starts one float past 16-byte alignment: bf16 inputs round one by one.
    const int x_offset = round % 3 == 0 ? 1 : 0;
    const bool gemv = tokens <= cuda::kGemvMaxTokens && in % 8 == 0 && x_offset == 0;
    const std::int64_t out = std::uniform_int_distribution<std::int64_t>(1, 700)(random);
    INFO(sy::dtype_name(dtype) << ": tokens " << tokens << ", in " << in << ", out " << out << ", x offset "
                               << x_offset);
    const std::vector<float> x = uniform(tokens * in, -2, 2, random);
    const std::vector<float> weight_f32 = uniform(out * in, -1, 1, random);
    const std::vector<std::uint16_t> weight_bf16 = to_bf16(weight_f32);
    const void* weight = dtype == sy::DType::bf16 ? static_cast<const void*>(weight_bf16.data()) : weight_f32.data();

    std::vector<double> expected(tokens * out), magnitude(tokens * out);
    cpu::reference::linear(x.data(), tokens, in, weight, dtype, out, expected.data(), magnitude.data());
    std::vector<float> padded(static_cast<std::size_t>(x_offset), 0.0f);
    padded.insert(padded.end(), x.begin(), x.end());
    cuda::DeviceBuffer x_device = to_device(context, padded);
    cuda::DeviceBuffer weight_device =
        dtype == sy::DType::bf16 ? to_device(context, weight_bf16) : to_device(context, weight_f32);
    cuda::DeviceBuffer y = context.allocate(expected.size() * sizeof(float), "y");
    cuda::linear(context, x_device.as<float>() + x_offset, tokens, in, weight_device.data(), dtype, out,
                 y.as<float>());
    const std::vector<float> got = to_host<float>(context, y, expected.size());

    std::vector<double> emulated(expected.size());  // the reference fed x rounded to bf16
    if (dtype == sy::DType::bf16) {
      std::vector<float> x_rounded(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) x_rounded[i] = cpu::bf16_to_f32(cpu::f32_to_bf16(x[i]));
      cpu::reference::linear(x_rounded.data(), tokens, in, weight, dtype, out, emulated.data());
    }
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("y[" << i / out << ", " << i % out << "] = " << got[i] << " vs " << expected[i] << ", scale "
                << magnitude[i]);
      const double error = std::fabs(got[i] - expected[i]) / magnitude[i];
      if (dtype == sy::DType::f32 || gemv) {
        REQUIRE(error <= 1e-5);
        worst_f32 = std::max(worst_f32, error);
      } else {
        const double emulated_error = std::fabs(got[i] - emulated[i]) / magnitude[i];
        REQUIRE(error <= 0x1.0p-8);
        REQUIRE(emulated_error <= 1e-5);
        worst_bf16 = std::max(worst_bf16, error);
        worst_bf16_emulated = std::max(worst_bf16_emulated, emulated_error);
      }
    }
  }
  MESSAGE("linear: largest error / sum|xW|: f32 " << worst_f32 << ", bf16 " << worst_bf16
                                                  << " (vs bf16-rounded x: " << worst_bf16_emulated << ")");
}

#else  // built without the CUDA backend

TEST_CASE("cuda kernels: skipped, built without the CUDA backend") { MESSAGE("skipped: built without CUDA"); }

#endif
