// The GPU routed experts (operators/cuda/kernels/routed_experts.h), both paths, against a plain double
// reference on fresh random inputs: out[t] = sum_k w[t,k] * down_e(silu(gate_e x_t) * up_e x_t).
// Without a GPU every GPU test says "skipped: no CUDA device"; the argument checks run everywhere.
//
// Each element is checked against a worst-case bound relative to the scale
//   M[t, c] = sum_k |w[t,k]| * sum_r |down_e[c, r]| * H[r],
//   H[r] = 1.1 G[r] (|u[r]| + 2^-9 U[r]) + |silu(g[r])| U[r] + |h[r]|,
//   G[r] = sum_i |gate_e[r, i] x[t, i]|,  U[r] = sum_i |up_e[r, i] x[t, i]|  (g, u, h exact),
// since errors |dg| <= e G and |du| <= e U (e <= 2^-9) reach h as |dh| <= 1.1 |dg| (|u| + |du|) +
// |silu(g)| |du| (|silu'| <= 1.1), plus e |h| where h itself is rounded, so |dh| <= e H[r], and out
// errs by at most e M plus its own sums' rounding. With u = 2^-24:
//   decode (f32 and bf16 weights)  e = 2e-5. x is not rounded and bf16 weights widen exactly: only
//                f32 sums err. Each lane sums n/32 products, then a 5-level warp tree:
//                (hidden/32 + 5) u for g and u, (inter/32 + 5) u for down, top_k + 3 more:
//                <= 130 u = 7.7e-6 for the largest shape here (hidden 2048, inter 1408).
//   prefill, f32 weights           e = 1e-4: cuBLAS's f32 GEMMs, at worst serial sums:
//                (hidden + inter + top_k + 3) u <= 4e-5 for hidden, inter <= 384 here.
//   prefill, bf16 weights          e = 2^-8: x and h are rounded to bf16 (2^-9 each, as
//                cuda::linear); the f32 sums add < 4e-5.
// Bounds on sums of |terms| are far above typical errors (M is hundreds of times |out| here), so
// each test also checks the root-mean-square error over all of out against the RMS of out:
// 1e-4 where only f32 sums err (typically ~1e-6), 2^-5 with bf16 rounding (typically ~3e-3; an
// output whose g is far below 0 can err by several times 2^-9).
// That catches a dropped term or a wrong row that the element-wise bound would let through.
//   experts in ggml blocks (every block type): the reference multiplies the blocks' dequantized
//                values (the CPU's scalar decoding), so decode errs as for floats (each weight
//                decodes exactly);
//                prefill rounds the decoded weights to bf16 too (2^-9 more in g, u and down):
//                e = 2^-7.
// Ids outside [0, experts) must contribute nothing: their weights are NaN here, so any use shows.
#include <doctest/doctest.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/quant_formats.h"
#include "operators/cpu/kernels/half.h"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/device_facts.h"
#include "operators/cuda/kernels/grouped_gemm.h"
#include "operators/cuda/kernels/routed_experts.h"
#include "tests/cuda_test_support.h"

namespace sy = switchyard;
namespace cpu = switchyard::cpu;
namespace cuda = switchyard::cuda;
using namespace switchyard::testing;

namespace {

struct Tolerance {
  double bound;  // |got - expected| <= bound * M, every element
  double rms;    // RMS(got - expected) <= rms * RMS(expected)
};
constexpr Tolerance kDecodeTolerance{2e-5, 1e-4};
constexpr Tolerance kPrefillF32Tolerance{1e-4, 1e-4};
constexpr Tolerance kPrefillBf16Tolerance{0x1.0p-8, 0x1.0p-5};
constexpr Tolerance kPrefillBlocksTolerance{0x1.0p-7, 0x1.0p-5};

// One layer's experts on the host: the weights' values, bf16-representable for bf16 stacks.
struct HostExperts {
  sy::DType dtype;
  std::int64_t experts, hidden, inter;
  std::vector<float> gate, up, down;  // [experts, inter, hidden], [experts, inter, hidden], [experts, hidden, inter]
};

HostExperts random_experts(sy::DType dtype, std::int64_t experts, std::int64_t hidden, std::int64_t inter,
                           std::mt19937& random) {
  // Scaled so that gate . x is of order 1, where silu bends.
  const float in_scale = 2.0f / std::sqrt(static_cast<float>(hidden));
  const float down_scale = 2.0f / std::sqrt(static_cast<float>(inter));
  HostExperts w{dtype, experts, hidden, inter, uniform(experts * inter * hidden, -in_scale, in_scale, random),
                uniform(experts * inter * hidden, -in_scale, in_scale, random),
                uniform(experts * hidden * inter, -down_scale, down_scale, random)};
  if (dtype == sy::DType::bf16)
    for (auto* values : {&w.gate, &w.up, &w.down})
      for (float& v : *values) v = cpu::bf16_to_f32(cpu::f32_to_bf16(v));
  return w;
}

// The stack on the device. element_offset: its pointers start that many elements into their
// buffers (1: not 16-byte aligned, so the decode kernels must take their element-wise variant).
struct DeviceExperts {
  cuda::DeviceBuffer gate, up, down;
  cuda::ExpertStack stack;
};

cuda::DeviceBuffer upload_weights(cuda::DeviceContext& context, const std::vector<float>& values, sy::DType dtype,
                                  int element_offset) {
  if (dtype == sy::DType::f32) {
    std::vector<float> padded(element_offset, 0.0f);
    padded.insert(padded.end(), values.begin(), values.end());
    return to_device(context, padded);
  }
  std::vector<std::uint16_t> bits(element_offset, 0);
  for (float v : values) bits.push_back(cpu::f32_to_bf16(v));
  return to_device(context, bits);
}

DeviceExperts upload(cuda::DeviceContext& context, const HostExperts& w, int element_offset = 0) {
  DeviceExperts d;
  d.gate = upload_weights(context, w.gate, w.dtype, element_offset);
  d.up = upload_weights(context, w.up, w.dtype, element_offset);
  d.down = upload_weights(context, w.down, w.dtype, element_offset);
  const std::size_t skip = static_cast<std::size_t>(element_offset) * (w.dtype == sy::DType::f32 ? 4 : 2);
  d.stack = cuda::ExpertStack{d.gate.as<char>() + skip, d.up.as<char>() + skip, d.down.as<char>() + skip,
                              w.dtype,          w.experts,  w.hidden, w.inter};
  return d;
}

// top_k distinct experts per token from `allowed`, and positive routing weights.
struct Routing {
  std::vector<std::int32_t> ids;
  std::vector<float> weights;
};

Routing route(std::int64_t tokens, int top_k, std::vector<std::int32_t> allowed, std::mt19937& random) {
  REQUIRE(static_cast<std::int64_t>(allowed.size()) >= top_k);
  Routing r;
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::shuffle(allowed.begin(), allowed.end(), random);
    r.ids.insert(r.ids.end(), allowed.begin(), allowed.begin() + top_k);
  }
  r.weights = uniform(r.ids.size(), 0.05f, 1.0f, random);
  return r;
}

std::vector<std::int32_t> all_experts(std::int64_t experts) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(experts));
  for (std::size_t e = 0; e < ids.size(); ++e) ids[e] = static_cast<std::int32_t>(e);
  return ids;
}

// Replaces a few slots by ids outside [0, experts) whose weights are NaN.
void spoil_some_ids(Routing& r, std::int64_t experts) {
  const std::int32_t bad[] = {-1, static_cast<std::int32_t>(experts), std::numeric_limits<std::int32_t>::max(),
                              std::numeric_limits<std::int32_t>::min()};
  const std::size_t slots = r.ids.size();
  const std::size_t where[] = {0, slots - 1, slots / 2, slots / 3};
  for (int i = 0; i < 4; ++i) {
    r.ids[where[i]] = bad[i];
    r.weights[where[i]] = std::numeric_limits<float>::quiet_NaN();
  }
}

struct Expected {
  std::vector<double> out, scale;  // [tokens, hidden]
};

Expected reference(const HostExperts& w, const std::vector<float>& x, std::int64_t tokens, const Routing& r,
                   int top_k) {
  const std::int64_t hidden = w.hidden, inter = w.inter;
  Expected e{std::vector<double>(tokens * hidden, 0.0), std::vector<double>(tokens * hidden, 0.0)};
  std::vector<double> h(inter), h_scale(inter);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* xt = x.data() + t * hidden;
    for (int k = 0; k < top_k; ++k) {
      const std::int32_t expert = r.ids[t * top_k + k];
      if (expert < 0 || expert >= w.experts) continue;
      const double weight = r.weights[t * top_k + k];
      for (std::int64_t row = 0; row < inter; ++row) {
        const float* g = w.gate.data() + (expert * inter + row) * hidden;
        const float* u = w.up.data() + (expert * inter + row) * hidden;
        double gate = 0, up = 0, gate_scale = 0, up_scale = 0;
        for (std::int64_t i = 0; i < hidden; ++i) {
          gate += double{g[i]} * xt[i], gate_scale += std::fabs(double{g[i]} * xt[i]);
          up += double{u[i]} * xt[i], up_scale += std::fabs(double{u[i]} * xt[i]);
        }
        const double silu = gate / (1.0 + std::exp(-gate));
        h[row] = silu * up;
        h_scale[row] = 1.1 * gate_scale * (std::fabs(up) + 0x1.0p-9 * up_scale) + std::fabs(silu) * up_scale +
                       std::fabs(h[row]);
      }
      for (std::int64_t c = 0; c < hidden; ++c) {
        const float* d = w.down.data() + (expert * hidden + c) * inter;
        double y = 0, y_scale = 0;
        for (std::int64_t row = 0; row < inter; ++row) {
          y += d[row] * h[row];
          y_scale += std::fabs(d[row]) * h_scale[row];
        }
        e.out[t * hidden + c] += weight * y;
        e.scale[t * hidden + c] += std::fabs(weight) * y_scale;
      }
    }
  }
  return e;
}

// The largest |got - expected| / M, and RMS(got - expected) / RMS(expected).
struct Errors {
  double bound = 0, rms = 0;
  void include(const Errors& other) { bound = std::max(bound, other.bound), rms = std::max(rms, other.rms); }
};

// Checks every element against the bound and all of out against the RMS tolerance.
Errors check_close(const std::vector<float>& got, const Expected& e, Tolerance tolerance) {
  double worst = 0, error_squares = 0, expected_squares = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("out[" << i << "] = " << got[i] << " vs " << e.out[i] << ", scale " << e.scale[i]);
    const double error = std::fabs(got[i] - e.out[i]);
    error_squares += error * error, expected_squares += e.out[i] * e.out[i];
    if (e.scale[i] == 0) {  // every slot of the token invalid
      REQUIRE(got[i] == 0.0f);
      continue;
    }
    REQUIRE(error <= tolerance.bound * e.scale[i]);
    worst = std::max(worst, error / e.scale[i]);
  }
  const double rms = expected_squares > 0 ? std::sqrt(error_squares / expected_squares) : 0.0;
  CHECK(rms <= tolerance.rms);
  return {worst, rms};
}

struct Batch {
  cuda::DeviceBuffer x, ids, weights, out, workspace;
  std::size_t workspace_bytes = 0;
};

// Uploads x and the routing, and a workspace for exactly this call; x gets `x_offset` floats in
// front (1: not 16-byte aligned).
Batch upload_batch(cuda::DeviceContext& context, const cuda::ExpertStack& stack, const std::vector<float>& x,
                   std::int64_t tokens, const Routing& r, int top_k, int x_offset = 0) {
  Batch b;
  std::vector<float> padded(x_offset, 0.0f);
  padded.insert(padded.end(), x.begin(), x.end());
  b.x = to_device(context, padded);
  b.ids = to_device(context, r.ids);
  b.weights = to_device(context, r.weights);
  b.out = context.allocate(x.size() * sizeof(float), "out");
  b.workspace_bytes = cuda::routed_experts_workspace_bytes(stack, tokens, top_k);
  b.workspace = context.allocate(b.workspace_bytes, "the routed experts' workspace");
  return b;
}

std::vector<float> run(cuda::DeviceContext& context, const cuda::ExpertStack& stack, Batch& b, std::int64_t tokens,
                       int top_k, int x_offset = 0, bool in_place = false) {
  const float* x = b.x.as<float>() + x_offset;
  float* out = in_place ? const_cast<float*>(x) : b.out.as<float>();
  cuda::routed_experts(context, stack, x, tokens, b.ids.as<std::int32_t>(), b.weights.as<float>(), top_k, out,
                       b.workspace.data(), b.workspace_bytes);
  return to_host<float>(context, out, static_cast<std::size_t>(tokens * stack.hidden));
}

}  // namespace

TEST_CASE("cuda routed_experts: bad stacks and sizes are refused without a GPU; workspace sizes") {
  const cuda::ExpertStack good{nullptr, nullptr, nullptr, sy::DType::bf16, 64, 2048, 1408};
  // The decode path's workspace: h, [slots, inter] f32.
  CHECK(cuda::routed_experts_workspace_bytes(good, 1, 6) == 6 * 1408 * 4);
  CHECK(cuda::routed_experts_workspace_bytes(good, 0, 6) == 0);
  CHECK(cuda::routed_experts_workspace_bytes(good, 5, 6) == 30 * 1408 * 4);
  CHECK(cuda::routed_experts_uses_decode_path(5, 6));
  CHECK_FALSE(cuda::routed_experts_uses_decode_path(6, 6));
  // Prefill: the sum of the parts of routed_experts.h, each rounded up to 256 bytes.
  auto round_up = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  const std::size_t slots = 512 * 6;
  CHECK(cuda::routed_experts_workspace_bytes(good, 512, 6) ==
        round_up(64 * 4) + 2 * round_up(65 * 4) + 2 * round_up(slots * 4) + round_up(slots * 2048 * 4) +
            2 * round_up(slots * 1408 * 4));
  CHECK(cuda::routed_experts_workspace_bytes(good, 6, 6) >= cuda::routed_experts_workspace_bytes(good, 5, 6));

  auto refused = [](cuda::ExpertStack stack, std::int64_t tokens, int top_k) {
    try {
      cuda::routed_experts_workspace_bytes(stack, tokens, top_k);
    } catch (const std::invalid_argument& error) {
      MESSAGE(std::string(error.what()));
      return true;
    }
    return false;
  };
  cuda::ExpertStack f16 = good;
  f16.dtype = sy::DType::f16;
  CHECK(refused(f16, 1, 6));
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-3}, std::int64_t{1} << 31}) {
    cuda::ExpertStack s = good;
    s.experts = bad;
    CHECK(refused(s, 1, 6));
    s = good;
    s.hidden = bad;
    CHECK(refused(s, 1, 6));
    s = good;
    s.inter = bad;
    CHECK(refused(s, 1, 6));
  }
  cuda::ExpertStack huge = good;  // each size fits 32 bits, the stack does not fit 2^62 bytes
  huge.experts = huge.hidden = huge.inter = (std::int64_t{1} << 31) - 1;
  CHECK(refused(huge, 1, 6));
  CHECK(refused(good, 1, 0));
  CHECK(refused(good, -1, 6));
  CHECK(refused(good, std::int64_t{1} << 28, 8));  // 2^31 slots
}

TEST_CASE("cuda grouped GEMM: devices without the shared memory or the tensor cores for it take the other path") {
  // Opt-in limits per block as the devices report them (cudaDevAttrMaxSharedMemoryPerBlockOptin).
  cuda::DeviceFacts hopper{0, 9, 232448, 233472};
  cuda::DeviceFacts a100{0, 8, 166912, 167936};
  cuda::DeviceFacts ada{0, 8, 101376, 102400};  // RTX 4090, L40 (and the RTX A6000's sm_86)
  cuda::DeviceFacts turing{0, 7, 65536, 65536};
  CHECK(cuda::grouped_gemm_fits(hopper));
  CHECK(cuda::grouped_gemm_fits(a100));
  CHECK_FALSE(cuda::grouped_gemm_fits(ada));
  CHECK_FALSE(cuda::grouped_gemm_fits(turing));
}

TEST_CASE("cuda routed_experts: null pointers and a small or misaligned workspace are refused") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  cuda::DeviceBuffer buffer = context.allocate(1 << 20, "a test buffer");
  auto* p = buffer.as<float>();
  auto* ids = buffer.as<std::int32_t>();
  const cuda::ExpertStack stack{p, p, p, sy::DType::f32, 4, 16, 8};
  const std::size_t decode_bytes = cuda::routed_experts_workspace_bytes(stack, 1, 2);
  const std::size_t prefill_bytes = cuda::routed_experts_workspace_bytes(stack, 40, 2);
  void* workspace = buffer.as<char>() + 4096;
  CHECK_NOTHROW(cuda::routed_experts(context, stack, p, 0, nullptr, nullptr, 2, nullptr, nullptr, 0));  // no tokens
  CHECK_THROWS_AS(cuda::routed_experts(context, stack, nullptr, 1, ids, p, 2, p, workspace, decode_bytes),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::routed_experts(context, stack, p, 1, nullptr, p, 2, p, workspace, decode_bytes),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::routed_experts(context, stack, p, 1, ids, nullptr, 2, p, workspace, decode_bytes),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::routed_experts(context, stack, p, 1, ids, p, 2, nullptr, workspace, decode_bytes),
                  std::invalid_argument);
  cuda::ExpertStack no_down = stack;
  no_down.down = nullptr;
  CHECK_THROWS_AS(cuda::routed_experts(context, no_down, p, 1, ids, p, 2, p, workspace, decode_bytes),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::routed_experts(context, stack, p, 1, ids, p, 2, p, workspace, decode_bytes - 1),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::routed_experts(context, stack, p, 40, ids, p, 2, p, workspace, prefill_bytes - 1),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::routed_experts(context, stack, p, 1, ids, p, 2, p, nullptr, decode_bytes),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::routed_experts(context, stack, p, 1, ids, p, 2, p, buffer.as<char>() + 4100, decode_bytes),
                  std::invalid_argument);
  context.synchronize();  // nothing was queued
}

TEST_CASE("cuda routed_experts: the decode path matches the reference (bf16, f32, odd shapes, bad ids)") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  Errors worst[2];  // f32, bf16 weights
  for (int round = 0; round < 30; ++round) {
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    std::int64_t experts, hidden, inter, tokens;
    int top_k;
    if (round < 2) {  // DeepSeek-V2-Lite's shape, fewer experts
      experts = 8, hidden = 2048, inter = 1408, top_k = 6, tokens = 1;
    } else {
      experts = draw(1, 12, random);
      // Half the rounds multiples of 8 (16-byte loads), half anything (element-wise loads).
      hidden = round % 4 < 2 ? 8 * draw(1, 128, random) : draw(1, 1000, random);
      inter = round % 3 ? 8 * draw(1, 90, random) : draw(1, 700, random);
      top_k = static_cast<int>(draw(1, std::min<std::int64_t>(experts, 8), random));
      tokens = draw(1, 3, random);
    }
    REQUIRE(cuda::routed_experts_uses_decode_path(tokens, top_k));
    const bool bad_ids = round % 3 == 2 && tokens * top_k >= 4;
    const int offset = round % 7 == 5 ? 1 : 0;  // misaligned weights and x: element-wise loads
    const bool in_place = round % 5 == 4;
    INFO("round " << round << ", " << sy::dtype_name(dtype) << ": experts " << experts << ", hidden " << hidden
                  << ", inter " << inter << ", top_k " << top_k << ", tokens " << tokens << ", bad ids " << bad_ids
                  << ", misaligned " << offset << ", in place " << in_place);

    const HostExperts w = random_experts(dtype, experts, hidden, inter, random);
    const std::vector<float> x = uniform(tokens * hidden, -2, 2, random);
    Routing r = route(tokens, top_k, all_experts(experts), random);
    if (bad_ids) spoil_some_ids(r, experts);
    const Expected expected = reference(w, x, tokens, r, top_k);

    DeviceExperts device = upload(context, w, offset);
    Batch batch = upload_batch(context, device.stack, x, tokens, r, top_k, offset);
    context.synchronize();
    const std::size_t pool_before = context.pool().bytes_in_use();
    const std::vector<float> got = run(context, device.stack, batch, tokens, top_k, offset, in_place);
    CHECK(context.pool().bytes_in_use() == pool_before);  // the decode path allocates nothing
    worst[dtype == sy::DType::bf16].include(check_close(got, expected, kDecodeTolerance));
  }
  MESSAGE("decode: largest error / M and RMS error / RMS out: f32 weights " << worst[0].bound << ", "
                                                                           << worst[0].rms << "; bf16 weights "
                                                                           << worst[1].bound << ", " << worst[1].rms);
}

TEST_CASE("cuda routed_experts: the prefill path matches the reference, is deterministic, skips unused experts") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  Errors worst[2];  // f32, bf16 weights
  for (int round = 0; round < 10; ++round) {
    const sy::DType dtype = round % 2 ? sy::DType::bf16 : sy::DType::f32;
    const std::int64_t experts = draw(4, 24, random);
    const std::int64_t hidden = round % 4 < 2 ? 8 * draw(1, 48, random) : draw(1, 384, random);
    const std::int64_t inter = round % 3 ? 8 * draw(1, 32, random) : draw(1, 256, random);
    const std::int64_t tokens = round == 0 ? 40 : draw(40, 300, random);
    // Tokens choose among a subset, so that some experts receive none.
    std::vector<std::int32_t> allowed = all_experts(experts);
    std::shuffle(allowed.begin(), allowed.end(), random);
    allowed.resize(static_cast<std::size_t>(draw(std::max<std::int64_t>(1, experts / 2), experts - 1, random)));
    const int top_k = static_cast<int>(draw(1, std::min<std::int64_t>(static_cast<std::int64_t>(allowed.size()), 8),
                                            random));
    const bool bad_ids = round % 3 == 1, in_place = round % 5 == 3;
    INFO("round " << round << ", " << sy::dtype_name(dtype) << ": experts " << experts << " (" << allowed.size()
                  << " used), hidden " << hidden << ", inter " << inter << ", top_k " << top_k << ", tokens "
                  << tokens << ", bad ids " << bad_ids << ", in place " << in_place);
    REQUIRE_FALSE(cuda::routed_experts_uses_decode_path(tokens, top_k));

    const HostExperts w = random_experts(dtype, experts, hidden, inter, random);
    const std::vector<float> x = uniform(tokens * hidden, -2, 2, random);
    Routing r = route(tokens, top_k, allowed, random);
    if (bad_ids) spoil_some_ids(r, experts);
    const Expected expected = reference(w, x, tokens, r, top_k);

    DeviceExperts device = upload(context, w);
    Batch batch = upload_batch(context, device.stack, x, tokens, r, top_k);
    const std::vector<float> got = run(context, device.stack, batch, tokens, top_k);
    worst[dtype == sy::DType::bf16].include(
        check_close(got, expected, dtype == sy::DType::bf16 ? kPrefillBf16Tolerance : kPrefillF32Tolerance));
    // The same inputs give the same bits (no atomics in any sum), in place too.
    CHECK(run(context, device.stack, batch, tokens, top_k) == got);
    if (in_place) CHECK(run(context, device.stack, batch, tokens, top_k, 0, true) == got);
  }
  MESSAGE("prefill: largest error / M and RMS error / RMS out: f32 weights " << worst[0].bound << ", "
                                                                            << worst[0].rms << "; bf16 weights "
                                                                            << worst[1].bound << ", " << worst[1].rms);

  // Every id invalid: nothing to compute, out is zero.
  const HostExperts w = random_experts(sy::DType::bf16, 4, 24, 16, random);
  const std::int64_t tokens = 50;
  const std::vector<float> x = uniform(tokens * 24, -2, 2, random);
  Routing r{std::vector<std::int32_t>(tokens * 2, -1), std::vector<float>(tokens * 2, 1.0f)};
  DeviceExperts device = upload(context, w);
  Batch batch = upload_batch(context, device.stack, x, tokens, r, 2);
  for (float v : run(context, device.stack, batch, tokens, 2)) REQUIRE(v == 0.0f);
}

// One layer's experts quantized to ggml blocks: gate and up in `gate_type`, down in `down_type`.
// The host values are the blocks' dequantized weights, so the reference multiplies what the GPU
// decodes. Types that quant::quantize_rows cannot write (the IQ1, IQ2 and IQ3 lattices) get random
// blocks instead, their scales set so that the weights' RMS is the random floats' (uniform in
// [-a, a]: a / sqrt(3)).
struct BlockExperts {
  HostExperts values;
  std::vector<std::uint8_t> gate, up, down;
};

// Random blocks of `dtype` (random bytes, every block's scale d) whose weights have about the RMS
// of `like`; `like` becomes their values.
std::vector<std::uint8_t> random_lattice_blocks(sy::DType dtype, std::vector<float>& like, std::int64_t rows,
                                                std::int64_t n, std::mt19937& random) {
  const sy::DTypeInfo& info = sy::dtype_info(dtype);
  std::vector<std::uint8_t> blocks(sy::storage_bytes(dtype, static_cast<std::uint64_t>(rows * n)));
  for (auto& b : blocks) b = static_cast<std::uint8_t>(random());
  auto rms_at = [&](float d) {
    for (std::size_t at = 0; at < blocks.size(); at += static_cast<std::size_t>(info.block_bytes))
      sy::quant::set_block_scales(dtype, blocks.data() + at, d, 0.0f);
    std::vector<float> values(like.size());
    sy::quant::dequantize_rows(dtype, blocks.data(), values.data(), rows, n);
    double sum = 0;
    for (const float v : values) sum += static_cast<double>(v) * v;
    return std::make_pair(std::sqrt(sum / static_cast<double>(values.size())), values);
  };
  double target = 0;
  for (const float v : like) target += static_cast<double>(v) * v;
  target = std::sqrt(target / static_cast<double>(like.size()));
  const double unit = rms_at(1.0f).first;  // weights scale with d (IQ1_M keeps its sub-block scales)
  like = rms_at(static_cast<float>(target / unit)).second;
  return blocks;
}

BlockExperts random_block_experts(sy::DType gate_type, sy::DType down_type, std::int64_t experts, std::int64_t hidden,
                                  std::int64_t inter, std::mt19937& random) {
  BlockExperts b{random_experts(sy::DType::f32, experts, hidden, inter, random), {}, {}, {}};
  auto encode = [&random](sy::DType dtype, std::vector<float>& values, std::int64_t rows, std::int64_t n) {
    if (!sy::quant::has_encoder(dtype)) return random_lattice_blocks(dtype, values, rows, n, random);
    std::vector<std::uint8_t> blocks(sy::storage_bytes(dtype, static_cast<std::uint64_t>(rows * n)));
    sy::quant::quantize_rows(dtype, values.data(), blocks.data(), rows, n);
    sy::quant::dequantize_rows(dtype, blocks.data(), values.data(), rows, n);
    return blocks;
  };
  b.gate = encode(gate_type, b.values.gate, experts * inter, hidden);
  b.up = encode(gate_type, b.values.up, experts * inter, hidden);
  b.down = encode(down_type, b.values.down, experts * hidden, inter);
  return b;
}

DeviceExperts upload_blocks(cuda::DeviceContext& context, const BlockExperts& b, sy::DType gate_type,
                            sy::DType down_type) {
  DeviceExperts d;
  d.gate = to_device(context, b.gate);
  d.up = to_device(context, b.up);
  d.down = to_device(context, b.down);
  d.stack = cuda::ExpertStack{d.gate.data(),      d.up.data(),        d.down.data(), gate_type,
                              b.values.experts,   b.values.hidden,    b.values.inter, down_type};
  return d;
}

TEST_CASE("cuda routed_experts: experts in ggml blocks, decode and prefill, match the reference on their values") {
  // Refused without a GPU: partial blocks, a float dtype beside blocks, floats of mixed dtypes.
  auto refused = [](const cuda::ExpertStack& stack) {
    try {
      cuda::routed_experts_workspace_bytes(stack, 1, 2);
    } catch (const std::invalid_argument& error) {
      MESSAGE(std::string(error.what()));
      return true;
    }
    return false;
  };
  const cuda::ExpertStack q4k{nullptr, nullptr, nullptr, sy::DType::q4_k, 8, 512, 256, sy::DType::q6_k};
  CHECK_FALSE(refused(q4k));
  cuda::ExpertStack bad = q4k;
  bad.hidden = 512 + 32;  // not whole Q4_K blocks
  CHECK(refused(bad));
  bad = q4k;
  bad.inter = 256 + 32;  // not whole Q6_K blocks for down
  CHECK(refused(bad));
  bad.down_dtype = sy::DType::q8_0;  // whole Q8_0 blocks
  CHECK_FALSE(refused(bad));
  bad.down_dtype = sy::DType::bf16;
  CHECK(refused(bad));
  CHECK(refused(cuda::ExpertStack{nullptr, nullptr, nullptr, sy::DType::bf16, 8, 512, 256, sy::DType::f32}));
  // The prefill's workspace holds one expert's gate and up in bf16 beside the float layout's parts.
  const cuda::ExpertStack same_as_bf16{nullptr, nullptr, nullptr, sy::DType::bf16, 8, 512, 256};
  CHECK(cuda::routed_experts_workspace_bytes(q4k, 64, 2) ==
        cuda::routed_experts_workspace_bytes(same_as_bf16, 64, 2) + 2 * 512 * 256 * 2);
  CHECK(cuda::routed_experts_workspace_bytes(q4k, 1, 2) == cuda::routed_experts_workspace_bytes(same_as_bf16, 1, 2));

  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const sy::DType types[] = {sy::DType::q8_0,    sy::DType::q4_0,   sy::DType::q4_1,  sy::DType::q5_0,
                             sy::DType::q5_1,    sy::DType::q2_k,   sy::DType::q3_k,  sy::DType::q4_k,
                             sy::DType::q5_k,    sy::DType::q6_k,   sy::DType::iq2_xxs, sy::DType::iq2_xs,
                             sy::DType::iq2_s,   sy::DType::iq3_xxs, sy::DType::iq3_s, sy::DType::iq1_s,
                             sy::DType::iq1_m,   sy::DType::iq4_nl, sy::DType::iq4_xs, sy::DType::mxfp4};
  constexpr int kTypes = static_cast<int>(std::size(types));
  Errors worst_decode, worst_prefill;
  // Every type as gate and up and as down on both paths (even rounds decode, odd ones prefill): gate
  // and up type r / 2; down type 3 r + 1, then 3 r + 2 (mod kTypes), which give each type a round of
  // either parity.
  for (int round = 0; round < 2 * kTypes; ++round) {
    const sy::DType gate_type = types[round / 2], down_type = types[(3 * round + 1 + round / kTypes) % kTypes];
    const std::int64_t gate_block = sy::dtype_info(gate_type).block_elements;
    const std::int64_t down_block = sy::dtype_info(down_type).block_elements;
    const std::int64_t experts = draw(2, 10, random);
    const std::int64_t hidden = gate_block * draw(1, 1024 / gate_block, random);
    const std::int64_t inter = down_block * draw(1, 768 / down_block, random);
    const bool prefill = round % 2 == 1;
    const int top_k = static_cast<int>(draw(1, std::min<std::int64_t>(experts, 8), random));
    const std::int64_t tokens = prefill ? draw(40, 120, random) : draw(1, cuda::kDecodeMaxSlots / top_k, random);
    const bool bad_ids = round % 3 == 2 && tokens * top_k >= 4;
    INFO("round " << round << ": gate/up " << sy::dtype_name(gate_type) << ", down " << sy::dtype_name(down_type)
                  << ", experts " << experts << ", hidden " << hidden << ", inter " << inter << ", top_k " << top_k
                  << ", tokens " << tokens << ", bad ids " << bad_ids);
    REQUIRE(cuda::routed_experts_uses_decode_path(tokens, top_k) == !prefill);
    const BlockExperts b = random_block_experts(gate_type, down_type, experts, hidden, inter, random);
    const std::vector<float> x = uniform(tokens * hidden, -2, 2, random);
    Routing r = route(tokens, top_k, all_experts(experts), random);
    if (bad_ids) spoil_some_ids(r, experts);
    DeviceExperts device = upload_blocks(context, b, gate_type, down_type);
    REQUIRE_FALSE(cuda::routed_experts_prefill_is_grouped(device.stack));
    Batch batch = upload_batch(context, device.stack, x, tokens, r, top_k);
    const std::vector<float> got = run(context, device.stack, batch, tokens, top_k);
    const Expected expected = reference(b.values, x, tokens, r, top_k);
    if (prefill) {
      worst_prefill.include(check_close(got, expected, kPrefillBlocksTolerance));
      CHECK(run(context, device.stack, batch, tokens, top_k) == got);
    } else {
      worst_decode.include(check_close(got, expected, kDecodeTolerance));
    }
  }
  MESSAGE("blocks: largest error / M and RMS error / RMS out: decode " << worst_decode.bound << ", "
                                                                       << worst_decode.rms << "; prefill "
                                                                       << worst_prefill.bound << ", "
                                                                       << worst_prefill.rms);
}

TEST_CASE("cuda routed_experts: the grouped prefill kernels match the reference, many tiles, and replay in a graph") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  Errors worst;
  for (int round = 0; round < 8; ++round) {
    // Shapes of whole 16-byte rows (the grouped kernels' condition) that are not whole tiles:
    // depths not multiples of 32, widths not multiples of 64 or 128.
    const std::int64_t experts = draw(2, 40, random), hidden = 8 * draw(1, 72, random);
    const std::int64_t inter = 8 * draw(1, 40, random), tokens = draw(40, 400, random);
    // Even rounds: few experts share every token, so each gets several 64-row tiles; odd rounds:
    // tokens spread over many, so tiles are mostly partial and some experts get none.
    std::vector<std::int32_t> allowed = all_experts(experts);
    std::shuffle(allowed.begin(), allowed.end(), random);
    const int top_k = static_cast<int>(draw(1, std::min<std::int64_t>(experts, 8), random));
    if (round % 2 == 0)
      allowed.resize(static_cast<std::size_t>(std::min<std::int64_t>(experts, top_k + draw(0, 1, random))));
    const bool bad_ids = round % 3 == 2;
    INFO("round " << round << ": experts " << experts << " (" << allowed.size() << " used), hidden " << hidden
                  << ", inter " << inter << ", top_k " << top_k << ", tokens " << tokens << ", bad ids " << bad_ids);
    const HostExperts w = random_experts(sy::DType::bf16, experts, hidden, inter, random);
    const std::vector<float> x = uniform(tokens * hidden, -2, 2, random);
    Routing r = route(tokens, top_k, allowed, random);
    if (bad_ids) spoil_some_ids(r, experts);
    DeviceExperts device = upload(context, w);
    REQUIRE(cuda::routed_experts_prefill_is_grouped(device.stack));
    Batch batch = upload_batch(context, device.stack, x, tokens, r, top_k);
    const std::vector<float> got = run(context, device.stack, batch, tokens, top_k);
    worst.include(check_close(got, reference(w, x, tokens, r, top_k), kPrefillBf16Tolerance));
    CHECK(run(context, device.stack, batch, tokens, top_k) == got);

    if (round < 2) {  // nothing waits for the host: the call captures, and replays give the same bits
      const std::size_t out_bytes = got.size() * sizeof(float);
      SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(batch.out.data(), 0xff, out_bytes, context.stream()));
      CapturedGraph replay(context.stream(), [&] {
        cuda::routed_experts(context, device.stack, batch.x.as<float>(), tokens, batch.ids.as<std::int32_t>(),
                             batch.weights.as<float>(), top_k, batch.out.as<float>(), batch.workspace.data(),
                             batch.workspace_bytes);
      });
      replay.launch(context.stream());
      CHECK(to_host<float>(context, batch.out.data(), got.size()) == got);
    }
  }
  MESSAGE("grouped prefill: largest error / M " << worst.bound << ", RMS error / RMS out " << worst.rms);

  // Not grouped: f32 experts, rows that are not whole 16-byte pieces, misaligned weights.
  auto stack_of = [](sy::DType dtype, std::int64_t hidden, std::int64_t inter, std::uintptr_t base) {
    const auto* p = reinterpret_cast<const char*>(base);
    return cuda::ExpertStack{p, p, p, dtype, 4, hidden, inter};
  };
  CHECK(cuda::routed_experts_prefill_is_grouped(stack_of(sy::DType::bf16, 64, 32, 256)));
  CHECK_FALSE(cuda::routed_experts_prefill_is_grouped(stack_of(sy::DType::f32, 64, 32, 256)));
  CHECK_FALSE(cuda::routed_experts_prefill_is_grouped(stack_of(sy::DType::bf16, 60, 32, 256)));
  CHECK_FALSE(cuda::routed_experts_prefill_is_grouped(stack_of(sy::DType::bf16, 64, 36, 256)));
  CHECK_FALSE(cuda::routed_experts_prefill_is_grouped(stack_of(sy::DType::bf16, 64, 32, 258)));
}

TEST_CASE("cuda routed_experts: the decode path captured in a CUDA graph replays with new ids, weights and x") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::int64_t experts = 16, hidden = 1024, inter = 512, tokens = 2;
  const int top_k = 6;
  const HostExperts w = random_experts(sy::DType::bf16, experts, hidden, inter, random);
  DeviceExperts device = upload(context, w);
  std::vector<float> x = uniform(tokens * hidden, -2, 2, random);
  Routing r = route(tokens, top_k, all_experts(experts), random);
  Batch batch = upload_batch(context, device.stack, x, tokens, r, top_k);
  context.synchronize();

  const cudaStream_t stream = context.stream();
  CapturedGraph replay(stream, [&] {
    cuda::routed_experts(context, device.stack, batch.x.as<float>(), tokens, batch.ids.as<std::int32_t>(),
                         batch.weights.as<float>(), top_k, batch.out.as<float>(), batch.workspace.data(),
                         batch.workspace_bytes);
  });

  const std::size_t out_bytes = static_cast<std::size_t>(tokens * hidden) * sizeof(float);
  for (int step = 0; step < 3; ++step) {
    INFO("replay " << step);
    if (step > 0) {  // new inputs in the same buffers; pageable copies finish before they return
      x = uniform(tokens * hidden, -2, 2, random);
      r = route(tokens, top_k, all_experts(experts), random);
      if (step == 2) spoil_some_ids(r, experts);
      context.copy_to_device(batch.x.data(), x.data(), x.size() * sizeof(float));
      context.copy_to_device(batch.ids.data(), r.ids.data(), r.ids.size() * sizeof(std::int32_t));
      context.copy_to_device(batch.weights.data(), r.weights.data(), r.weights.size() * sizeof(float));
      context.synchronize();
    }
    SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(batch.out.data(), 0xff, out_bytes, stream));  // NaN: out must be written
    replay.launch(stream);
    const std::vector<float> got = to_host<float>(context, batch.out.data(), static_cast<std::size_t>(tokens * hidden));
    check_close(got, reference(w, x, tokens, r, top_k), kDecodeTolerance);
  }
}

TEST_CASE("cuda routed_experts: decode bandwidth at DeepSeek-V2-Lite and V3 shapes, prefill time (report)") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  std::mt19937 random(test_seed());
  struct Shape {
    const char* name;
    std::int64_t experts, hidden, inter;  // experts: as many as the timing needs, not the model's
    int top_k;
  };
  for (const Shape shape : {Shape{"DeepSeek-V2-Lite", 64, 2048, 1408, 6}, Shape{"DeepSeek-V3", 32, 7168, 2048, 8}}) {
    INFO(shape.name);
    // Weights: a constant bf16 (0x3c3c, about 0.0115); the timing does not depend on the values.
    const std::size_t matrix = static_cast<std::size_t>(shape.experts * shape.hidden * shape.inter) * 2;
    cuda::DeviceBuffer weights = context.allocate(3 * matrix, "the benchmark's experts");
    SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(weights.data(), 0x3c, 3 * matrix, context.stream()));
    const cuda::ExpertStack stack{weights.as<char>(), weights.as<char>() + matrix, weights.as<char>() + 2 * matrix,
                                  sy::DType::bf16,    shape.experts,               shape.hidden,
                                  shape.inter};
    // A different expert set each call, so that no call finds the last one's weights in L2.
    const int calls = 64;
    const Routing r = route(calls, shape.top_k, all_experts(shape.experts), random);
    const std::vector<float> x = uniform(shape.hidden, -2, 2, random);
    cuda::DeviceBuffer x_device = to_device(context, x), ids = to_device(context, r.ids);
    cuda::DeviceBuffer routing_weights = to_device(context, r.weights);
    cuda::DeviceBuffer out = context.allocate(shape.hidden * sizeof(float), "out");
    const std::size_t workspace_bytes = cuda::routed_experts_workspace_bytes(stack, 1, shape.top_k);
    cuda::DeviceBuffer workspace = context.allocate(workspace_bytes, "workspace");
    auto call = [&](int i) {
      cuda::routed_experts(context, stack, x_device.as<float>(), 1, ids.as<std::int32_t>() + i * shape.top_k,
                           routing_weights.as<float>() + i * shape.top_k, shape.top_k, out.as<float>(),
                           workspace.data(), workspace_bytes);
    };
    for (int i = 0; i < 4; ++i) call(i);
    cudaEvent_t start, stop;
    SWITCHYARD_CUDA_CHECK(cudaEventCreate(&start));
    SWITCHYARD_CUDA_CHECK(cudaEventCreate(&stop));
    SWITCHYARD_CUDA_CHECK(cudaEventRecord(start, context.stream()));
    for (int i = 0; i < calls; ++i) call(i);
    SWITCHYARD_CUDA_CHECK(cudaEventRecord(stop, context.stream()));
    SWITCHYARD_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SWITCHYARD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    const double seconds = ms / 1e3 / calls;
    const double bytes = 3.0 * shape.top_k * static_cast<double>(shape.hidden * shape.inter) * 2;
    MESSAGE(std::string(shape.name) << " decode, 1 token, top-" << shape.top_k << ": " << seconds * 1e6 << " us a call, "
                       << bytes / seconds / 1e9 << " GB/s of expert weights (H200: 4800 theoretical)");
    for (float v : to_host<float>(context, out.data(), static_cast<std::size_t>(shape.hidden)))
      REQUIRE(std::isfinite(v));

    // Prefill of 512 tokens with random routing over all experts.
    const std::int64_t tokens = 512;
    const Routing pr = route(tokens, shape.top_k, all_experts(shape.experts), random);
    const std::vector<float> px = uniform(tokens * shape.hidden, -2, 2, random);
    cuda::DeviceBuffer px_device = to_device(context, px), pids = to_device(context, pr.ids);
    cuda::DeviceBuffer pweights = to_device(context, pr.weights);
    cuda::DeviceBuffer pout = context.allocate(px.size() * sizeof(float), "out");
    const std::size_t prefill_bytes = cuda::routed_experts_workspace_bytes(stack, tokens, shape.top_k);
    cuda::DeviceBuffer prefill_workspace = context.allocate(prefill_bytes, "workspace");
    auto prefill = [&] {
      cuda::routed_experts(context, stack, px_device.as<float>(), tokens, pids.as<std::int32_t>(),
                           pweights.as<float>(), shape.top_k, pout.as<float>(), prefill_workspace.data(),
                           prefill_bytes);
    };
    prefill();
    SWITCHYARD_CUDA_CHECK(cudaEventRecord(start, context.stream()));
    const int prefills = 5;
    for (int i = 0; i < prefills; ++i) prefill();
    SWITCHYARD_CUDA_CHECK(cudaEventRecord(stop, context.stream()));
    SWITCHYARD_CUDA_CHECK(cudaEventSynchronize(stop));
    SWITCHYARD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    const double flops = 2.0 * 3 * tokens * shape.top_k * static_cast<double>(shape.hidden * shape.inter);
    // Every expert is chosen at least once: each weight is read at least once.
    const double all_bytes = 3.0 * shape.experts * static_cast<double>(shape.hidden * shape.inter) * 2;
    const double prefill_seconds = ms / prefills / 1e3;
    MESSAGE(std::string(shape.name) << " prefill, " << tokens << " tokens over " << shape.experts << " experts ("
                       << std::string(cuda::routed_experts_prefill_is_grouped(stack) ? "grouped" : "per expert")
                       << "): " << ms / prefills << " ms, " << flops / prefill_seconds / 1e12 << " TFLOP/s, "
                       << all_bytes / prefill_seconds / 1e9 << " GB/s of expert weights (H200: 4800 theoretical)");
    SWITCHYARD_CUDA_CHECK(cudaEventDestroy(start));
    SWITCHYARD_CUDA_CHECK(cudaEventDestroy(stop));
  }
}

#else  // built without the CUDA backend

TEST_CASE("cuda routed_experts: skipped, built without the CUDA backend") { MESSAGE("skipped: built without CUDA"); }

#endif
