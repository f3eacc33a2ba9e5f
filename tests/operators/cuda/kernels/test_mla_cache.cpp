// cuda::write_mla_caches (one launch) against the eight launches it replaces (copy_rows, rms_norm,
// write_cache_rows for the latent; copy_rows, apply_rope_at, write_cache_rows for the rope key;
// apply_rope_at and copy_rows for the queries' rope parts):
// bit-identical caches, at a position read from device memory, on fresh random inputs, with rows
// outside the written ones untouched, in f32 caches and in bf16 caches (both paths round the same
// f32 values); and its absorbing blocks (decode's absorbed queries) against a double-precision
// reference. Skipped visibly without a GPU.
#include <doctest/doctest.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/rope.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/kernels/kv_cache.h"
#include "operators/cuda/kernels/rms_norm.h"
#include "operators/cuda/kernels/rope.h"
#include "tests/cuda_test_support.h"
#include "tests/test_seed.h"

namespace sy = switchyard;
namespace cuda = switchyard::cuda;
using namespace switchyard::testing;

TEST_CASE("cuda: write_mla_caches equals the eight kernels it fuses, bit for bit") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  std::mt19937 random(std::random_device{}());
  std::uniform_real_distribution<float> value(-3, 3);
  for (int round = 0; round < 8; ++round) {
    const std::int64_t latent = round < 4 ? 512 : 16 * (1 + round), rope = round < 4 ? 64 : 8 + 2 * round;
    const std::int64_t tokens = 1 + round % 3 * 5, max_context = 40;
    const std::int32_t position = 3 + round;
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    const auto layout = round % 3 == 0 ? switchyard::RopeLayout::interleaved_to_half_split
                        : round % 3 == 1 ? switchyard::RopeLayout::half_split
                                         : switchyard::RopeLayout::interleaved;
    INFO("latent " << latent << " rope " << rope << " tokens " << tokens << " " << sy::dtype_name(dtype));
    std::vector<float> ckv(static_cast<std::size_t>(tokens * (latent + rope)));
    for (float& v : ckv) v = value(random);
    std::vector<float> weight_f32(static_cast<std::size_t>(latent));
    std::vector<std::uint16_t> weight_bf16(weight_f32.size());
    for (std::size_t i = 0; i < weight_f32.size(); ++i) {
      weight_f32[i] = 0.5f + value(random) / 6;
      weight_bf16[i] = sy::cpu::f32_to_bf16(weight_f32[i]);
    }
    const switchyard::RopeFrequencies frequencies = switchyard::rope_frequencies_default(static_cast<int>(rope), 10000.0);
    std::vector<float> cos(static_cast<std::size_t>(max_context * rope / 2)), sin(cos.size());
    switchyard::rope_cos_sin(frequencies, 0, max_context, cos.data(), sin.data());
    auto up = [&](const void* data, std::size_t bytes) { return context.upload(data, bytes, "test"); };
    cuda::DeviceBuffer ckv_d = up(ckv.data(), ckv.size() * 4);
    cuda::DeviceBuffer weight_d = dtype == sy::DType::bf16 ? up(weight_bf16.data(), weight_bf16.size() * 2)
                                                           : up(weight_f32.data(), weight_f32.size() * 4);
    cuda::DeviceBuffer cos_d = up(cos.data(), cos.size() * 4), sin_d = up(sin.data(), sin.size() * 4);
    cuda::DeviceBuffer position_d = up(&position, 4);
    // Caches prefilled with a pattern (7.25: f32 0x40e80000, bf16 0x40e8), to see that other rows stay
    // as they were.
    const sy::DType cache_dtype = round % 4 < 2 ? sy::DType::f32 : sy::DType::bf16;
    const std::size_t element = cache_dtype == sy::DType::f32 ? 4 : 2;
    INFO(sy::dtype_name(cache_dtype) << " caches");
    std::vector<float> pattern(static_cast<std::size_t>(max_context * latent), 7.25f);
    std::vector<std::uint16_t> pattern16(pattern.size(), 0x40e8);
    const void* pattern_bytes =
        cache_dtype == sy::DType::f32 ? static_cast<const void*>(pattern.data()) : pattern16.data();
    const std::size_t latent_bytes = pattern.size() * element;
    const std::size_t rope_bytes = static_cast<std::size_t>(max_context * rope) * element;
    cuda::DeviceBuffer fused_latent = up(pattern_bytes, latent_bytes), plain_latent = up(pattern_bytes, latent_bytes);
    cuda::DeviceBuffer fused_rope = up(pattern_bytes, rope_bytes), plain_rope = up(pattern_bytes, rope_bytes);
    const float eps = 1e-6f;
    cudaStream_t stream = context.stream();
    // Query heads [tokens, heads, nope + rope]: their rope parts rotated into a compact buffer.
    const std::int64_t heads = 1 + round * 5, nope = 8 + round, q_head = nope + rope;
    std::vector<float> q(static_cast<std::size_t>(tokens * heads * q_head));
    for (float& v : q) v = value(random);
    cuda::DeviceBuffer q_d = up(q.data(), q.size() * 4);
    cuda::DeviceBuffer q_rope_fused = context.allocate(static_cast<std::size_t>(tokens * heads * rope) * 4, "t");
    cuda::write_mla_caches(ckv_d.as<float>(), tokens, latent, rope, weight_d.data(), dtype, eps, cos_d.as<float>(),
                           sin_d.as<float>(), layout, position_d.as<std::int32_t>(), max_context, fused_latent.data(),
                           fused_rope.data(), cache_dtype, stream,
                           cuda::MlaQueryRope{q_d.as<float>() + nope, heads, heads * q_head, q_head,
                                              q_rope_fused.as<float>()});
    cuda::apply_rope_at(q_d.as<float>() + nope, tokens, heads, heads * q_head, q_head, static_cast<int>(rope),
                        cos_d.as<float>(), sin_d.as<float>(), position_d.as<std::int32_t>(), layout, stream);
    cuda::DeviceBuffer q_rope_plain = context.allocate(static_cast<std::size_t>(tokens * heads * rope) * 4, "t");
    cuda::copy_rows(q_d.as<float>() + nope, q_head, tokens * heads, rope, q_rope_plain.as<float>(), rope, stream);
    cuda::DeviceBuffer lat = context.allocate(static_cast<std::size_t>(tokens * latent) * 4, "t"),
                       normed = context.allocate(static_cast<std::size_t>(tokens * latent) * 4, "t"),
                       k = context.allocate(static_cast<std::size_t>(tokens * rope) * 4, "t");
    cuda::copy_rows(ckv_d.as<float>(), latent + rope, tokens, latent, lat.as<float>(), latent, stream);
    cuda::rms_norm(lat.as<float>(), tokens, latent, weight_d.data(), dtype, eps, normed.as<float>(), stream);
    cuda::write_cache_rows(plain_latent.data(), cache_dtype, latent, normed.as<float>(), latent, tokens,
                           position_d.as<std::int32_t>(), max_context, stream);
    cuda::copy_rows(ckv_d.as<float>() + latent, latent + rope, tokens, rope, k.as<float>(), rope, stream);
    cuda::apply_rope_at(k.as<float>(), tokens, 1, rope, rope, static_cast<int>(rope), cos_d.as<float>(),
                        sin_d.as<float>(), position_d.as<std::int32_t>(), layout, stream);
    cuda::write_cache_rows(plain_rope.data(), cache_dtype, rope, k.as<float>(), rope, tokens,
                           position_d.as<std::int32_t>(), max_context, stream);
    auto down = [&](const cuda::DeviceBuffer& b, std::size_t floats) {
      std::vector<float> host(floats);
      context.copy_to_host(host.data(), b.data(), floats * 4);
      context.synchronize();
      return host;
    };
    const std::vector<std::uint8_t> a = to_host<std::uint8_t>(context, fused_latent, latent_bytes),
                                    b = to_host<std::uint8_t>(context, plain_latent, latent_bytes);
    const std::vector<std::uint8_t> c = to_host<std::uint8_t>(context, fused_rope, rope_bytes),
                                    d = to_host<std::uint8_t>(context, plain_rope, rope_bytes);
    CHECK(a == b);
    CHECK(c == d);
    const std::size_t q_rope_floats = static_cast<std::size_t>(tokens * heads * rope);
    const std::vector<float> e = down(q_rope_fused, q_rope_floats), f = down(q_rope_plain, q_rope_floats);
    CHECK(std::memcmp(e.data(), f.data(), e.size() * 4) == 0);
    CHECK(e[0] != q[static_cast<std::size_t>(nope)]);  // rotated (position > 0), not copied
    const auto* pattern_start = static_cast<const std::uint8_t*>(pattern_bytes);
    CHECK(std::memcmp(a.data(), pattern_start, element) == 0);  // row 0: not written
    // The first new row: written.
    CHECK(std::memcmp(a.data() + position * latent * element, pattern_start, element) != 0);
  }
}

TEST_CASE("cuda: write_mla_caches absorbs the queries in the same launch, as the reference does") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  for (int round = 0; round < 8; ++round) {
    // DeepSeek's shapes (in 128, rows 512) and odd ones: in from 8 to 400, rows not a multiple of a block's.
    const std::int64_t heads = round < 2 ? 16 : draw(1, 20, random), in = round < 2 ? 128 : 8 * draw(1, 50, random);
    const std::int64_t rows = round < 2 ? 512 : draw(1, 300, random), rope = 64, latent = 512;
    const std::int64_t head_stride = in + rope + 4 * draw(0, 2, random);
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    INFO("heads " << heads << " rows " << rows << " in " << in << " " << sy::dtype_name(dtype));
    std::vector<float> weight = uniform(static_cast<std::size_t>(heads * rows * in), -1, 1, random);
    std::vector<std::uint16_t> weight_bf16(weight.size());
    for (std::size_t i = 0; i < weight.size(); ++i) {
      weight_bf16[i] = sy::cpu::f32_to_bf16(weight[i]);
      if (dtype == sy::DType::bf16) weight[i] = sy::cpu::bf16_to_f32(weight_bf16[i]);
    }
    const std::vector<float> q = uniform(static_cast<std::size_t>(heads * head_stride), -2, 2, random);
    const std::vector<float> ckv = uniform(static_cast<std::size_t>(latent + rope), -2, 2, random);
    const std::vector<float> norm(static_cast<std::size_t>(latent), 1.0f);
    const switchyard::RopeFrequencies frequencies = switchyard::rope_frequencies_default(static_cast<int>(rope), 10000.0);
    const std::int64_t max_context = 8;
    std::vector<float> cos(static_cast<std::size_t>(max_context * rope / 2)), sin(cos.size());
    switchyard::rope_cos_sin(frequencies, 0, max_context, cos.data(), sin.data());
    const std::int32_t position = 5;
    cuda::DeviceBuffer weight_d = dtype == sy::DType::bf16 ? to_device(context, weight_bf16) : to_device(context, weight);
    cuda::DeviceBuffer q_d = to_device(context, q), ckv_d = to_device(context, ckv), norm_d = to_device(context, norm);
    cuda::DeviceBuffer cos_d = to_device(context, cos), sin_d = to_device(context, sin);
    cuda::DeviceBuffer position_d = context.upload(&position, 4, "position");
    cuda::DeviceBuffer latent_cache = context.allocate(static_cast<std::size_t>(max_context * latent) * 4, "cache");
    cuda::DeviceBuffer rope_cache = context.allocate(static_cast<std::size_t>(max_context * rope) * 4, "cache");
    cuda::DeviceBuffer out = context.allocate(static_cast<std::size_t>(heads * rows) * 4, "absorbed");
    cuda::write_mla_caches(ckv_d.as<float>(), 1, latent, rope, norm_d.data(), sy::DType::f32, 1e-6f, cos_d.as<float>(),
                           sin_d.as<float>(), switchyard::RopeLayout::half_split, position_d.as<std::int32_t>(),
                           max_context, latent_cache.data(), rope_cache.data(), sy::DType::f32, context.stream(), {},
                           cuda::MlaAbsorb{weight_d.data(), dtype, q_d.as<float>(), heads, rows, in, head_stride,
                                           out.as<float>()});
    const std::vector<float> got = to_host<float>(context, out, static_cast<std::size_t>(heads * rows));
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t c = 0; c < rows; ++c) {
        double expected = 0, magnitude = 0;
        for (std::int64_t i = 0; i < in; ++i) {
          const double product = static_cast<double>(weight[static_cast<std::size_t>((h * rows + c) * in + i)]) *
                                 q[static_cast<std::size_t>(h * head_stride + i)];
          expected += product;
          magnitude += std::fabs(product);
        }
        INFO("head " << h << " row " << c);
        // f32 accumulation over at most 400 terms, loosely bounded.
        REQUIRE(std::fabs(got[static_cast<std::size_t>(h * rows + c)] - expected) <= 1e-5 * magnitude);
      }
  }
  // More than one token, or a row length that is not whole chunks, is refused before any launch.
  float* none = nullptr;
  CHECK_THROWS_AS(cuda::write_mla_caches(none, 2, 512, 64, none, sy::DType::f32, 1e-6f, none, none,
                                         switchyard::RopeLayout::half_split, reinterpret_cast<const std::int32_t*>(16),
                                         8, none, none, sy::DType::f32, context.stream(), {},
                                         cuda::MlaAbsorb{reinterpret_cast<const void*>(16), sy::DType::f32,
                                                         reinterpret_cast<const float*>(16), 1, 1, 8, 8, none}),
                  std::invalid_argument);
}

#endif
