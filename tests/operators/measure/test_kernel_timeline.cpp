// The kernel timeline's report (operators/measure/kernel_timeline.h): stamps made from known gaps, with
// jitter, must come back as those gaps, per kernel and per position of the repeating pattern.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "operators/measure/kernel_timeline.h"
#include "tests/test_seed.h"

namespace sy = switchyard;

namespace {

// A step: an embedding, `layers` x (norm, gemv, attention, gemv), a head.
std::vector<std::string> step_launches(int layers) {
  std::vector<std::string> launches{"_ZN10switchyard4cuda12_GLOBAL__N_114embedding_rowsEPf"};
  for (int l = 0; l < layers; ++l) {
    launches.push_back("_ZN10switchyard4cuda12_GLOBAL__N_113rms_norm_rowsIfEEvPf");
    launches.push_back("_ZN10switchyard4cuda12_GLOBAL__N_118gemv_shared_kernelEPf");
    launches.push_back("attend");
    launches.push_back("_ZN10switchyard4cuda12_GLOBAL__N_118gemv_shared_kernelEPf");
  }
  launches.push_back("argmax");
  return launches;
}

}  // namespace

TEST_CASE("kernel timeline: short names drop namespaces, return types and parameters, not template arguments") {
  CHECK(sy::short_kernel_name("_ZN10switchyard4cuda12_GLOBAL__N_118gemv_shared_kernelEPf") == "gemv_shared_kernel");
  CHECK(sy::short_kernel_name("_ZN10switchyard4cuda12_GLOBAL__N_115route_one_tokenIfLb1EEEvPf") ==
        "route_one_token<float, true>");
  CHECK(sy::short_kernel_name("plain_name") == "plain_name");
  CHECK(sy::short_kernel_name("ns::kernel<ns::T<2> >(int)") == "kernel<ns::T<2> >");
}

TEST_CASE("kernel timeline: the gaps between stamps come back per kernel, per step and per position") {
  const std::uint32_t seed = sy::testing::test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> jitter(-0.05, 0.05);
  const int layers = 12, steps = 9;
  const std::vector<std::string> launches = step_launches(layers);
  // Each launch's gap in us (the head's gap is the way to the next step).
  const std::map<std::string, double> gap{{"embedding_rows", 3.0}, {"rms_norm_rows<float>", 2.0}, {"attend", 7.0},
                                          {"argmax", 40.0}};
  std::vector<std::uint64_t> stamps;
  double now = 1e9;
  for (int s = 0; s < steps; ++s) {
    int gemv = 0;
    for (const std::string& launch : launches) {
      stamps.push_back(static_cast<std::uint64_t>(now * 1e3));
      const std::string name = sy::short_kernel_name(launch);
      // The two GEMVs of a layer differ: 5 us, then 4.
      const double base = name == "gemv_shared_kernel" ? (gemv++ % 2 == 0 ? 5.0 : 4.0) : gap.at(name);
      now += base * (1 + jitter(random));
    }
  }
  // The layers' span: from the first layer's first launch to the head's.
  const sy::LaunchSpan layer_span{1, launches.size() - 1};
  const sy::KernelTimeline t = sy::analyse_kernel_timeline(launches, stamps, layer_span);
  CHECK(t.span_us == doctest::Approx(layers * (2 + 5 + 7 + 4)).epsilon(0.03));
  CHECK(t.steps == steps);
  CHECK(t.launches_per_step == static_cast<std::int64_t>(launches.size()));
  const double step = 3 + layers * (2 + 5 + 7 + 4) + 40;
  CHECK(t.step_us == doctest::Approx(step).epsilon(0.03));
  CHECK(t.between_us == doctest::Approx(40).epsilon(0.06));
  REQUIRE(t.by_kernel.size() == 4);  // the head's gap is not a kernel's
  CHECK(t.by_kernel[0].kernel == "gemv_shared_kernel");  // most time first
  CHECK(t.by_kernel[0].launches == 2 * layers);
  CHECK(t.by_kernel[0].step_us == doctest::Approx(9.0 * layers).epsilon(0.03));
  CHECK(t.by_kernel[1].kernel == "attend");
  CHECK(t.by_kernel[1].median_us == doctest::Approx(7).epsilon(0.06));
  CHECK(t.by_kernel[2].kernel == "rms_norm_rows<float>");
  CHECK(t.by_kernel[2].step_us == doctest::Approx(2.0 * layers).epsilon(0.03));
  CHECK(t.by_kernel[3].kernel == "embedding_rows");
  // The pattern: four launches, each position's own median (the GEMVs told apart).
  REQUIRE(t.cycle.size() == 4);
  std::map<std::string, double> seen;
  for (std::size_t j = 0; j < t.cycle.size(); ++j) {
    const std::string& name = t.cycle[j].kernel;
    CHECK(t.cycle[j].launches >= (layers / 2) * steps);
    if (name == "gemv_shared_kernel") {
      // Which of the two GEMVs this is: the one after the norm has 5 us.
      const std::string& before = t.cycle[(j + 3) % 4].kernel;
      CHECK(t.cycle[j].median_us == doctest::Approx(before == "rms_norm_rows<float>" ? 5.0 : 4.0).epsilon(0.06));
    } else {
      CHECK(t.cycle[j].median_us == doctest::Approx(gap.at(name)).epsilon(0.06));
    }
  }
}

TEST_CASE("kernel timeline: a timer that advances in steps as long as the kernels is said") {
  const std::uint32_t seed = sy::testing::test_seed();
  INFO("seed " << seed << " (SWITCHYARD_TEST_SEED replays it)");
  std::mt19937 random(seed);
  const std::vector<std::string> launches = step_launches(4);
  // Gaps of 1-9 us on a timer that advances every `tick` ns.
  for (const std::uint64_t tick : {std::uint64_t{32}, std::uint64_t{4096}}) {
    INFO("tick " << tick << " ns");
    std::uniform_int_distribution<int> gap_ns(1000, 9000);
    std::vector<std::uint64_t> stamps;
    std::uint64_t now = 1'000'000'000;
    std::size_t equal = 0;
    for (int i = 0; i < 10 * static_cast<int>(launches.size()); ++i) {
      stamps.push_back(now / tick * tick);
      if (i > 0) equal += stamps.back() == stamps[stamps.size() - 2];
      now += static_cast<std::uint64_t>(gap_ns(random));
    }
    const sy::KernelTimeline t = sy::analyse_kernel_timeline(launches, stamps);
    CHECK(t.equal_share == doctest::Approx(static_cast<double>(equal) / static_cast<double>(stamps.size() - 1)));
    if (tick == 32) CHECK(equal == 0);
    else CHECK(t.equal_share > 0.05);  // gaps under 4.1 us land in one step of the timer a good share of the time
    const bool said = sy::format_kernel_timeline(t).find("equal the one before") != std::string::npos;
    CHECK(said == (tick == 4096));
  }
}

TEST_CASE("kernel timeline: stamps that do not make whole steps, or go back in time, are refused") {
  const std::vector<std::string> launches = step_launches(2);
  std::vector<std::uint64_t> stamps(3 * launches.size());
  for (std::size_t i = 0; i < stamps.size(); ++i) stamps[i] = 1000 * (i + 1);
  CHECK_NOTHROW(sy::analyse_kernel_timeline(launches, stamps));
  CHECK(sy::analyse_kernel_timeline(launches, stamps).span_us == 0);
  // A span needs the launch after it, inside the step, and must not run backwards.
  CHECK_THROWS_AS(sy::analyse_kernel_timeline(launches, stamps, sy::LaunchSpan{0, launches.size()}), sy::InputError);
  CHECK_THROWS_AS(sy::analyse_kernel_timeline(launches, stamps, sy::LaunchSpan{3, 2}), sy::InputError);
  std::vector<std::uint64_t> short_by_one(stamps.begin(), stamps.end() - 1);
  CHECK_THROWS_AS(sy::analyse_kernel_timeline(launches, short_by_one), sy::InputError);
  CHECK_THROWS_AS(sy::analyse_kernel_timeline({}, stamps), sy::InputError);
  std::vector<std::uint64_t> backwards = stamps;
  backwards[5] = 10;
  CHECK_THROWS_AS(sy::analyse_kernel_timeline(launches, backwards), sy::InputError);
  // One step is not enough for a step's length.
  std::vector<std::uint64_t> one_step(stamps.begin(), stamps.begin() + static_cast<std::ptrdiff_t>(launches.size()));
  CHECK_THROWS_AS(sy::analyse_kernel_timeline(launches, one_step), sy::InputError);
}
