// placement/weight_storage.h: the dtype each device holds a weight in, which check's estimate and
// the model's loader share. Checked on DeepSeek-V3's description in Q4_K_M (every projection in
// blocks) with everything on cuda:0 and, through --cpu-moe, the routed experts on the CPU.
#include <doctest/doctest.h>

#include <string>

#include "placement/check.h"
#include "placement/weight_storage.h"

namespace sy = switchyard;

namespace {

sy::DType resident(const sy::CheckResult& r, const std::string& name, sy::Device device) {
  const int i = r.tree->find(name);
  REQUIRE(i >= 0);
  const sy::DType stored = r.tree->at(i).params.front().dtype;
  REQUIRE(sy::is_block_quantized(stored));
  return sy::resident_dtype(r.plan, i, stored, device);
}

}  // namespace

TEST_CASE("weight storage: a GPU keeps a projection's blocks under KLinearMarlin, floats where its operator needs them") {
  for (const bool cpu_moe : {false, true}) {
    INFO("--cpu-moe " << cpu_moe);
    sy::CheckOptions o;
    o.model.arch = "tiny-deepseek-v3";
    o.model.weight_dtype = "q8_0";
    o.gpus = 1;
    o.quick_rules.cpu_moe = cpu_moe;
    const sy::CheckResult r = sy::run_check(o);
    REQUIRE_FALSE(r.diagnostics.has_errors());
    const sy::Device gpu = sy::Device::cuda(0), cpu = sy::Device::cpu();
    // The default op of a Linear on a GPU is KLinearMarlin: the blocks stay.
    CHECK(resident(r, "model.layers.1.self_attn.q_a_proj", gpu) == sy::DType::q8_0);
    CHECK(resident(r, "model.layers.1.self_attn.o_proj", gpu) == sy::DType::q8_0);
    CHECK(resident(r, "model.layers.1.mlp.shared_experts.down_proj", gpu) == sy::DType::q8_0);
    CHECK(resident(r, "lm_head", gpu) == sy::DType::q8_0);
    // Operators that multiply floats: MLA's kv_b_proj, the GPU's routed experts, the embedding.
    CHECK(resident(r, "model.layers.1.self_attn.kv_b_proj", gpu) == sy::DType::bf16);
    CHECK(resident(r, "model.layers.1.mlp.experts.3.up_proj", gpu) == sy::DType::bf16);
    CHECK(resident(r, "model.embed_tokens", gpu) == sy::DType::bf16);
    // The CPU reads blocks in place, except the embedding's (GPU kernels gather its rows too).
    CHECK(resident(r, "model.layers.1.mlp.experts.3.up_proj", cpu) == sy::DType::q8_0);
    CHECK(resident(r, "model.embed_tokens", cpu) == sy::DType::bf16);
  }
}
