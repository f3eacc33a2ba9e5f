// switchyard split: layer-range regexes, the balancing, and split profiles that pass check.
#include <random>

#include "placement/split.h"
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;

TEST_CASE("split: layer-range regexes match exactly their range") {
  for (int first = 0; first <= 130; first += 1)
    for (int last = first; last <= 130; last += (last < 20 ? 1 : 7)) {
      const std::string alternation = layer_range_regex(first, last);
      Regex regex;
      Regex::CompileError error;
      REQUIRE_MESSAGE(Regex::compile("^model\\.layers\\.(" + alternation + ")\\.", regex, error), alternation);
      for (int layer = 0; layer <= 140; ++layer) {
        const bool inside = layer >= first && layer <= last;
        const bool matched =
            regex.search("model.layers." + std::to_string(layer) + ".self_attn") == Regex::Outcome::match;
        if (matched != inside) FAIL_CHECK(first << "-" << last << " as '" << alternation << "' vs layer " << layer);
      }
    }
  CHECK(layer_range_regex(15, 29) == "1[5-9]|2[0-9]");
  CHECK(layer_range_regex(0, 14) == "[0-9]|1[0-4]");
  CHECK(layer_range_regex(45, 60) == "4[5-9]|5[0-9]|60");
}

namespace {

// The best possible max load, by trying every way to cut `bytes` into `gpus` contiguous parts.
double brute_force_best(const std::vector<std::uint64_t>& bytes, const std::vector<double>& budgets, std::size_t first,
                        std::size_t gpu, std::uint64_t first_extra, std::uint64_t last_extra) {
  const std::size_t gpus = budgets.size();
  if (gpu == gpus - 1) {
    double load = last_extra + (gpu == 0 ? first_extra : 0);
    for (std::size_t i = first; i < bytes.size(); ++i) load += static_cast<double>(bytes[i]);
    return load / budgets[gpu];
  }
  double best = 1e300;
  double load = gpu == 0 ? static_cast<double>(first_extra) : 0.0;
  for (std::size_t end = first + 1; end + (gpus - gpu - 1) <= bytes.size(); ++end) {
    load += static_cast<double>(bytes[end - 1]);
    best = std::min(best, std::max(load / budgets[gpu], brute_force_best(bytes, budgets, end, gpu + 1, first_extra, last_extra)));
  }
  return best;
}

}  // namespace

TEST_CASE("split: balancing is optimal on random layer sizes and budgets") {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t layers = 2 + rng() % 9;
    const std::size_t gpus = 1 + rng() % std::min<std::size_t>(layers, 4);
    std::vector<std::uint64_t> bytes(layers);
    for (auto& b : bytes) b = 1 + rng() % 1000;
    std::vector<double> budgets(gpus);
    for (auto& b : budgets) b = 1.0 + static_cast<double>(rng() % 4);
    const std::uint64_t first_extra = rng() % 500, last_extra = rng() % 500;
    const auto shares = balance_layers(bytes, budgets, first_extra, last_extra);
    REQUIRE(shares.size() == gpus);
    double worst = 0;
    int next = 0;
    for (std::size_t g = 0; g < gpus; ++g) {
      CHECK(shares[g].first_layer == next);
      CHECK(shares[g].last_layer >= shares[g].first_layer);
      next = shares[g].last_layer + 1;
      worst = std::max(worst, static_cast<double>(shares[g].bytes) / budgets[g]);
    }
    CHECK(next == static_cast<int>(layers));
    CHECK(worst == doctest::Approx(brute_force_best(bytes, budgets, 0, 0, first_extra, last_extra)));
  }
}

TEST_CASE("split: a bigger card gets more layers") {
  const std::vector<std::uint64_t> bytes(60, 100);
  const auto shares = balance_layers(bytes, {24.0, 48.0}, 0, 0);
  CHECK(shares[0].last_layer - shares[0].first_layer + 1 == 20);
  CHECK(shares[1].last_layer - shares[1].first_layer + 1 == 40);
}

namespace {

CheckResult check_base(const std::string& arch, const std::string& profile) {
  CheckOptions options;
  options.model.arch = arch;
  options.profile = source_path("optimize_rules/" + profile);
  return run_check(options);
}

CheckResult check_split(const std::string& arch, const SplitResult& split, int gpus, const MemoryBudget& budget) {
  CheckOptions options;
  options.model.arch = arch;
  options.profile = "split.yaml";
  options.profile_text = split.yaml;
  options.gpus = gpus;
  options.budget = budget;
  return run_check(options);
}

}  // namespace

TEST_CASE("split: every base profile splits into profiles that pass check") {
  const std::pair<const char*, const char*> bases[] = {{"deepseek-v3", "DeepSeek-V3-Chat.yaml"},
                                                      {"deepseek-v2-lite", "DeepSeek-V2-Lite-Chat.yaml"},
                                                      {"qwen3-30b-a3b", "Qwen3-MoE.yaml"},
                                                      {"mixtral-8x7b", "Mixtral.yaml"}};
  for (const auto& base_entry : bases) {
    const auto& arch = base_entry.first;
    const auto& profile = base_entry.second;
    const CheckResult base = check_base(arch, profile);
    REQUIRE_FALSE(base.diagnostics.has_errors());
    for (int gpus : {1, 2, 3, 5, 8}) {
      MemoryBudget budget;
      const SplitResult split = split_profile(base, gpus, budget, profile);
      const CheckResult result = check_split(arch, split, gpus, budget);
      INFO(arch << " on " << gpus << " GPUs\n" << split.yaml);
      for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
      CHECK(result.diagnostics.items().empty());
      // Layers run where the split says; the transfer_map agrees; experts stay where the base has them.
      const int layers = result.tree->num_layers();
      for (int g = 0; g < gpus; ++g)
        for (int l = split.gpus[g].first_layer; l <= split.gpus[g].last_layer; ++l)
          CHECK(result.plan.layer_device(l) == Device::cuda(g));
      CHECK(split.gpus.back().last_layer == layers - 1);
      const ModulePlacement& norm = placement(result, "model.norm");
      CHECK(norm.generate_device == Device::cuda(gpus - 1));
      CHECK(placement(result, "lm_head").generate_device == Device::cuda(gpus - 1));
      for (const ModulePlacement& p : base.plan.visited) {
        const Module& m = base.tree->at(p.module);
        if (m.name.size() < 8 || m.name.compare(m.name.size() - 8, 8, ".experts") != 0) continue;
        const ModulePlacement& after = placement(result, std::string(m.name));
        CHECK(after.generate_device.is_cpu() == p.generate_device.is_cpu());
        CHECK(after.recursive == p.recursive);
        CHECK(after.op == p.op);
      }
    }
  }
}

TEST_CASE("split: heterogeneous budgets and an impossible fit") {
  const CheckResult base = check_base("deepseek-v3", "DeepSeek-V3-Chat.yaml");
  MemoryBudget budget;
  budget.gpu_bytes = {24ULL << 30, 48ULL << 30};
  const SplitResult split = split_profile(base, 2, budget, "DeepSeek-V3-Chat.yaml");
  const int small = split.gpus[0].last_layer - split.gpus[0].first_layer + 1;
  const int large = split.gpus[1].last_layer - split.gpus[1].first_layer + 1;
  CHECK(large > small);
  CHECK_FALSE(check_split("deepseek-v3", split, 2, budget).diagnostics.has_errors());
  // 30 GiB of GPU-side weights cannot fit two 8 GiB cards: the split is written, and check says so.
  budget.gpu_bytes = {8ULL << 30};
  const SplitResult tight = split_profile(base, 2, budget, "DeepSeek-V3-Chat.yaml");
  CHECK_FALSE(with_code(check_split("deepseek-v3", tight, 2, budget), "over-budget").empty());
  CHECK_THROWS(split_profile(base, 62, MemoryBudget{}, "base"));
}
