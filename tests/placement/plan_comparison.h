#pragma once
// Shared by the quick-rule tests: two checks' plans compared module by module, and the five
// families' tiny presets with where their routed experts sit.
#include <doctest/doctest.h>

#include <string>

#include "placement/check.h"

namespace switchyard::testing {

// Every visited module placed alike: operator, devices, ops.
inline void expect_same_plan(const CheckResult& a, const CheckResult& b) {
  REQUIRE(a.plan.visited.size() == b.plan.visited.size());
  for (std::size_t i = 0; i < a.plan.visited.size(); ++i) {
    const ModulePlacement &x = a.plan.visited[i], &y = b.plan.visited[i];
    INFO("module " << std::string(a.tree->at(x.module).name));
    REQUIRE(x.module == y.module);
    CHECK(x.op == y.op);
    CHECK(x.generate_device == y.generate_device);
    CHECK(x.prefill_device == y.prefill_device);
    CHECK(x.out_device == y.out_device);
    CHECK(x.generate_op == y.generate_op);
    CHECK(x.prefill_op == y.prefill_op);
  }
}

struct Family {
  const char* arch;
  const char* experts_path;  // below model.layers.N, as a regex inside a YAML double-quoted string
};
inline constexpr Family kFamilies[] = {{"tiny-deepseek-v2", "mlp\\\\.experts"}, {"tiny-deepseek-v3", "mlp\\\\.experts"},
                                       {"tiny-qwen3-moe", "mlp\\\\.experts"}, {"tiny-glm4-moe", "mlp\\\\.experts"},
                                       {"tiny-mixtral", "block_sparse_moe\\\\.experts"}};

}  // namespace switchyard::testing
