// cuda::router_gate (decode's router GEMV and gate in one launch) against a double-precision
// router and the CPU gate, and its hand-off to host memory, on fresh random inputs.
//
// Tolerances: logits |got - ref| <= 1e-5 * sum_k |w_k x_k| (f32 accumulation over <= 7168 terms,
// a loose bound on a ~sqrt(k) u error). The ids and weights are checked against the CPU kernel fed
// the kernel's own logits: the same algorithm in f32, so ids identical and weights within the
// moe_gate test's 2e-6 relative + 1e-7 (expf and f32 sums). The hand-off copies exactly.
#include <doctest/doctest.h>

#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "operators/cpu/kernels/moe_gate.h"
#include "operators/cuda/kernels/device_context.h"
#include "operators/cuda/kernels/host_flag.h"
#include "operators/cuda/kernels/moe_gate.h"
#include "tests/cuda_test_support.h"
#include "tests/gate_presets.h"
#include "tests/gate_test_support.h"
#include "tests/swiglu_test_support.h"

namespace cpu = switchyard::cpu;
namespace sy = switchyard;
namespace cuda = switchyard::cuda;
namespace presets = switchyard::gate_presets;
using namespace switchyard::testing;
using switchyard::gate_testing::gate_cases;
using switchyard::gate_testing::GateCase;
using switchyard::swiglu_testing::check_swiglu;

namespace {

// Host-mapped buffers for a hand-off and their device views.
struct MappedHandOff {
  cuda::PinnedBuffer x, ids, weights;
  cuda::HostFlags ready{1};
  MappedHandOff(std::int64_t hidden, int top_k)
      : x(static_cast<std::size_t>(hidden) * sizeof(float), "x"),
        ids(static_cast<std::size_t>(top_k) * sizeof(std::int32_t), "ids"),
        weights(static_cast<std::size_t>(top_k) * sizeof(float), "weights") {}
  cuda::GateHandOff view(const float* x_device, std::int64_t hidden) {
    return cuda::GateHandOff{x_device, hidden, x.device_view_as<float>(), ids.device_view_as<std::int32_t>(),
                             weights.device_view_as<float>(), ready.device_flag(0)};
  }
};

void check_routing(const switchyard::MoeGateConfig& c, const std::vector<float>& logits, const std::vector<std::int32_t>& ids,
                   const std::vector<float>& weights) {
  std::vector<std::int32_t> cpu_ids(static_cast<std::size_t>(c.top_k));
  std::vector<float> cpu_weights(static_cast<std::size_t>(c.top_k));
  cpu::moe_gate(c, logits.data(), 1, cpu_ids.data(), cpu_weights.data());
  CHECK(ids == cpu_ids);
  for (int i = 0; i < c.top_k; ++i) {
    INFO("slot " << i);
    CHECK(std::fabs(weights[i] - cpu_weights[i]) <= 2e-6 * std::fabs(cpu_weights[i]) + 1e-7);
  }
}

void check_logits(const std::vector<float>& router, const std::vector<float>& x, std::int64_t hidden,
                  const std::vector<float>& got_logits) {
  for (std::size_t e = 0; e < got_logits.size(); ++e) {
    double expected = 0, magnitude = 0;
    for (std::int64_t k = 0; k < hidden; ++k) {
      const double product = static_cast<double>(router[e * static_cast<std::size_t>(hidden) + k]) * x[k];
      expected += product;
      magnitude += std::fabs(product);
    }
    INFO("expert " << e);
    REQUIRE(std::fabs(got_logits[e] - expected) <= 1e-5 * magnitude);
  }
}

// The GPU, a replayable random stream and router_gate's counter (zero), for the tests below.
struct RouterGateFixture {
  cuda::DeviceContext context{0};
  std::uint32_t seed = test_seed();
  std::mt19937 random{seed};
  cuda::DeviceBuffer counter = context.allocate(sizeof(std::int32_t), "counter");
  RouterGateFixture() {
    REQUIRE(cudaMemsetAsync(counter.data(), 0, sizeof(std::int32_t), context.stream()) == cudaSuccess);
  }
};

// One preset on fresh inputs through router_gate, handing off or not (drawn), with a side SwiGLU or
// not, checked against the references. False when a side is refused, as it must be past 256
// experts (a side launch's block has 256 threads).
bool check_router_gate(RouterGateFixture& f, GateCase gate, bool with_side) {
  cuda::DeviceContext& context = f.context;
  std::mt19937& random = f.random;
  switchyard::MoeGateConfig c = gate.config;
  const std::int64_t hidden = with_side ? 8 * draw(1, 600, random) : 4 * draw(1, 1800, random);  // 7168 at most
  const std::int64_t rows = with_side ? draw(1, 400, random) : 0;  // any count: the last side block is partial
  const sy::DType dtype = draw(0, 1, random) == 1 ? sy::DType::bf16 : sy::DType::f32;
  INFO(gate.name << ", hidden " << hidden << ", side rows " << rows << " (" << sy::dtype_name(dtype) << ")");
  const std::vector<float> router = uniform(static_cast<std::size_t>(c.n_experts * hidden), -1, 1, random);
  const std::vector<float> x = uniform(static_cast<std::size_t>(hidden), -1, 1, random);
  const Weight gate_w(static_cast<std::size_t>(rows * hidden), dtype, random);
  const Weight up_w(static_cast<std::size_t>(rows * hidden), dtype, random);
  cuda::DeviceBuffer bias;
  if (!gate.bias.empty()) {
    bias = to_device(context, gate.bias);
    c.score_correction_bias = bias.as<float>();
  }
  cuda::DeviceBuffer router_device = to_device(context, router), x_device = to_device(context, x);
  cuda::DeviceBuffer logits = context.allocate(static_cast<std::size_t>(c.n_experts) * sizeof(float), "logits");
  cuda::DeviceBuffer ids = context.allocate(static_cast<std::size_t>(c.top_k) * sizeof(std::int32_t), "ids");
  cuda::DeviceBuffer weights = context.allocate(static_cast<std::size_t>(c.top_k) * sizeof(float), "weights");
  cuda::DeviceBuffer gate_device, up_device, h;
  cuda::SideSwiglu side;
  if (with_side) {
    gate_device = gate_w.upload(context);
    up_device = up_w.upload(context);
    h = context.allocate(static_cast<std::size_t>(rows) * sizeof(float), "h");
    side = {gate_device.data(), up_device.data(), dtype, hidden, rows, x_device.as<float>(), h.as<float>()};
  }
  const bool hand_off = draw(0, 1, random) == 1;
  MappedHandOff host(hidden, c.top_k);
  const cuda::GateHandOff view = host.view(x_device.as<float>(), hidden);
  REQUIRE(cuda::router_gate_supports(hidden, router_device.as<float>(), x_device.as<float>()));
  const auto launch = [&] {
    cuda::router_gate(c, router_device.as<float>(), hidden, x_device.as<float>(), logits.as<float>(),
                      ids.as<std::int32_t>(), weights.as<float>(), f.counter.as<std::int32_t>(), context.stream(),
                      hand_off ? &view : nullptr, with_side ? &side : nullptr);
  };
  if (with_side && !cuda::router_gate_side_supports(c, side)) {
    CHECK(c.n_experts > 256);
    CHECK_THROWS_AS(launch(), std::invalid_argument);
    return false;
  }
  launch();
  const auto got_logits = to_host<float>(context, logits, static_cast<std::size_t>(c.n_experts));
  const auto got_ids = to_host<std::int32_t>(context, ids, static_cast<std::size_t>(c.top_k));
  const auto got_weights = to_host<float>(context, weights, static_cast<std::size_t>(c.top_k));
  CHECK(to_host<std::int32_t>(context, f.counter, 1)[0] == 0);
  check_logits(router, x, hidden, got_logits);
  gate.config.score_correction_bias = gate.bias.empty() ? nullptr : gate.bias.data();
  check_routing(gate.config, got_logits, got_ids, got_weights);
  if (with_side)
    check_swiglu(gate_w, up_w, hidden, rows, x.data(), to_host<float>(context, h, static_cast<std::size_t>(rows)).data());
  if (hand_off) {
    host.ready.host_wait(0, 1, context.stream());
    CHECK(std::memcmp(host.x.data(), x.data(), x.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(host.ids.data(), got_ids.data(), got_ids.size() * sizeof(std::int32_t)) == 0);
    CHECK(std::memcmp(host.weights.data(), got_weights.data(), got_weights.size() * sizeof(float)) == 0);
  }
  return true;
}

}  // namespace

TEST_CASE("cuda router_gate: logits, ids, weights and the hand-off match the references for every preset") {
  if (no_gpu()) return;
  RouterGateFixture f;
  INFO("seed " << f.seed << " (SWITCHYARD_TEST_SEED replays it)");
  for (const GateCase& gate : gate_cases(f.random)) check_router_gate(f, gate, false);
}

TEST_CASE("cuda router_gate: a side SwiGLU in the same launch matches its reference and leaves the routing intact") {
  if (no_gpu()) return;
  RouterGateFixture f;
  INFO("seed " << f.seed << " (SWITCHYARD_TEST_SEED replays it)");
  int sides = 0;
  for (const GateCase& gate : gate_cases(f.random)) sides += check_router_gate(f, gate, true) ? 1 : 0;
  CHECK(sides > 0);
}

TEST_CASE("cuda router_gate: a graph replayed on new inputs routes each one (the counter resets itself)") {
  if (no_gpu()) return;
  cuda::DeviceContext context(0);
  const std::uint32_t seed = test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const switchyard::MoeGateConfig c = presets::deepseek_v2_gate(64, 6, 0, 0, 16.0f);
  const std::int64_t hidden = 2048;
  cuda::DeviceBuffer router = to_device(context, uniform(static_cast<std::size_t>(64 * hidden), -1, 1, random));
  cuda::DeviceBuffer x = context.allocate(static_cast<std::size_t>(hidden) * sizeof(float), "x");
  cuda::DeviceBuffer counter = context.allocate(sizeof(std::int32_t), "counter");
  REQUIRE(cudaMemsetAsync(counter.data(), 0, sizeof(std::int32_t), context.stream()) == cudaSuccess);
  cuda::DeviceBuffer logits = context.allocate(64 * sizeof(float), "logits");
  cuda::DeviceBuffer ids = context.allocate(6 * sizeof(std::int32_t), "ids");
  cuda::DeviceBuffer weights = context.allocate(6 * sizeof(float), "weights");
  context.synchronize();
  CapturedGraph graph(context.stream(), [&] {
    cuda::router_gate(c, router.as<float>(), hidden, x.as<float>(), logits.as<float>(), ids.as<std::int32_t>(),
                      weights.as<float>(), counter.as<std::int32_t>(), context.stream());
  });
  for (int replay = 0; replay < 5; ++replay) {
    INFO("replay " << replay);
    const std::vector<float> input = uniform(static_cast<std::size_t>(hidden), -1, 1, random);
    context.copy_to_device(x.data(), input.data(), input.size() * sizeof(float));
    graph.launch(context.stream());
    const auto got_logits = to_host<float>(context, logits, 64);
    check_routing(c, got_logits, to_host<std::int32_t>(context, ids, 6), to_host<float>(context, weights, 6));
    CHECK(to_host<std::int32_t>(context, counter, 1)[0] == 0);
  }
}

TEST_CASE("cuda router_gate: shapes it cannot take are refused before any launch") {
  const switchyard::MoeGateConfig c = presets::deepseek_v2_gate(64, 6, 0, 0, 16.0f);
  alignas(16) float buffer[8] = {};
  CHECK_FALSE(cuda::router_gate_supports(6, buffer, buffer));      // hidden not a multiple of 4
  CHECK_FALSE(cuda::router_gate_supports(4, buffer + 1, buffer));  // router misaligned
  CHECK_THROWS_AS(cuda::router_gate(c, buffer, 6, buffer, nullptr, nullptr, nullptr, nullptr, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::router_gate(presets::qwen3_moe_gate(1024, 8, true), buffer, 4, buffer, nullptr, nullptr, nullptr,
                                    nullptr, nullptr),
                  std::invalid_argument);
  // Side SwiGLUs it cannot take: more experts than a side launch's block has threads, a missing
  // weight, rows of a width gemv_swiglu refuses.
  float* h = buffer;
  const cuda::SideSwiglu side{buffer, buffer, sy::DType::f32, 8, 4, buffer, h};
  CHECK(cuda::router_gate_side_supports(c, side));
  CHECK_FALSE(cuda::router_gate_side_supports(presets::qwen3_moe_gate(512, 8, true), side));
  CHECK_FALSE(cuda::router_gate_side_supports(c, {nullptr, buffer, sy::DType::f32, 8, 4, buffer, h}));
  CHECK_FALSE(cuda::router_gate_side_supports(c, {buffer, buffer, sy::DType::f32, 6, 4, buffer, h}));
  CHECK_FALSE(cuda::router_gate_side_supports(c, {buffer, buffer, sy::DType::f16, 8, 4, buffer, h}));
  std::int32_t counter = 0;
  const cuda::SideSwiglu misaligned{buffer + 1, buffer, sy::DType::f32, 8, 4, buffer, h};
  CHECK_THROWS_AS(cuda::router_gate(c, buffer, 4, buffer, nullptr, nullptr, nullptr, &counter, nullptr, nullptr,
                                    &misaligned),
                  std::invalid_argument);
}

#else

TEST_CASE("cuda router_gate: skipped, built without the CUDA backend") { MESSAGE("skipped: built without CUDA"); }

#endif
