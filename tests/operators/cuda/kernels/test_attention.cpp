// CUDA attention and KV-cache kernels (operators/cuda/kernels/attention.h, kv_cache.h, and rope.h's
// apply_rope_at) against the CPU kernels and a double-precision reference, on fresh random inputs.
// Cache rows past what a call may see hold NaN, so reading one shows. Without a GPU every GPU test
// says "skipped: no CUDA device" and returns; the size checks run everywhere.
//
// Tolerances (u = 2^-24, the f32 unit roundoff):
//   attention         |out - exact| <= 3e-5 * (1 + S) * sum_r p_r |v_r| for each element, with p the
//                     exact softmax weights of the query, v_r the value rows it sees and
//                     S = max_r |scale| * sum_d |q_d k_rd|, the largest magnitude rounding acts on in
//                     a score. An f32 dot product over d terms errs by ~sqrt(d) u S (d <= 1152:
//                     ~2e-6 S), moving the weights by as much relative; the softmax and value sums
//                     err by ~sqrt(keys) u (keys <= 6000: ~5e-6); expf by 2 ulps. An estimate of
//                     the typical largest error with margin, not a worst-case bound (those grow with
//                     d and keys, not their roots). Against the CPU kernel (f32 too): twice that.
//   apply_rope_at     bit-identical to apply_rope given the matching table rows (one kernel body),
//                     and to the CPU kernel.
//   write_cache_rows  exact into an f32 cache, cpu::f32_to_bf16's bits into a bf16 one; nothing
//                     outside cache rows [0, max_context) changes. widen_cache_rows: exact.
//   bf16 caches       the bounds above, against the references on the rounded values the cache
//                     holds: the kernels widen them exactly and compute in f32 (the bound of the
//                     rounding itself against f32 caches is tests/operators/cpu/kernels/test_attention.cpp's).
#include <doctest/doctest.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "operators/cpu/kernels/causal_attention.h"
#include "operators/cpu/kernels/rope.h"
#include "operators/cuda/kernels/attention.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/prefill_attention.h"
#include "operators/cuda/kernels/kv_cache.h"
#include "operators/cuda/kernels/rope.h"
#include "tests/attention_reference.h"
#include "tests/cuda_test_support.h"

namespace cpu = switchyard::cpu;
namespace cuda = switchyard::cuda;
namespace sy = switchyard;
using namespace switchyard::testing;

namespace {

constexpr sy::DType kF32 = sy::DType::f32, kBf16 = sy::DType::bf16;


// The workspace a call needs (an empty buffer when none).
cuda::DeviceBuffer workspace_for(cuda::DeviceContext& context, std::size_t bytes) {
  return bytes > 0 ? context.allocate(bytes, "the attention workspace") : cuda::DeviceBuffer();
}

// ---- GQA -------------------------------------------------------------------------------------------

struct GqaShape {
  std::int64_t tokens, heads, kv_heads, qk_dim, v_dim, position, max_context;
  float scale;
  sy::DType cache_dtype = kF32;
};

std::string describe(const GqaShape& s) {
  std::ostringstream out;
  out << "gqa: tokens " << s.tokens << ", heads " << s.heads << " / kv " << s.kv_heads << ", qk " << s.qk_dim
      << ", v " << s.v_dim << ", position " << s.position << ", max_context " << s.max_context << ", scale "
      << s.scale << ", " << sy::dtype_name(s.cache_dtype) << " cache";
  return out.str();
}

Exact exact_gqa(const GqaShape& s, const std::vector<float>& q, const std::vector<float>& k,
                const std::vector<float>& v, std::int64_t max_visible = std::numeric_limits<std::int64_t>::max()) {
  const std::int64_t group = s.heads / s.kv_heads;
  return exact_attention(
      s.tokens, s.heads, s.v_dim, s.position,
      [&](std::int64_t t, std::int64_t h, std::int64_t r, double& magnitude) {
        const float* qr = q.data() + (t * s.heads + h) * s.qk_dim;
        const float* kr = k.data() + (r * s.kv_heads + h / group) * s.qk_dim;
        double dot = 0, absolute = 0;
        for (std::int64_t i = 0; i < s.qk_dim; ++i) {
          dot += static_cast<double>(qr[i]) * kr[i];
          absolute += std::fabs(static_cast<double>(qr[i]) * kr[i]);
        }
        magnitude = std::fabs(s.scale) * absolute;
        return s.scale * dot;
      },
      [&](std::int64_t h, std::int64_t r) { return v.data() + (r * s.kv_heads + h / group) * s.v_dim; }, max_visible);
}

// Which GPU kernel a GQA problem goes through: gqa_attention (position on the device) or
// prefill_attention (position on the host, cuBLAS).
enum class GqaPath { kernels, prefill };

// One GQA problem on fresh inputs, rows past the visible ones NaN; returns the largest error ratio.
// Prefill with a bf16 cache reads the widened copy of its visible rows (widen_cache_rows), as the
// operator does.
double check_gqa(cuda::DeviceContext& context, const GqaShape& s, std::mt19937& random,
                 GqaPath path = GqaPath::kernels) {
  INFO((path == GqaPath::prefill ? "prefill_attention, " : "gqa_attention, ") << describe(s));
  const std::int64_t visible = s.position + s.tokens;
  const std::vector<float> q = uniform(static_cast<std::size_t>(s.tokens * s.heads * s.qk_dim), -1, 1, random);
  std::vector<float> k = cache_with_garbage(s.max_context, s.kv_heads * s.qk_dim, visible, random);
  std::vector<float> v = cache_with_garbage(s.max_context, s.kv_heads * s.v_dim, visible, random);
  cuda::DeviceBuffer q_device = to_device(context, q), k_device = cache_to_device(context, k, s.cache_dtype),
                     v_device = cache_to_device(context, v, s.cache_dtype);
  const std::size_t out_count = static_cast<std::size_t>(s.tokens * s.heads * s.v_dim);
  cuda::DeviceBuffer out = context.allocate(out_count * sizeof(float), "out");
  if (path == GqaPath::kernels) {
    const std::vector<std::int32_t> position{static_cast<std::int32_t>(s.position)};
    cuda::DeviceBuffer position_device = to_device(context, position);
    cuda::DeviceBuffer workspace =
        workspace_for(context, cuda::gqa_attention_workspace_bytes(s.tokens, s.heads, s.v_dim, s.max_context));
    cuda::gqa_attention(q_device.as<float>(), s.tokens, s.heads, s.qk_dim, s.v_dim, k_device.data(),
                        v_device.data(), s.cache_dtype, s.kv_heads, position_device.as<std::int32_t>(), s.max_context,
                        s.scale, out.as<float>(), workspace.data(), context.stream());
    context.synchronize();  // before position_device and the workspace go
  } else {
    const std::size_t bytes = cuda::prefill_attention_workspace_bytes(s.tokens, s.heads, s.position);
    cuda::DeviceBuffer workspace = context.allocate(bytes, "the scores");
    cuda::DeviceBuffer k_f32, v_f32;  // a bf16 cache's visible rows, widened
    const float* k_rows = k_device.as<float>();
    const float* v_rows = v_device.as<float>();
    if (s.cache_dtype == kBf16) {
      k_f32 = context.allocate(static_cast<std::size_t>(visible * s.kv_heads * s.qk_dim) * sizeof(float), "keys");
      v_f32 = context.allocate(static_cast<std::size_t>(visible * s.kv_heads * s.v_dim) * sizeof(float), "values");
      const cudaStream_t stream = context.stream();
      cuda::widen_cache_rows(k_device.data(), kBf16, visible, s.kv_heads * s.qk_dim, k_f32.as<float>(), stream);
      cuda::widen_cache_rows(v_device.data(), kBf16, visible, s.kv_heads * s.v_dim, v_f32.as<float>(), stream);
      k_rows = k_f32.as<float>();
      v_rows = v_f32.as<float>();
    }
    cuda::prefill_attention(context, q_device.as<float>(), s.tokens, s.heads, s.qk_dim, s.v_dim, k_rows, v_rows,
                            s.kv_heads, s.position, s.scale, out.as<float>(), workspace.data(), bytes);
    context.synchronize();
  }
  const std::vector<float> got = to_host<float>(context, out, out_count);
  const Exact exact = exact_gqa(s, q, k, v);
  if (s.qk_dim != s.v_dim) return check_against(got, exact, nullptr, s.heads, s.v_dim);
  std::vector<float> cpu_out(out_count);
  cpu::gqa_attention(q.data(), s.tokens, s.heads, s.qk_dim, k.data(), v.data(), kF32, s.kv_heads, s.position,
                     s.scale, cpu_out.data());
  return check_against(got, exact, &cpu_out, s.heads, s.v_dim);
}

// Every shape through `path`, scales drawn where 0; the largest error ratio.
double check_gqa_shapes(cuda::DeviceContext& context, std::vector<GqaShape> shapes, std::mt19937& random,
                        GqaPath path) {
  double worst = 0;
  for (GqaShape& s : shapes) {
    if (s.scale == 0) s.scale = draw_scale(s.qk_dim, random);
    worst = std::max(worst, check_gqa(context, s, random, path));
  }
  return worst;
}

// ---- MLA -------------------------------------------------------------------------------------------

// Runs mla_attention on device copies of `in` (caches in s.cache_dtype: a bf16 cache's values are
// rounded in `in` too), with the position at position_device.
std::vector<float> mla_on_gpu(cuda::DeviceContext& context, const MlaShape& s, MlaInputs& in) {
  const std::vector<std::int32_t> position{static_cast<std::int32_t>(s.position)};
  // An empty rope part still gets a (never read) buffer.
  std::vector<float> one{1.0f};
  cuda::DeviceBuffer q_latent = to_device(context, in.q_latent),
                     q_rope = to_device(context, in.q_rope.empty() ? one : in.q_rope),
                     latent_cache = cache_to_device(context, in.latent_cache, s.cache_dtype),
                     rope_cache = cache_to_device(context, in.rope_cache.empty() ? one : in.rope_cache, s.cache_dtype),
                     position_device = to_device(context, position);
  const std::size_t out_count = static_cast<std::size_t>(s.tokens * s.heads * s.latent_dim);
  cuda::DeviceBuffer out = context.allocate(out_count * sizeof(float), "out");
  cuda::DeviceBuffer workspace =
      workspace_for(context, cuda::mla_attention_workspace_bytes(s.tokens, s.heads, s.latent_dim, s.max_context));
  cuda::mla_attention(q_latent.as<float>(), q_rope.as<float>(), s.tokens, s.heads, s.latent_dim, s.rope_dim,
                      latent_cache.data(), rope_cache.data(), s.cache_dtype, position_device.as<std::int32_t>(),
                      s.max_context, s.scale, out.as<float>(), workspace.data(), context.stream());
  return to_host<float>(context, out, out_count);
}

double check_mla(cuda::DeviceContext& context, const MlaShape& s, std::mt19937& random) {
  INFO(describe(s));
  const std::int64_t visible = s.position + s.tokens;
  MlaInputs in;
  in.q_latent = uniform(static_cast<std::size_t>(s.tokens * s.heads * s.latent_dim), -1, 1, random);
  in.q_rope = uniform(static_cast<std::size_t>(s.tokens * s.heads * s.rope_dim), -1, 1, random);
  in.latent_cache = cache_with_garbage(s.max_context, s.latent_dim, visible, random);
  in.rope_cache = cache_with_garbage(s.max_context, s.rope_dim, visible, random);
  const std::vector<float> got = mla_on_gpu(context, s, in);
  const std::vector<float> cpu_out = mla_on_cpu(s, in);
  return check_against(got, exact_mla(s, in), &cpu_out, s.heads, s.latent_dim);
}

}  // namespace

TEST_CASE("cuda attention: bad sizes throw std::invalid_argument before touching the GPU") {
  // Never dereferenced: every call below throws before launching anything.
  const std::int32_t dummy = 0;
  const std::int32_t* position = &dummy;
  const auto half = switchyard::RopeLayout::half_split;
  using std::invalid_argument;
  // gqa_attention(q, tokens, heads, qk, v, k, v, cache dtype, kv_heads, position, max_context, scale, out, ws,
  //               stream)
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 0, 128, nullptr, nullptr, kF32, 2, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 513, 128, nullptr, nullptr, kF32, 2, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 128, 0, nullptr, nullptr, kF32, 2, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 128, 600, nullptr, nullptr, kF32, 2, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 128, 128, nullptr, nullptr, kF32, 3, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 128, 128, nullptr, nullptr, kF32, 0, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 0, 128, 128, nullptr, nullptr, kF32, 1, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, -1, 8, 128, 128, nullptr, nullptr, kF32, 2, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 128, 128, nullptr, nullptr, kF32, 2, position, 0, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 128, 128, nullptr, nullptr, kF32, 2, nullptr, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  // Decode over a long cache needs a workspace.
  REQUIRE(cuda::gqa_attention_workspace_bytes(1, 8, 128, 4096) > 0);
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 128, 128, nullptr, nullptr, kF32, 2, position, 4096, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention_workspace_bytes(-1, 8, 128, 4096), invalid_argument);
  CHECK_THROWS_AS(cuda::gqa_attention_workspace_bytes(1, 8, 128, -4096), invalid_argument);
  CHECK(cuda::gqa_attention_workspace_bytes(0, 8, 128, 4096) == 0);

  // mla_attention(q_latent, q_rope, tokens, heads, latent, rope, latent_cache, rope_cache, cache dtype,
  //               position, max_context, scale, out, ws, stream)
  CHECK_THROWS_AS(cuda::mla_attention(nullptr, nullptr, 1, 16, 0, 64, nullptr, nullptr, kF32, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_attention(nullptr, nullptr, 1, 16, 1025, 64, nullptr, nullptr, kF32, position, 64, 1,
                                      nullptr, nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_attention(nullptr, nullptr, 1, 16, 512, -1, nullptr, nullptr, kF32, position, 64, 1,
                                      nullptr, nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_attention(nullptr, nullptr, 1, 16, 512, 129, nullptr, nullptr, kF32, position, 64, 1,
                                      nullptr, nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_attention(nullptr, nullptr, 1, 0, 512, 64, nullptr, nullptr, kF32, position, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_attention(nullptr, nullptr, 1, 16, 512, 64, nullptr, nullptr, kF32, nullptr, 64, 1, nullptr,
                                      nullptr, nullptr),
                  invalid_argument);
  REQUIRE(cuda::mla_attention_workspace_bytes(1, 16, 512, 4096) > 0);
  CHECK_THROWS_AS(cuda::mla_attention(nullptr, nullptr, 1, 16, 512, 64, nullptr, nullptr, kF32, position, 4096, 1,
                                      nullptr, nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_attention_workspace_bytes(1, -16, 512, 4096), invalid_argument);

  // Caches are f32 or bf16.
  CHECK_THROWS_AS(cuda::gqa_attention(nullptr, 1, 8, 128, 128, nullptr, nullptr, sy::DType::f16, 2, position, 64, 1,
                                      nullptr, nullptr, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::mla_attention(nullptr, nullptr, 1, 16, 512, 64, nullptr, nullptr, sy::DType::f16, position, 64,
                                      1, nullptr, nullptr, nullptr),
                  invalid_argument);

  // write_cache_rows(cache, cache dtype, width, source, source_stride, tokens, position, max_context, stream)
  CHECK_THROWS_AS(cuda::write_cache_rows(nullptr, kF32, 0, nullptr, 0, 1, position, 64, nullptr), invalid_argument);
  CHECK_THROWS_AS(cuda::write_cache_rows(nullptr, kF32, 8, nullptr, 8, -1, position, 64, nullptr), invalid_argument);
  CHECK_THROWS_AS(cuda::write_cache_rows(nullptr, kF32, 8, nullptr, 8, 1, nullptr, 64, nullptr), invalid_argument);
  CHECK_THROWS_AS(cuda::write_cache_rows(nullptr, sy::DType::f16, 8, nullptr, 8, 1, position, 64, nullptr),
                  invalid_argument);
  // widen_cache_rows(cache, cache dtype, rows, width, out, stream)
  CHECK_THROWS_AS(cuda::widen_cache_rows(nullptr, kBf16, -1, 8, nullptr, nullptr), invalid_argument);
  CHECK_THROWS_AS(cuda::widen_cache_rows(nullptr, kBf16, 4, 8, nullptr, nullptr), invalid_argument);
  CHECK_THROWS_AS(cuda::widen_cache_rows(&dummy, sy::DType::f16, 1, 1, nullptr, nullptr), invalid_argument);
  CHECK_NOTHROW(cuda::widen_cache_rows(nullptr, kBf16, 0, 8, nullptr, nullptr));  // nothing to widen
  CHECK_THROWS_AS(cuda::apply_rope_at(nullptr, 1, 1, 8, 8, 7, nullptr, nullptr, position, half, nullptr),
                  invalid_argument);
  CHECK_THROWS_AS(cuda::apply_rope_at(nullptr, 1, 1, 8, 8, 8, nullptr, nullptr, nullptr, half, nullptr),
                  invalid_argument);
}

TEST_CASE("cuda attention: gqa_attention matches the CPU kernel and the exact result on random shapes") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::vector<GqaShape> shapes = {
      // tokens, heads, kv_heads, qk, v, position, max_context, scale (0: drawn)
      {1, 32, 4, 128, 128, draw(0, 5000, random), 8192, 0},      // Qwen3-30B-A3B decode
      {1, 32, 8, 128, 128, draw(2000, 4000, random), 16384, 0},  // Mixtral decode, a long empty cache
      {1, 64, 4, 128, 128, draw(0, 300, random), 4096, 0},       // Qwen3-235B decode: 16 heads a kv head
      {300, 16, 16, 192, 128, 0, 4096, 0},     // DeepSeek MLA prefill on decompressed K/V: one split
      {200, 16, 16, 192, 128, 300, 2048, 0},   // the same after a prompt, several splits
      {150, 8, 2, 128, 128, 500, 1024, 0},     // GQA prefill after a prompt
      {3, 4, 2, 256, 256, draw(0, 900, random), 1000, 0},
      {2, 6, 3, 512, 512, draw(0, 500, random), 600, 0},  // the largest widths
      {1, 4, 4, 1, 1, draw(0, 100, random), 200, 0},      // the smallest
      {5, 3, 1, 7, 13, 0, 5, 0},                          // the cache exactly full
  };
  for (int round = 0; round < 40; ++round) {
    GqaShape s{};
    s.kv_heads = draw(1, 4, random);
    s.heads = s.kv_heads * std::vector<std::int64_t>{1, 2, 3, 4, 5, 8}[draw(0, 5, random)];
    s.qk_dim = draw(1, 300, random);
    s.v_dim = round % 3 == 0 ? draw(1, 300, random) : s.qk_dim;
    s.tokens = round % 2 == 0 ? 1 : draw(2, 40, random);
    s.position = draw(0, round % 4 < 2 ? 2000 : 70, random);
    s.max_context = s.position + s.tokens + (round % 5 == 0 ? 0 : draw(0, 5000, random));
    shapes.push_back(s);
  }
  MESSAGE("gqa_attention: largest error / magnitude "
          << check_gqa_shapes(context, std::move(shapes), random, GqaPath::kernels));
}

TEST_CASE("cuda attention: prefill_attention matches the CPU kernel and the exact result, in chunks too") {
  // Argument checks, before any GPU work.
  CHECK_THROWS_AS(cuda::prefill_attention_workspace_bytes(0, 8, 0), std::invalid_argument);
  CHECK_THROWS_AS(cuda::prefill_attention_workspace_bytes(4, 8, -1), std::invalid_argument);
  // One chunk: heads * tokens * context floats; more than the budget: chunks of whole queries.
  CHECK(cuda::prefill_attention_workspace_bytes(512, 16, 0) == 16u * 512 * 512 * 4);
  const std::size_t per_query = 8u * 8192 * 4;
  CHECK(cuda::prefill_attention_workspace_bytes(1192, 8, 7000) == cuda::kPrefillScoreBytes / per_query * per_query);
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  {
    float dummy = 0;
    std::vector<float> room(64);
    CHECK_THROWS_AS(cuda::prefill_attention(context, &dummy, 2, 6, 8, 8, &dummy, &dummy, 4, 0, 1, &dummy, room.data(),
                                            room.size() * 4),
                    std::invalid_argument);  // 6 heads over 4 kv heads
    CHECK_THROWS_AS(cuda::prefill_attention(context, &dummy, 2, 4, 8, 8, &dummy, &dummy, 4, 0, 1, &dummy, room.data(),
                                            8),
                    std::invalid_argument);  // a small workspace
  }
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::vector<GqaShape> shapes = {
      // tokens, heads, kv_heads, qk, v, position, max_context, scale (0: drawn)
      {300, 16, 16, 192, 128, 0, 300, 0},     // DeepSeek MLA prefill on decompressed K/V
      {200, 16, 16, 192, 128, 300, 600, 0},   // the same after a prompt
      {150, 8, 2, 128, 128, 500, 1024, 0},    // GQA prefill after a prompt, garbage rows past it
      {1192, 8, 4, 8, 8, 7000, 8192, 0},      // scores beyond the budget: five chunks
      {2, 3, 1, 5, 7, 0, 2, 0},               // the smallest prompt
  };
  for (int round = 0; round < 12; ++round) {
    GqaShape s{};
    s.kv_heads = draw(1, 4, random);
    s.heads = s.kv_heads * std::vector<std::int64_t>{1, 2, 3, 4, 8}[draw(0, 4, random)];
    s.qk_dim = draw(1, 200, random);
    s.v_dim = round % 3 == 0 ? draw(1, 200, random) : s.qk_dim;
    s.tokens = draw(2, 120, random);
    s.position = round % 2 ? draw(0, 700, random) : 0;
    s.max_context = s.position + s.tokens + draw(0, 50, random);
    shapes.push_back(s);
  }
  MESSAGE("prefill_attention: largest error / magnitude "
          << check_gqa_shapes(context, std::move(shapes), random, GqaPath::prefill));
}

TEST_CASE("cuda attention: mla_attention matches the CPU kernel and the exact result on random shapes") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::vector<MlaShape> shapes = {
      // tokens, heads, latent, rope, position, max_context, scale (0: drawn)
      {1, 128, 512, 64, draw(500, 1500, random), 4096, 0},  // DeepSeek-V3 decode
      {1, 16, 512, 64, draw(3000, 5000, random), 16384, 0},  // DeepSeek-V2-Lite decode, a long empty cache
      {64, 16, 512, 64, 100, 1024, 0},                       // V2-Lite prefill after a prompt
      {5, 4, 32, 16, 10, 64, 0},                             // a tiny test model
      {2, 16, 1024, 128, draw(0, 300, random), 400, 0},      // the largest widths
      {3, 5, 30, 0, draw(0, 100, random), 150, 0},           // no rope part
      {300, 16, 64, 16, 0, 300, 0},                          // the cache exactly full, one split
  };
  for (int round = 0; round < 24; ++round) {
    MlaShape s{};
    s.heads = draw(1, 40, random);
    s.latent_dim = draw(1, 700, random);
    s.rope_dim = draw(0, 100, random);
    s.tokens = round % 2 == 0 ? 1 : draw(2, 20, random);
    s.position = draw(0, round % 4 < 2 ? 3000 : 70, random);
    s.max_context = s.position + s.tokens + (round % 5 == 0 ? 0 : draw(0, 5000, random));
    shapes.push_back(s);
  }
  double worst = 0;
  for (MlaShape& s : shapes) {
    if (s.scale == 0) s.scale = draw_scale(s.latent_dim + s.rope_dim, random);
    worst = std::max(worst, check_mla(context, s, random));
  }
  MESSAGE("mla_attention: largest error / magnitude " << worst);
}

TEST_CASE("cuda attention: bf16 caches (kernels, prefill on widened rows) match the references on their values") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::vector<GqaShape> decode = {
      // tokens, heads, kv_heads, qk, v, position, max_context, scale (0: drawn), cache dtype
      {1, 32, 4, 128, 128, draw(0, 5000, random), 8192, 0, kBf16},  // Qwen3-30B-A3B decode
      {1, 32, 8, 128, 128, draw(2000, 4000, random), 16384, 0, kBf16},  // Mixtral decode
      {3, 4, 2, 256, 256, draw(0, 900, random), 1000, 0, kBf16},
      {1, 4, 4, 1, 1, draw(0, 100, random), 200, 0, kBf16},  // the smallest: scalar loads
      {5, 3, 1, 7, 13, 0, 5, 0, kBf16},                      // odd widths, the cache exactly full
  };
  std::vector<GqaShape> prefill = {
      {300, 16, 16, 192, 128, 0, 300, 0, kBf16},    // DeepSeek MLA prefill on decompressed K/V
      {150, 8, 2, 128, 128, 500, 1024, 0, kBf16},   // GQA prefill after a prompt
      {2, 3, 1, 5, 7, 0, 2, 0, kBf16},
  };
  for (int round = 0; round < 16; ++round) {
    GqaShape s{};
    s.cache_dtype = kBf16;
    s.kv_heads = draw(1, 4, random);
    s.heads = s.kv_heads * std::vector<std::int64_t>{1, 2, 4, 8}[draw(0, 3, random)];
    s.qk_dim = draw(1, 300, random);
    s.v_dim = round % 3 == 0 ? draw(1, 300, random) : s.qk_dim;
    s.tokens = round % 2 == 0 ? 1 : draw(2, 40, random);
    s.position = draw(0, 2000, random);
    s.max_context = s.position + s.tokens + draw(0, 3000, random);
    (round % 4 == 3 ? prefill : decode).push_back(s);
  }
  MESSAGE("gqa_attention, bf16 caches: largest error / magnitude "
          << check_gqa_shapes(context, std::move(decode), random, GqaPath::kernels));
  MESSAGE("prefill_attention on widened bf16 rows: largest error / magnitude "
          << check_gqa_shapes(context, std::move(prefill), random, GqaPath::prefill));
  std::vector<MlaShape> mla = {
      {1, 128, 512, 64, draw(500, 1500, random), 4096, 0, kBf16},  // DeepSeek-V3 decode
      {64, 16, 512, 64, 100, 1024, 0, kBf16},                      // V2-Lite prefill after a prompt
      {3, 5, 30, 0, draw(0, 100, random), 150, 0, kBf16},          // no rope part, odd latent
  };
  for (int round = 0; round < 12; ++round)
    mla.push_back({round % 2 == 0 ? 1 : draw(2, 20, random), draw(1, 40, random), draw(1, 700, random),
                   draw(0, 100, random), draw(0, 3000, random), 0, 0, kBf16});
  double worst = 0;
  for (MlaShape& s : mla) {
    if (s.max_context == 0) s.max_context = s.position + s.tokens + draw(0, 2000, random);
    s.scale = draw_scale(s.latent_dim + s.rope_dim, random);
    worst = std::max(worst, check_mla(context, s, random));
  }
  MESSAGE("mla_attention, bf16 caches: largest error / magnitude " << worst);
}

TEST_CASE("cuda attention: decode at many positions over one cache, rows past the visible ones ignored") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::int64_t max_context = 4000;
  // Split and tile boundaries (32-key tiles and splits of 32 keys or more; one split up to 32 keys)
  // and the ends; descending, so that each position can turn the rows past it into NaN for good.
  const std::vector<std::int64_t> positions = {3999, 2047, 1000, 129, 128, 127, 65, 64, 63, 33, 32, 31, 2, 1, 0};
  for (const sy::DType dtype : {kF32, kBf16}) {
    INFO(sy::dtype_name(dtype) << " caches");
    const std::size_t element = dtype == kF32 ? 4 : 2;
    double worst = 0;
    GqaShape g{1, 12, 3, 96, 96, 0, max_context, draw_scale(96, random), dtype};
    std::vector<float> k = uniform(static_cast<std::size_t>(max_context * g.kv_heads * g.qk_dim), -1, 1, random);
    std::vector<float> v = uniform(k.size(), -1, 1, random);
    cuda::DeviceBuffer k_device = cache_to_device(context, k, dtype), v_device = cache_to_device(context, v, dtype);
    MlaShape m{1, 16, 512, 64, 0, max_context, draw_scale(576, random), dtype};
    MlaInputs in;
    in.latent_cache = uniform(static_cast<std::size_t>(max_context * m.latent_dim), -1, 1, random);
    in.rope_cache = uniform(static_cast<std::size_t>(max_context * m.rope_dim), -1, 1, random);
    cuda::DeviceBuffer latent_device = cache_to_device(context, in.latent_cache, dtype),
                       rope_device = cache_to_device(context, in.rope_cache, dtype);
    cuda::DeviceBuffer position_device = context.allocate(sizeof(std::int32_t), "position");
    cuda::DeviceBuffer gqa_workspace =
        workspace_for(context, cuda::gqa_attention_workspace_bytes(1, g.heads, g.v_dim, max_context));
    cuda::DeviceBuffer mla_workspace =
        workspace_for(context, cuda::mla_attention_workspace_bytes(1, m.heads, m.latent_dim, max_context));
    cuda::DeviceBuffer gqa_out = context.allocate(g.heads * g.v_dim * sizeof(float), "gqa out");
    cuda::DeviceBuffer mla_out = context.allocate(m.heads * m.latent_dim * sizeof(float), "mla out");

    for (const std::int64_t p : positions) {
      INFO("position " << p);
      // Rows past p become NaN (0xff bytes, in f32 and in bf16) on the device; the host copies keep
      // their values.
      const std::int64_t past = max_context - p - 1;
      const auto poison = [&](cuda::DeviceBuffer& cache, std::int64_t width) {
        REQUIRE(cudaMemsetAsync(cache.as<char>() + (p + 1) * width * element, 0xff, past * width * element,
                                context.stream()) == cudaSuccess);
      };
      poison(k_device, g.kv_heads * g.qk_dim);
      poison(v_device, g.kv_heads * g.v_dim);
      poison(latent_device, m.latent_dim);
      poison(rope_device, m.rope_dim);
      const std::int32_t p32 = static_cast<std::int32_t>(p);
      context.copy_to_device(position_device.data(), &p32, sizeof p32);

      g.position = p;
      const std::vector<float> q = uniform(static_cast<std::size_t>(g.heads * g.qk_dim), -1, 1, random);
      cuda::DeviceBuffer q_device = to_device(context, q);
      cuda::gqa_attention(q_device.as<float>(), 1, g.heads, g.qk_dim, g.v_dim, k_device.data(), v_device.data(), dtype,
                          g.kv_heads, position_device.as<std::int32_t>(), max_context, g.scale, gqa_out.as<float>(),
                          gqa_workspace.data(), context.stream());
      const std::vector<float> gqa_got = to_host<float>(context, gqa_out, static_cast<std::size_t>(g.heads * g.v_dim));
      std::vector<float> gqa_cpu(gqa_got.size());
      cpu::gqa_attention(q.data(), 1, g.heads, g.qk_dim, k.data(), v.data(), kF32, g.kv_heads, p, g.scale,
                         gqa_cpu.data());
      {
        INFO(describe(g));
        worst = std::max(worst, check_against(gqa_got, exact_gqa(g, q, k, v), &gqa_cpu, g.heads, g.v_dim));
      }

      m.position = p;
      in.q_latent = uniform(static_cast<std::size_t>(m.heads * m.latent_dim), -1, 1, random);
      in.q_rope = uniform(static_cast<std::size_t>(m.heads * m.rope_dim), -1, 1, random);
      cuda::DeviceBuffer q_latent = to_device(context, in.q_latent), q_rope = to_device(context, in.q_rope);
      cuda::mla_attention(q_latent.as<float>(), q_rope.as<float>(), 1, m.heads, m.latent_dim, m.rope_dim,
                          latent_device.data(), rope_device.data(), dtype, position_device.as<std::int32_t>(),
                          max_context, m.scale, mla_out.as<float>(), mla_workspace.data(), context.stream());
      const std::vector<float> mla_got = to_host<float>(context, mla_out, in.q_latent.size());
      const std::vector<float> mla_cpu = mla_on_cpu(m, in);
      INFO(describe(m));
      worst = std::max(worst, check_against(mla_got, exact_mla(m, in), &mla_cpu, m.heads, m.latent_dim));
    }
    MESSAGE("decode at many positions, " << sy::dtype_name(dtype) << " caches: largest error / magnitude " << worst);
  }
}

TEST_CASE("cuda attention: positions outside the cache read nothing outside it") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  GqaShape s{2, 4, 2, 32, 32, 0, 100, 0.2f};
  const std::vector<float> q = uniform(static_cast<std::size_t>(s.tokens * s.heads * s.qk_dim), -1, 1, random);
  const std::vector<float> k = uniform(static_cast<std::size_t>(s.max_context * s.kv_heads * s.qk_dim), -1, 1, random);
  const std::vector<float> v = uniform(k.size(), -1, 1, random);
  cuda::DeviceBuffer q_device = to_device(context, q), k_device = to_device(context, k),
                     v_device = to_device(context, v);
  cuda::DeviceBuffer position_device = context.allocate(sizeof(std::int32_t), "position");
  cuda::DeviceBuffer workspace =
      workspace_for(context, cuda::gqa_attention_workspace_bytes(s.tokens, s.heads, s.v_dim, s.max_context));
  const std::size_t out_count = static_cast<std::size_t>(s.tokens * s.heads * s.v_dim);
  cuda::DeviceBuffer out = context.allocate(out_count * sizeof(float), "out");
  const auto run = [&](std::int32_t p) {
    context.copy_to_device(position_device.data(), &p, sizeof p);
    cuda::gqa_attention(q_device.as<float>(), s.tokens, s.heads, s.qk_dim, s.v_dim, k_device.as<float>(),
                        v_device.as<float>(), kF32, s.kv_heads, position_device.as<std::int32_t>(), s.max_context,
                        s.scale, out.as<float>(), workspace.data(), context.stream());
    return to_host<float>(context, out, out_count);
  };
  // Past the end: every token sees the whole cache (clamped), nothing beyond it.
  for (const std::int32_t p : {130, std::numeric_limits<std::int32_t>::max() - 1}) {
    INFO("position " << p);
    s.position = p;
    check_against(run(p), exact_gqa(s, q, k, v, s.max_context), nullptr, s.heads, s.v_dim);
  }
  // Before the start: a token that sees no row gets NaN.
  const std::vector<float> none = run(-50);
  CHECK(std::all_of(none.begin(), none.end(), [](float x) { return std::isnan(x); }));
}

TEST_CASE("cuda attention: a captured decode step replays at a new position (rope, cache writes, GQA, MLA)") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const cudaStream_t stream = context.stream();
  const std::int64_t max_context = 5000;
  const std::int32_t first_run = static_cast<std::int32_t>(draw(0, 200, random));
  const std::int32_t second_run = static_cast<std::int32_t>(draw(1000, max_context - 1, random));
  const std::int32_t positions[2] = {first_run, second_run};
  INFO("positions " << first_run << " then " << second_run);
  cuda::DeviceBuffer position_device = context.allocate(sizeof(std::int32_t), "position");

  SUBCASE("GQA: rope at the position, both cache rows written, attention; f32 and bf16 caches") {
    for (const sy::DType dtype : {kF32, kBf16}) {
      INFO(sy::dtype_name(dtype) << " caches");
      const std::size_t element = dtype == kF32 ? 4 : 2;
      GqaShape s{1, 8, 2, 64, 64, 0, max_context, draw_scale(64, random), dtype};
      const std::int64_t kv_width = s.kv_heads * s.qk_dim, half = s.qk_dim / 2;
      std::vector<float> cos(static_cast<std::size_t>(max_context * half)), sin(cos.size());
      switchyard::rope_cos_sin(switchyard::rope_frequencies_default(static_cast<int>(s.qk_dim), 1e6), 0, max_context, cos.data(),
                        sin.data());
      // Rows up to the second position drawn (the first run writes one of them), NaN past it.
      std::vector<float> k_cache = cache_with_garbage(max_context, kv_width, second_run + 1, random);
      std::vector<float> v_cache = cache_with_garbage(max_context, kv_width, second_run + 1, random);
      cuda::DeviceBuffer cos_device = to_device(context, cos), sin_device = to_device(context, sin);
      cuda::DeviceBuffer k_device = cache_to_device(context, k_cache, dtype),
                         v_device = cache_to_device(context, v_cache, dtype);
      cuda::DeviceBuffer q_device = context.allocate(s.heads * s.qk_dim * sizeof(float), "q");
      cuda::DeviceBuffer k_new = context.allocate(kv_width * sizeof(float), "k");
      cuda::DeviceBuffer v_new = context.allocate(kv_width * sizeof(float), "v");
      cuda::DeviceBuffer out = context.allocate(s.heads * s.v_dim * sizeof(float), "out");
      cuda::DeviceBuffer direct_out = context.allocate(s.heads * s.v_dim * sizeof(float), "out");
      const std::size_t workspace_bytes = cuda::gqa_attention_workspace_bytes(1, s.heads, s.v_dim, max_context);
      REQUIRE(workspace_bytes > 0);  // the graph holds the combine kernel too
      cuda::DeviceBuffer workspace = workspace_for(context, workspace_bytes);
      const auto layout = switchyard::RopeLayout::half_split;
      const int rope_dim = static_cast<int>(s.qk_dim);
      const auto* position = position_device.as<std::int32_t>();

      CapturedGraph graph(stream, [&] {
        cuda::apply_rope_at(q_device.as<float>(), 1, s.heads, s.heads * s.qk_dim, s.qk_dim, rope_dim,
                            cos_device.as<float>(), sin_device.as<float>(), position, layout, stream);
        cuda::apply_rope_at(k_new.as<float>(), 1, s.kv_heads, kv_width, s.qk_dim, rope_dim, cos_device.as<float>(),
                            sin_device.as<float>(), position, layout, stream);
        cuda::write_cache_rows(k_device.data(), dtype, kv_width, k_new.as<float>(), kv_width, 1, position, max_context,
                               stream);
        cuda::write_cache_rows(v_device.data(), dtype, kv_width, v_new.as<float>(), kv_width, 1, position, max_context,
                               stream);
        cuda::gqa_attention(q_device.as<float>(), 1, s.heads, s.qk_dim, s.v_dim, k_device.data(), v_device.data(),
                            dtype, s.kv_heads, position, max_context, s.scale, out.as<float>(), workspace.data(),
                            stream);
      });
      for (const std::int32_t p : positions) {
        INFO("replay at position " << p);
        s.position = p;
        std::vector<float> q = uniform(static_cast<std::size_t>(s.heads * s.qk_dim), -1, 1, random);
        std::vector<float> k = uniform(static_cast<std::size_t>(kv_width), -1, 1, random);
        std::vector<float> v = uniform(static_cast<std::size_t>(kv_width), -1, 1, random);
        context.copy_to_device(q_device.data(), q.data(), q.size() * sizeof(float));
        context.copy_to_device(k_new.data(), k.data(), k.size() * sizeof(float));
        context.copy_to_device(v_new.data(), v.data(), v.size() * sizeof(float));
        context.copy_to_device(position_device.data(), &p, sizeof p);
        graph.launch(stream);
        const std::vector<float> got = to_host<float>(context, out, static_cast<std::size_t>(s.heads * s.v_dim));

        // The CPU's step: the same rotation (bit-identical), the rows written (rounded as the cache
        // holds them), attention.
        cpu::apply_rope(q.data(), 1, s.heads, s.heads * s.qk_dim, s.qk_dim, rope_dim, cos.data() + p * half,
                        sin.data() + p * half, layout);
        cpu::apply_rope(k.data(), 1, s.kv_heads, kv_width, s.qk_dim, rope_dim, cos.data() + p * half,
                        sin.data() + p * half, layout);
        std::vector<unsigned char> k_bytes(k.size() * element), v_bytes(v.size() * element);
        if (dtype == kBf16) {
          const std::vector<std::uint16_t> k16 = round_to_bf16(k), v16 = round_to_bf16(v);
          std::memcpy(k_bytes.data(), k16.data(), k_bytes.size());
          std::memcpy(v_bytes.data(), v16.data(), v_bytes.size());
        } else {
          std::memcpy(k_bytes.data(), k.data(), k_bytes.size());
          std::memcpy(v_bytes.data(), v.data(), v_bytes.size());
        }
        std::copy(k.begin(), k.end(), k_cache.begin() + p * kv_width);
        std::copy(v.begin(), v.end(), v_cache.begin() + p * kv_width);
        const std::vector<unsigned char> k_row =
            to_host<unsigned char>(context, k_device.as<char>() + p * kv_width * element, k_bytes.size());
        const std::vector<unsigned char> v_row =
            to_host<unsigned char>(context, v_device.as<char>() + p * kv_width * element, v_bytes.size());
        CHECK(k_row == k_bytes);
        CHECK(v_row == v_bytes);
        std::vector<float> cpu_out(got.size());
        cpu::gqa_attention(q.data(), 1, s.heads, s.qk_dim, k_cache.data(), v_cache.data(), kF32, s.kv_heads, p,
                           s.scale, cpu_out.data());
        check_against(got, exact_gqa(s, q, k_cache, v_cache), &cpu_out, s.heads, s.v_dim);

        // A direct call on what the graph left behind (rotated q, written cache) gives the same bits.
        cuda::gqa_attention(q_device.as<float>(), 1, s.heads, s.qk_dim, s.v_dim, k_device.data(), v_device.data(),
                            dtype, s.kv_heads, position, max_context, s.scale, direct_out.as<float>(),
                            workspace.data(), stream);
        const std::vector<float> direct = to_host<float>(context, direct_out, got.size());
        CHECK(std::memcmp(direct.data(), got.data(), got.size() * sizeof(float)) == 0);
      }
    }
  }

  SUBCASE("MLA: attention over the latent and rope caches") {
    // DeepSeek's widths: the tile needs more than 48 KiB of shared memory, so the captured launch
    // includes the kernel's opt-in to more.
    MlaShape s{1, 16, 512, 64, 0, max_context, draw_scale(576, random)};
    MlaInputs in;
    in.latent_cache = cache_with_garbage(max_context, s.latent_dim, second_run + 1, random);
    in.rope_cache = cache_with_garbage(max_context, s.rope_dim, second_run + 1, random);
    cuda::DeviceBuffer latent_device = to_device(context, in.latent_cache),
                       rope_device = to_device(context, in.rope_cache);
    cuda::DeviceBuffer q_latent = context.allocate(s.heads * s.latent_dim * sizeof(float), "q latent");
    cuda::DeviceBuffer q_rope = context.allocate(s.heads * s.rope_dim * sizeof(float), "q rope");
    cuda::DeviceBuffer out = context.allocate(s.heads * s.latent_dim * sizeof(float), "out");
    const std::size_t workspace_bytes = cuda::mla_attention_workspace_bytes(1, s.heads, s.latent_dim, max_context);
    REQUIRE(workspace_bytes > 0);
    cuda::DeviceBuffer workspace = workspace_for(context, workspace_bytes);
    const auto* position = position_device.as<std::int32_t>();
    CapturedGraph graph(stream, [&] {
      cuda::mla_attention(q_latent.as<float>(), q_rope.as<float>(), 1, s.heads, s.latent_dim, s.rope_dim,
                          latent_device.as<float>(), rope_device.as<float>(), kF32, position, max_context, s.scale,
                          out.as<float>(), workspace.data(), stream);
    });
    for (const std::int32_t p : positions) {
      INFO("replay at position " << p);
      s.position = p;
      in.q_latent = uniform(static_cast<std::size_t>(s.heads * s.latent_dim), -1, 1, random);
      in.q_rope = uniform(static_cast<std::size_t>(s.heads * s.rope_dim), -1, 1, random);
      context.copy_to_device(q_latent.data(), in.q_latent.data(), in.q_latent.size() * sizeof(float));
      context.copy_to_device(q_rope.data(), in.q_rope.data(), in.q_rope.size() * sizeof(float));
      context.copy_to_device(position_device.data(), &p, sizeof p);
      graph.launch(stream);
      const std::vector<float> got = to_host<float>(context, out, in.q_latent.size());
      const std::vector<float> cpu_out = mla_on_cpu(s, in);
      check_against(got, exact_mla(s, in), &cpu_out, s.heads, s.latent_dim);
    }
  }
}

TEST_CASE("cuda kernels: apply_rope_at is bit-identical to apply_rope with the matching table rows") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const switchyard::RopeLayout layouts[] = {switchyard::RopeLayout::half_split, switchyard::RopeLayout::interleaved_to_half_split,
                                     switchyard::RopeLayout::interleaved};
  for (int round = 0; round < 18; ++round) {
    const switchyard::RopeLayout layout = layouts[round % 3];
    const int rope_dim = round < 3 ? 1024 : 2 * static_cast<int>(draw(1, 128, random));
    const std::int64_t tokens = draw(1, 20, random), heads = draw(1, 40, random);
    const std::int64_t nope = round % 2 ? draw(1, 64, random) : 0;
    const std::int64_t max_positions = tokens + draw(0, 3000, random);
    const std::int64_t first_position = draw(0, max_positions - tokens, random);
    INFO("layout " << static_cast<int>(layout) << ", rope_dim " << rope_dim << ", tokens " << tokens << ", heads "
                   << heads << ", nope " << nope << ", position " << first_position << " of " << max_positions);
    switchyard::RopeFrequencies frequencies;
    if (round % 4 < 2) {
      frequencies = switchyard::rope_frequencies_default(rope_dim, round % 4 ? 1e6 : 10000);
    } else {
      switchyard::YarnConfig yarn;  // DeepSeek-V3's
      yarn.rope_dim = rope_dim, yarn.factor = 40, yarn.mscale = 1, yarn.mscale_all_dim = 0.707;
      frequencies = switchyard::rope_frequencies_yarn(yarn);
    }
    const std::int64_t half = rope_dim / 2;
    std::vector<float> cos_table(static_cast<std::size_t>(max_positions * half)), sin_table(cos_table.size());
    switchyard::rope_cos_sin(frequencies, 0, max_positions, cos_table.data(), sin_table.data());
    const std::vector<float> cos(cos_table.begin() + first_position * half,
                                 cos_table.begin() + (first_position + tokens) * half);
    const std::vector<float> sin(sin_table.begin() + first_position * half,
                                 sin_table.begin() + (first_position + tokens) * half);

    const std::int64_t head_stride = nope + rope_dim, token_stride = heads * head_stride;
    std::vector<float> q = uniform(static_cast<std::size_t>(tokens * token_stride), -4, 4, random);
    cuda::DeviceBuffer by_rows = to_device(context, q), at_position = to_device(context, q);
    cuda::DeviceBuffer cos_device = to_device(context, cos), sin_device = to_device(context, sin);
    cuda::DeviceBuffer cos_table_device = to_device(context, cos_table),
                       sin_table_device = to_device(context, sin_table);
    const std::vector<std::int32_t> position{static_cast<std::int32_t>(first_position)};
    cuda::DeviceBuffer position_device = to_device(context, position);
    cuda::apply_rope(by_rows.as<float>() + nope, tokens, heads, token_stride, head_stride, rope_dim,
                     cos_device.as<float>(), sin_device.as<float>(), layout, context.stream());
    cuda::apply_rope_at(at_position.as<float>() + nope, tokens, heads, token_stride, head_stride, rope_dim,
                        cos_table_device.as<float>(), sin_table_device.as<float>(),
                        position_device.as<std::int32_t>(), layout, context.stream());
    const std::vector<float> expected = to_host<float>(context, by_rows, q.size());
    const std::vector<float> got = to_host<float>(context, at_position, q.size());
    cpu::apply_rope(q.data() + nope, tokens, heads, token_stride, head_stride, rope_dim, cos.data(), sin.data(),
                    layout);
    CHECK(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(got.data(), q.data(), got.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("cuda kernels: write_cache_rows copies rows exactly at the device position, never outside the cache") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::int64_t guard_rows = 3;  // on each side of the cache, must stay as they are
  for (int round = 0; round < 30; ++round) {
    const std::int64_t width = round < 2 ? 576 : draw(1, 2000, random);
    const std::int64_t tokens = draw(1, 20, random), max_context = draw(1, 300, random);
    const std::int64_t source_stride = width + (round % 2 ? draw(0, 10, random) : 0);
    // Mostly inside the cache; some rounds start before it or run past its end.
    const std::int64_t position = round % 5 == 4 ? draw(-tokens - 2, max_context + 2, random)
                                                 : draw(0, std::max<std::int64_t>(0, max_context - tokens), random);
    INFO("width " << width << ", tokens " << tokens << ", stride " << source_stride << ", position " << position
                  << ", max_context " << max_context);
    std::vector<float> buffer = uniform(static_cast<std::size_t>((max_context + 2 * guard_rows) * width), -9, 9, random);
    const std::vector<float> source =
        uniform(static_cast<std::size_t>((tokens - 1) * source_stride + width), -9, 9, random);
    cuda::DeviceBuffer buffer_device = to_device(context, buffer), source_device = to_device(context, source);
    const std::vector<std::int32_t> position_host{static_cast<std::int32_t>(position)};
    cuda::DeviceBuffer position_device = to_device(context, position_host);
    cuda::write_cache_rows(buffer_device.as<float>() + guard_rows * width, kF32, width, source_device.as<float>(),
                           source_stride, tokens, position_device.as<std::int32_t>(), max_context, context.stream());
    const std::vector<float> got = to_host<float>(context, buffer_device, buffer.size());
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t row = position + t;
      if (row < 0 || row >= max_context) continue;
      std::copy(source.begin() + t * source_stride, source.begin() + t * source_stride + width,
                buffer.begin() + (guard_rows + row) * width);
    }
    CHECK(std::memcmp(got.data(), buffer.data(), got.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("cuda kernels: write_cache_rows rounds into bf16 caches as cpu::f32_to_bf16, widen_cache_rows reads back") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::int64_t guard_rows = 3;  // on each side of the cache, must stay as they are
  for (int round = 0; round < 30; ++round) {
    const std::int64_t width = round < 2 ? 576 : draw(1, 2000, random);
    const std::int64_t tokens = draw(1, 20, random), max_context = draw(1, 300, random);
    const std::int64_t source_stride = width + (round % 2 ? draw(0, 10, random) : 0);
    const std::int64_t position = round % 5 == 4 ? draw(-tokens - 2, max_context + 2, random)
                                                 : draw(0, std::max<std::int64_t>(0, max_context - tokens), random);
    INFO("width " << width << ", tokens " << tokens << ", stride " << source_stride << ", position " << position
                  << ", max_context " << max_context);
    const std::int64_t rows = max_context + 2 * guard_rows;
    std::vector<float> values = uniform(static_cast<std::size_t>(rows * width), -9, 9, random);
    std::vector<std::uint16_t> buffer = round_to_bf16(values);
    // Values of many magnitudes, and ties: exactly halfway between two bf16 neighbours (to even).
    std::vector<float> source =
        uniform(static_cast<std::size_t>((tokens - 1) * source_stride + width), -9, 9, random);
    for (std::size_t i = 0; i < source.size(); i += 7)
      source[i] = std::ldexp(source[i], static_cast<int>(draw(-60, 60, random)));
    for (std::size_t i = 3; i < source.size(); i += 11)
      source[i] = std::bit_cast<float>(static_cast<std::uint32_t>(draw(0, 0x7f00, random) | draw(0, 1, random) << 15)
                                           << 16 | 0x8000u);  // finite: sign, exponent below 0xff
    cuda::DeviceBuffer buffer_device = to_device(context, buffer), source_device = to_device(context, source);
    const std::vector<std::int32_t> position_host{static_cast<std::int32_t>(position)};
    cuda::DeviceBuffer position_device = to_device(context, position_host);
    cuda::write_cache_rows(buffer_device.as<std::uint16_t>() + guard_rows * width, kBf16, width,
                           source_device.as<float>(), source_stride, tokens, position_device.as<std::int32_t>(),
                           max_context, context.stream());
    const std::vector<std::uint16_t> got = to_host<std::uint16_t>(context, buffer_device, buffer.size());
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t row = position + t;
      if (row < 0 || row >= max_context) continue;
      for (std::int64_t i = 0; i < width; ++i)
        buffer[static_cast<std::size_t>((guard_rows + row) * width + i)] =
            cpu::f32_to_bf16(source[static_cast<std::size_t>(t * source_stride + i)]);
    }
    CHECK(got == buffer);
    // The whole buffer widened back: each value's f32, exactly.
    cuda::DeviceBuffer widened = context.allocate(static_cast<std::size_t>(rows * width) * sizeof(float), "widened");
    cuda::widen_cache_rows(buffer_device.data(), kBf16, rows, width, widened.as<float>(), context.stream());
    const std::vector<float> back = to_host<float>(context, widened, buffer.size());
    bool exact = true;
    for (std::size_t i = 0; i < back.size() && exact; ++i) exact = back[i] == cpu::bf16_to_f32(got[i]);
    CHECK(exact);
  }
}

#else  // built without the CUDA backend

TEST_CASE("cuda attention: skipped, built without the CUDA backend") { MESSAGE("skipped: built without CUDA"); }

#endif
