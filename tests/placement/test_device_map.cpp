// --device_map: its spelling, its refusals, and check's memory of logical GPUs folded onto
// physical ones (the folded devices' totals against the physical GPU's budget).
#include "core/device_map.h"

#include <cstdint>
#include <string>

#include "core/error.h"
#include "placement/check.h"
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;

TEST_CASE("device map: the spellings map logical GPUs onto physical ones") {
  const DeviceMap identity;
  CHECK(identity.identity());
  CHECK(identity.physical(5) == 5);
  const DeviceMap all = DeviceMap::parse("all=0");
  CHECK_FALSE(all.identity());
  for (int logical = 0; logical < 8; ++logical) CHECK(all.physical(logical) == 0);
  CHECK(DeviceMap::parse("1").physical(6) == 1);
  CHECK(DeviceMap::parse("*=cuda:1").physical(3) == 1);
  const DeviceMap ranges = DeviceMap::parse(" cuda:0-3=0, cuda:4-7 = cuda:1 ");
  CHECK(ranges.physical(0) == 0);
  CHECK(ranges.physical(3) == 0);
  CHECK(ranges.physical(4) == 1);
  CHECK(ranges.physical(7) == 1);
  CHECK(ranges.physical(8) == 8);  // not listed: its own number
  CHECK(ranges.str() == "cuda:0=0,cuda:1=0,cuda:2=0,cuda:3=0,cuda:4=1,cuda:5=1,cuda:6=1,cuda:7=1");
  const DeviceMap mixed = DeviceMap::parse("CUDA:2=1,all=0");
  CHECK(mixed.physical(2) == 1);
  CHECK(mixed.physical(0) == 0);
  CHECK(mixed.physical(9) == 0);
  const auto folded = ranges.folded(6);
  REQUIRE(folded.size() == 2);
  CHECK(folded.at(0) == std::vector<int>{0, 1, 2, 3});
  CHECK(folded.at(1) == std::vector<int>{4, 5});
  // Parsing its own canonical text gives the same map.
  const DeviceMap again = DeviceMap::parse(mixed.str());
  for (int logical = 0; logical < 10; ++logical) CHECK(again.physical(logical) == mixed.physical(logical));
}

TEST_CASE("device map: a bad map is a usage error naming the flag and the item") {
  for (const char* bad : {"", " ", "cuda:0=", "=0", "cuda:0=x", "cuda:x=0", "cuda:3-1=0", "cuda:0=0,cuda:0=1",
                          "cuda:0-2=0,cuda:2=1", "0,1", "all=0,all=1", "cuda:0=0,,cuda:1=0", "cuda:0=1024",
                          "cuda:99999=0", "gpu:0=0", "cuda:-1=0", "cuda:0=0=1"}) {
    INFO("--device_map '" << bad << "'");
    try {
      (void)DeviceMap::parse(bad);
      FAIL("accepted");
    } catch (const InputError& error) {
      CHECK(error.exit_code() == 2);
      CHECK(std::string(error.what()).find("--device_map") != std::string::npos);
    }
  }
}

TEST_CASE("device map: check adds the folded GPUs' memory against the physical GPU's budget") {
  // Needs no GPU: the dry run only.
  CheckOptions options;
  options.model.arch = "deepseek-v3";
  options.model.weight_dtype = "q4_k_m";
  options.profile = source_path("optimize_rules/DeepSeek-V3-Chat-multi-gpu-4.yaml");
  options.budget.gpu_bytes = {std::uint64_t{24} << 30};
  const CheckResult alone = run_check(options);
  REQUIRE_FALSE(alone.diagnostics.has_errors());
  CHECK(alone.physical_gpus.empty());
  std::uint64_t logical_total = 0;
  for (const DeviceMemory& m : alone.memory)
    if (m.device.is_cuda()) logical_total += m.total_bytes();
  options.budget.device_map = DeviceMap::parse("all=0");
  const CheckResult folded = run_check(options);
  REQUIRE(folded.physical_gpus.size() == 1);
  CHECK(folded.physical_gpus[0].gpu == 0);
  CHECK(folded.physical_gpus[0].logical.size() == 4);
  CHECK(folded.physical_gpus[0].total_bytes == logical_total);
  const bool over = logical_total > (std::uint64_t{24} << 30);
  CHECK(folded.diagnostics.has_errors() == over);
  // Two physical GPUs, two logical ones each, each under a budget of exactly its two's total:
  // fits; a byte less on GPU 1 does not.
  options.budget.device_map = DeviceMap::parse("cuda:0-1=0,cuda:2-3=1");
  options.budget.gpu_bytes = {std::uint64_t{1} << 40, std::uint64_t{1} << 40};
  const CheckResult two = run_check(options);
  REQUIRE(two.physical_gpus.size() == 2);
  CHECK_FALSE(two.diagnostics.has_errors());
  options.budget.gpu_bytes = {std::uint64_t{1} << 40, two.physical_gpus[1].total_bytes - 1};
  const CheckResult tight = run_check(options);
  REQUIRE(tight.diagnostics.has_errors());
  bool named = false;
  for (const Diagnostic& d : tight.diagnostics.items())
    if (d.code == "over-budget" && d.message.find("GPU 1 runs cuda:2, cuda:3") != std::string::npos) named = true;
  CHECK(named);
}

