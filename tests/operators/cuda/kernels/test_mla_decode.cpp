// The single-token MLA decode kernel (operators/cuda/kernels/mla_decode.h) against the CPU kernel
// (cpu::mla_attention) and a double-precision reference, on fresh random inputs. Cache rows past
// what a call may see hold NaN, so reading one shows. Without a GPU every GPU test says
// "skipped: no CUDA device" and returns; the size checks run everywhere.
//
// Tolerance: that of tests/operators/cuda/kernels/test_attention.cpp, which explains it: |out - exact| <=
// 3e-5 * (1 + S) * sum_r p_r |v_r| for each element, with p the exact softmax weights, v_r the
// latent rows the token sees and S = max_r |scale| * sum_d |q_d k_rd|; against the CPU kernel
// (f32 too), twice that. bf16 caches: the same bounds, against the references on the rounded
// values the cache holds (the kernel widens them exactly and computes in f32).
#include <doctest/doctest.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "operators/cpu/kernels/causal_attention.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/mla_decode.h"
#include "tests/attention_reference.h"
#include "tests/cuda_test_support.h"

namespace cpu = switchyard::cpu;
namespace cuda = switchyard::cuda;
namespace sy = switchyard;
using namespace switchyard::testing;

namespace {

constexpr sy::DType kF32 = sy::DType::f32;

struct Shape {
  std::int64_t heads, latent_dim, rope_dim, position, max_context;
  float scale;
  sy::DType cache_dtype = sy::DType::f32;
};

std::string describe(const Shape& s) {
  std::ostringstream out;
  out << "mla decode: heads " << s.heads << ", latent " << s.latent_dim << ", rope " << s.rope_dim << ", position "
      << s.position << ", max_context " << s.max_context << ", scale " << s.scale << ", "
      << sy::dtype_name(s.cache_dtype) << " cache";
  return out.str();
}

// The decode problem in the shared reference's terms: one token.
using Inputs = MlaInputs;
MlaShape one_token(const Shape& s) {
  return {1, s.heads, s.latent_dim, s.rope_dim, s.position, s.max_context, s.scale};
}

void draw_queries(const Shape& s, Inputs& in, std::mt19937& random) {
  in.q_latent = uniform(static_cast<std::size_t>(s.heads * s.latent_dim), -1, 1, random);
  in.q_rope = uniform(static_cast<std::size_t>(s.heads * s.rope_dim), -1, 1, random);
}

// Checks got against the exact result and the CPU kernel's; returns the largest ratio to the exact.
double check_against(const std::vector<float>& got, const Shape& s, const Inputs& in) {
  const std::vector<float> cpu_out = mla_on_cpu(one_token(s), in);
  return switchyard::testing::check_against(got, exact_mla(one_token(s), in), &cpu_out, s.heads, s.latent_dim);
}

// Device buffers of one shape: the caches (in the shape's dtype; a bf16 cache's values rounded in
// `in` too, so that the references see what the kernel reads), queries, output, workspace and
// zeroed counters. An empty rope part still gets a (never read) buffer.
struct DeviceProblem {
  cuda::DeviceBuffer q_latent, q_rope, latent_cache, rope_cache, position, out, workspace, counters;
  std::int64_t counter_count = 0;

  DeviceProblem(cuda::DeviceContext& context, const Shape& s, Inputs& in) {
    std::vector<float> one{1.0f};
    q_latent = to_device(context, in.q_latent);
    q_rope = to_device(context, in.q_rope.empty() ? one : in.q_rope);
    latent_cache = cache_to_device(context, in.latent_cache, s.cache_dtype);
    rope_cache = cache_to_device(context, in.rope_cache.empty() ? one : in.rope_cache, s.cache_dtype);
    position = context.allocate(sizeof(std::int32_t), "position");
    out = context.allocate(static_cast<std::size_t>(s.heads * s.latent_dim) * sizeof(float), "out");
    const std::size_t bytes = cuda::mla_decode_workspace_bytes(s.heads, s.latent_dim, s.max_context);
    if (bytes > 0) workspace = context.allocate(bytes, "the decode workspace");
    counter_count = cuda::mla_decode_counter_count(s.heads);
    counters = context.allocate(static_cast<std::size_t>(counter_count) * sizeof(std::int32_t), "counters");
    REQUIRE(cudaMemsetAsync(counters.data(), 0, counters.bytes(), context.stream()) == cudaSuccess);
  }

  void set_position(cuda::DeviceContext& context, std::int64_t p) {
    const std::int32_t p32 = static_cast<std::int32_t>(p);
    context.copy_to_device(position.data(), &p32, sizeof p32);
    context.synchronize();  // p32 is on the stack
  }

  void enqueue(const Shape& s, cudaStream_t stream) {
    cuda::mla_decode_attention(q_latent.as<float>(), q_rope.as<float>(), s.heads, s.latent_dim, s.rope_dim,
                               latent_cache.data(), rope_cache.data(), s.cache_dtype, position.as<std::int32_t>(),
                               s.max_context, s.scale, out.as<float>(), workspace.data(),
                               counters.as<std::int32_t>(), stream);
  }

  // Every counter is back at zero after a launch.
  void check_counters_zero(cuda::DeviceContext& context) {
    const std::vector<std::int32_t> left =
        to_host<std::int32_t>(context, counters, static_cast<std::size_t>(counter_count));
    CHECK(std::count(left.begin(), left.end(), 0) == counter_count);
  }
};

// One decode problem on fresh inputs, rows past the visible ones NaN; returns the largest error ratio.
double check_decode(cuda::DeviceContext& context, const Shape& s, std::mt19937& random) {
  INFO(describe(s));
  REQUIRE(cuda::mla_decode_supports(s.heads, s.latent_dim, s.rope_dim, s.max_context, s.cache_dtype));
  Inputs in;
  draw_queries(s, in, random);
  in.latent_cache = cache_with_garbage(s.max_context, s.latent_dim, s.position + 1, random);
  in.rope_cache = cache_with_garbage(s.max_context, s.rope_dim, s.position + 1, random);
  DeviceProblem device(context, s, in);
  device.set_position(context, s.position);
  device.enqueue(s, context.stream());
  const std::vector<float> got = to_host<float>(context, device.out, in.q_latent.size());
  device.check_counters_zero(context);
  return check_against(got, s, in);
}

}  // namespace

TEST_CASE("cuda mla_decode: bad sizes throw std::invalid_argument before launching") {
  // Never dereferenced: every call below throws before touching the GPU.
  const std::int32_t dummy = 0;
  const std::int32_t* position = &dummy;
  alignas(16) static float fake[16];
  float* f = fake;
  std::int32_t counters[1] = {};
  std::int32_t* c = counters;
  alignas(16) static unsigned char workspace_bytes[16];
  void* w = workspace_bytes;
  using std::invalid_argument;
  // mla_decode_attention(q_latent, q_rope, heads, latent, rope, latent_cache, rope_cache, position,
  //                      max_context, scale, out, workspace, counters, stream)
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 0, 512, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, -3, 512, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 0, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, -512, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 510, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 1028, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, -4, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 62, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 132, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, f, kF32, position, 0, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, f, kF32, nullptr, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(nullptr, f, 16, 512, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, nullptr, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, f, kF32, position, 64, 1, nullptr, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, nullptr, 16, 512, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, nullptr, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  // Misaligned pointers.
  CHECK_THROWS_AS(cuda::mla_decode_attention(f + 1, f, 16, 512, 64, f, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f + 2, f, kF32, position, 64, 1, f, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, f, kF32, position, 64, 1, f + 3, w, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, f, kF32, position, 64, 1, f, f + 1, c, nullptr),
                  invalid_argument);
  // Decode over a long cache needs a workspace and counters.
  REQUIRE(cuda::mla_decode_workspace_bytes(16, 512, 4096) > 0);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, f, kF32, position, 4096, 1, f, nullptr, c, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, f, kF32, position, 4096, 1, f, w, nullptr, nullptr),
                  invalid_argument);

  CHECK_THROWS_AS(cuda::mla_decode_workspace_bytes(0, 512, 4096), invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_workspace_bytes(16, -512, 4096), invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_workspace_bytes(16, 510, 4096), invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_workspace_bytes(16, 512, 0), invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_counter_count(0), invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_counter_count(-16), invalid_argument);
  CHECK(cuda::mla_decode_counter_count(16) > 0);
  CHECK(cuda::mla_decode_workspace_bytes(16, 512, 32) == 0);  // one split: no partials

  CHECK(cuda::mla_decode_supports(16, 512, 64, 4096, kF32));
  CHECK(cuda::mla_decode_supports(128, 1024, 128, 1, kF32, f, f, f, f, f));
  CHECK(cuda::mla_decode_supports(3, 4, 0, 7, kF32, f, f + 1, f, f + 1, f));  // no rope part: its pointers are unread
  CHECK_FALSE(cuda::mla_decode_supports(0, 512, 64, 4096, kF32));
  CHECK_FALSE(cuda::mla_decode_supports(16, 510, 64, 4096, kF32));
  CHECK_FALSE(cuda::mla_decode_supports(16, 2048, 64, 4096, kF32));
  CHECK_FALSE(cuda::mla_decode_supports(16, 512, 66, 4096, kF32));
  CHECK_FALSE(cuda::mla_decode_supports(16, 512, 64, 0, kF32));
  CHECK_FALSE(cuda::mla_decode_supports(16, 512, 64, 4096, kF32, f + 1));
  CHECK_FALSE(cuda::mla_decode_supports(16, 512, 64, 4096, kF32, f, f + 1));
  // bf16 caches: rows of whole 16-byte units (latent and rope multiples of 8); no other cache type.
  CHECK(cuda::mla_decode_supports(16, 512, 64, 4096, sy::DType::bf16));
  CHECK(cuda::mla_decode_supports(3, 8, 0, 7, sy::DType::bf16));
  CHECK_FALSE(cuda::mla_decode_supports(16, 516, 64, 4096, sy::DType::bf16));
  CHECK_FALSE(cuda::mla_decode_supports(16, 512, 68, 4096, sy::DType::bf16));
  CHECK_FALSE(cuda::mla_decode_supports(16, 512, 64, 4096, sy::DType::f16));
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 516, 64, f, f, sy::DType::bf16, position, 64, 1, f, w, c,
                                             nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_attention(f, f, 16, 512, 64, f, f, sy::DType::f16, position, 64, 1, f, w, c,
                                             nullptr),
                  invalid_argument);

  // The combine in the value expansion: more than one split at launch, 8-aligned latent rows.
  const cuda::ValueRows rows{nullptr, switchyard::DType::bf16, 256 * 512, 128 * 512, 128};
  CHECK_FALSE(cuda::mla_expand_supports(16, 512, 32, rows));  // one split: nothing to combine
  CHECK(cuda::mla_expand_supports(16, 512, 4096, rows));
  CHECK_FALSE(cuda::mla_expand_supports(16, 516, 4096, rows));  // latent not a multiple of 8
  CHECK_FALSE(cuda::mla_expand_supports(16, 512, 4096, {nullptr, switchyard::DType::f16, 256 * 512, 128 * 512, 128}));
  CHECK_FALSE(cuda::mla_expand_supports(16, 512, 4096, {f + 1, switchyard::DType::bf16, 256 * 512, 128 * 512, 128}));
  CHECK_FALSE(cuda::mla_expand_supports(16, 512, 4096, {f, switchyard::DType::bf16, 256 * 512 + 1, 128 * 512, 128}));
  CHECK_THROWS_AS(cuda::mla_expand_partials(w, 16, 512, 32, position, rows, f, nullptr), invalid_argument);
  CHECK_THROWS_AS(cuda::mla_decode_partials(f, f, 16, 512, 64, f, f, kF32, position, 32, 1, w, nullptr),
                  invalid_argument);  // one split: nothing to defer
}

TEST_CASE("cuda mla_decode: matches the CPU kernel and the exact result on random shapes") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::vector<Shape> shapes = {
      // heads, latent, rope, position, max_context, scale (0: drawn)
      {16, 512, 64, 500, 4096, 0},                     // DeepSeek-V2-Lite decode: 16 splits, one combine
      {16, 512, 64, 4095, 4096, 0},                    // a full cache: 2 heads a block, 16 splits, one combine
      {16, 512, 64, 4095, 4097, 0},                    // 4 heads a block: 32 splits in 2 groups, two combines
      {16, 512, 64, 543, 4097, 0},                     // 17 splits: a second group of one split
      {128, 512, 64, draw(500, 1500, random), 4096, 0},  // DeepSeek-V3 decode
      {128, 512, 64, 4095, 4096, 0},
      {16, 512, 64, 32767, 32768, 0},                  // a long context: 32 tiles a split, 3 groups
      {16, 512, 64, 0, 4096, 0},                       // one key
      {3, 1024, 128, draw(0, 3000, random), 3001, 0},  // the widest rows: 16-key tiles
      {128, 1024, 128, draw(0, 2000, random), 2048, 0},
      {1, 4, 0, draw(0, 100, random), 101, 0},  // the smallest
      {5, 64, 8, 30, 31, 0},                    // one split at launch, no workspace
  };
  const std::int64_t heads_choices[] = {1, 3, 16, 128};
  const std::int64_t latent_choices[] = {512, 64, 132};
  const std::int64_t rope_choices[] = {64, 0, 8};
  for (int round = 0; round < 36; ++round) {
    Shape s{};
    s.heads = round < 24 ? heads_choices[draw(0, 3, random)] : draw(1, 40, random);
    s.latent_dim = round < 24 ? latent_choices[draw(0, 2, random)] : 4 * draw(1, 256, random);
    s.rope_dim = round < 24 ? rope_choices[draw(0, 2, random)] : 4 * draw(0, 32, random);
    s.max_context = draw(1, 4096, random);
    s.position = round % 6 == 0 ? 0 : round % 6 == 1 ? s.max_context - 1 : draw(0, s.max_context - 1, random);
    shapes.push_back(s);
  }
  double worst = 0;
  for (Shape& s : shapes) {
    if (s.scale == 0) s.scale = draw_scale(s.latent_dim + s.rope_dim, random);
    worst = std::max(worst, check_decode(context, s, random));
  }
  MESSAGE("mla_decode_attention: largest error / magnitude " << worst);
}

TEST_CASE("cuda mla_decode: bf16 caches match the CPU kernel and the exact result on their rounded values") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const sy::DType bf16 = sy::DType::bf16;
  std::vector<Shape> shapes = {
      // heads, latent, rope, position, max_context, scale (0: drawn), cache dtype
      {16, 512, 64, 500, 4096, 0, bf16},                     // DeepSeek-V2-Lite decode
      {16, 512, 64, 4095, 4097, 0, bf16},                    // 32 splits in 2 groups
      {128, 512, 64, draw(500, 1500, random), 4096, 0, bf16},  // DeepSeek-V3 decode
      {16, 512, 64, 32767, 32768, 0, bf16},                  // a long context
      {3, 1024, 128, draw(0, 3000, random), 3001, 0, bf16},  // the widest rows: 32-key tiles fit in bf16
      {16, 512, 64, 0, 4096, 0, bf16},                       // one key
      {1, 8, 0, draw(0, 100, random), 101, 0, bf16},         // the smallest
  };
  for (int round = 0; round < 24; ++round) {
    Shape s{};
    s.cache_dtype = bf16;
    s.heads = draw(1, 130, random);
    s.latent_dim = 8 * draw(1, 128, random);
    s.rope_dim = 8 * draw(0, 16, random);
    s.max_context = draw(1, 4096, random);
    s.position = round % 4 == 0 ? s.max_context - 1 : draw(0, s.max_context - 1, random);
    shapes.push_back(s);
  }
  double worst = 0;
  for (Shape& s : shapes) {
    if (s.scale == 0) s.scale = draw_scale(s.latent_dim + s.rope_dim, random);
    worst = std::max(worst, check_decode(context, s, random));
  }
  MESSAGE("mla_decode_attention, bf16 caches: largest error / magnitude " << worst);
}

TEST_CASE("cuda mla_decode: one captured graph replays at many positions over one cache") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  cudaStream_t stream = context.stream();
  // Split boundaries (32-key splits while they are few enough, then wider ones; 16 splits to a
  // combine group) and the ends; descending, so that each position can turn the rows past it into NaN
  // for good. 16 heads take 2 a block up to 4096 keys (16 splits), 4 past it (33 splits, 3 groups).
  const std::vector<std::int64_t> positions = {3999, 3000, 2047, 1024, 543, 512, 511, 500, 256, 255,
                                               64, 63, 33, 32, 31, 16, 15, 2, 1, 0};
  const std::tuple<std::int64_t, std::int64_t, sy::DType> runs[] = {
      {16, 4000, sy::DType::f32}, {16, 4100, sy::DType::f32}, {128, 4000, sy::DType::f32},
      {16, 4000, sy::DType::bf16}, {128, 4100, sy::DType::bf16}};
  for (const auto& [heads, max_context, cache_dtype] : runs) {
    Shape s{heads, 512, 64, 0, max_context, draw_scale(576, random), cache_dtype};
    INFO(describe(s));
    Inputs in;
    draw_queries(s, in, random);
    in.latent_cache = uniform(static_cast<std::size_t>(max_context * s.latent_dim), -1, 1, random);
    in.rope_cache = uniform(static_cast<std::size_t>(max_context * s.rope_dim), -1, 1, random);
    DeviceProblem device(context, s, in);
    REQUIRE(device.workspace.bytes() > 0);
    CapturedGraph graph(stream, [&] { device.enqueue(s, stream); });
    double worst = 0;
    for (const std::int64_t p : positions) {
      INFO("replay at position " << p);
      s.position = p;
      // Rows past p become NaN (0xff bytes) on the device; the host copies keep their values.
      const std::int64_t past = max_context - p - 1;
      const std::size_t element = s.cache_dtype == sy::DType::f32 ? 4 : 2;
      REQUIRE(cudaMemsetAsync(device.latent_cache.as<char>() + (p + 1) * s.latent_dim * element, 0xff,
                              past * s.latent_dim * element, stream) == cudaSuccess);
      REQUIRE(cudaMemsetAsync(device.rope_cache.as<char>() + (p + 1) * s.rope_dim * element, 0xff,
                              past * s.rope_dim * element, stream) == cudaSuccess);
      draw_queries(s, in, random);
      context.copy_to_device(device.q_latent.data(), in.q_latent.data(), in.q_latent.size() * sizeof(float));
      context.copy_to_device(device.q_rope.data(), in.q_rope.data(), in.q_rope.size() * sizeof(float));
      device.set_position(context, p);
      graph.launch(stream);
      const std::vector<float> got = to_host<float>(context, device.out, in.q_latent.size());
      worst = std::max(worst, check_against(got, s, in));
    }
    device.check_counters_zero(context);
    MESSAGE("heads " << heads << ", " << sy::dtype_name(cache_dtype)
                     << " cache, graph replays: largest error / magnitude " << worst);
  }
}

TEST_CASE("cuda mla_decode: partials combined by the value expansion match the exact attention times the value rows") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  struct Case {
    Shape shape;
    std::int64_t nope, v_dim;
    switchyard::DType dtype;
  };
  const std::vector<Case> cases = {
      {{16, 512, 64, 500, 4096, 0, sy::DType::bf16}, 128, 128, switchyard::DType::bf16},  // bf16 cache and weights
      {{128, 512, 64, draw(0, 4095, random), 4096, 0, sy::DType::bf16}, 128, 128, switchyard::DType::bf16},
      {{16, 512, 64, 500, 4096, 0}, 128, 128, switchyard::DType::bf16},   // DeepSeek-V2-Lite: 16 splits
      {{16, 512, 64, 4095, 4096, 0}, 128, 128, switchyard::DType::f32},   // 2 heads a block, 16 splits
      {{16, 512, 64, 4095, 4097, 0}, 128, 128, switchyard::DType::f32},   // 4 heads a block, 32 splits
      {{16, 512, 64, 0, 4096, 0}, 128, 128, switchyard::DType::bf16},     // one active split
      {{128, 512, 64, draw(0, 4095, random), 4096, 0}, 128, 128, switchyard::DType::bf16},  // DeepSeek-V3
      {{3, 1024, 128, draw(0, 3000, random), 3001, 0}, 16, 40, switchyard::DType::f32},   // a partial row block
      {{1, 64, 8, draw(33, 4000, random), 4001, 0}, 8, 72, switchyard::DType::bf16},      // 128 splits, 1 head
      {{5, 136, 0, draw(0, 200, random), 201, 0}, 24, 33, switchyard::DType::bf16},       // no rope part
  };
  double worst = 0;
  for (Case c : cases) {
    Shape& s = c.shape;
    s.scale = draw_scale(s.latent_dim + s.rope_dim, random);
    INFO(describe(s) << ", nope " << c.nope << ", v_dim " << c.v_dim << ", " << switchyard::dtype_name(c.dtype));
    Inputs in;
    draw_queries(s, in, random);
    in.latent_cache = cache_with_garbage(s.max_context, s.latent_dim, s.position + 1, random);
    in.rope_cache = cache_with_garbage(s.max_context, s.rope_dim, s.position + 1, random);
    const std::int64_t head_rows = c.nope + c.v_dim;
    const Weight kv_b(static_cast<std::size_t>(s.heads * head_rows * s.latent_dim), c.dtype, random);
    DeviceProblem device(context, s, in);
    cuda::DeviceBuffer weight = kv_b.upload(context);
    cuda::DeviceBuffer attn = context.allocate(static_cast<std::size_t>(s.heads * c.v_dim) * sizeof(float), "attn");
    const cuda::ValueRows rows{weight.data(), c.dtype, head_rows * s.latent_dim, c.nope * s.latent_dim, c.v_dim};
    REQUIRE(cuda::mla_expand_supports(s.heads, s.latent_dim, s.max_context, rows, attn.as<float>()));
    device.set_position(context, s.position);
    cuda::mla_decode_partials(device.q_latent.as<float>(), device.q_rope.as<float>(), s.heads, s.latent_dim,
                              s.rope_dim, device.latent_cache.data(), device.rope_cache.data(), s.cache_dtype,
                              device.position.as<std::int32_t>(), s.max_context, s.scale, device.workspace.data(),
                              context.stream());
    cuda::mla_expand_partials(device.workspace.data(), s.heads, s.latent_dim, s.max_context,
                              device.position.as<std::int32_t>(), rows, attn.as<float>(), context.stream());
    const std::vector<float> got = to_host<float>(context, attn, static_cast<std::size_t>(s.heads * c.v_dim));
    // The exact latent output through the exact value rows; the latent output's error bound through
    // the rows' magnitudes (the f32 products add far less).
    const Exact exact = exact_mla(one_token(s), in);
    std::vector<double> want(got.size()), magnitude(got.size());
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t j = 0; j < c.v_dim; ++j) {
        double sum = 0, bound = 0;
        for (std::int64_t k = 0; k < s.latent_dim; ++k) {
          const double w = kv_b.f32[static_cast<std::size_t>((h * head_rows + c.nope + j) * s.latent_dim + k)];
          sum += w * exact.out[static_cast<std::size_t>(h * s.latent_dim + k)];
          bound += std::fabs(w) * exact.magnitude[static_cast<std::size_t>(h * s.latent_dim + k)];
        }
        want[static_cast<std::size_t>(h * c.v_dim + j)] = sum;
        magnitude[static_cast<std::size_t>(h * c.v_dim + j)] = bound;
      }
    const Worst w = worst_error(got, want, magnitude);
    INFO("largest error at " << w.at << ": " << got[w.at] << " vs " << want[w.at] << ", ratio " << w.ratio);
    CHECK(w.ratio <= kTolerance);
    worst = std::max(worst, w.ratio);
    device.check_counters_zero(context);  // the decode launch without its combine leaves them alone
  }
  MESSAGE("mla_decode_partials + mla_expand_partials: largest error / magnitude " << worst);
}

#else  // built without the CUDA backend

TEST_CASE("cuda mla_decode: skipped, built without the CUDA backend") { MESSAGE("skipped: built without CUDA"); }

#endif
