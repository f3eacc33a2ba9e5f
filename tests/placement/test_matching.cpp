// ktransformers' rule semantics: depth-first walk, first matching rule wins, class and name must
// both hold, `recursive: false` prunes, unmatched modules go to the default device.
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;

TEST_CASE("placement: the first matching rule in file order wins") {
  const auto result = check_yaml(R"(
- match: {name: "self_attn$"}
  replace: {class: default, kwargs: {generate_device: "cpu", prefill_device: "cpu"}}
- match: {name: "^model\\.layers\\.1\\.self_attn$"}
  replace: {class: default, kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}}
)");
  const ModulePlacement& p = placement(result, "model.layers.1.self_attn");
  CHECK(p.rule == 0);
  CHECK(p.generate_device == Device::cpu());
  // The second rule never wins, and the check says why.
  const Diagnostic dead = only(result, "dead-rule");
  CHECK(dead.rule == 1);
  CHECK(dead.location.line == 4);
  CHECK(dead.message.find("taken by an earlier rule") != std::string::npos);
}

TEST_CASE("placement: class and name must both hold") {
  const auto result = check_yaml(R"(
- match:
    name: "^model\\.layers\\.1\\.self_attn"
    class: torch.nn.Linear
  replace:
    class: ktransformers.operators.linear.KTransformersLinear
    kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0", generate_op: "KLinearTorch"}
)");
  // The attention module itself matches the name but is not a Linear.
  CHECK(placement(result, "model.layers.1.self_attn").rule == -1);
  const ModulePlacement& q = placement(result, "model.layers.1.self_attn.q_a_proj");
  CHECK(q.rule == 0);
  CHECK(q.op->name == "Linear");
  CHECK(q.generate_op == "KLinearTorch");
  CHECK(q.prefill_op == "KLinearTorch");
  // A norm under the same name prefix is not a Linear either.
  CHECK(placement(result, "model.layers.1.self_attn.q_a_layernorm").rule == -1);
  CHECK(placement(result, "model.layers.2.self_attn.q_a_proj").rule == -1);
}

TEST_CASE("placement: name is a regex search, not a full match") {
  CheckSetup setup;
  setup.gpus = 1;
  const auto result = check_yaml(R"(
- match: {name: "kv_b_proj"}
  replace: {class: default, kwargs: {generate_device: "cpu", prefill_device: "cpu"}}
)", setup);
  for (int layer = 0; layer < 4; ++layer)
    CHECK(placement(result, "model.layers." + std::to_string(layer) + ".self_attn.kv_b_proj").generate_device.is_cpu());
  CHECK(placement(result, "model.layers.0.self_attn.kv_a_proj_with_mqa").generate_device == Device::cuda(0));
}

TEST_CASE("placement: lookahead excludes kv_b_proj from a Linear rule") {
  const auto result = check_yaml(R"(
- match:
    name: "^model\\.layers\\.(?!.*self_attn\\.kv_b_proj).*$"
    class: torch.nn.Linear
  replace:
    class: ktransformers.operators.linear.KTransformersLinear
    kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}
)");
  CHECK(placement(result, "model.layers.2.self_attn.q_b_proj").op->name == "Linear");
  CHECK(placement(result, "model.layers.2.self_attn.o_proj").op->name == "Linear");
  CHECK(placement(result, "model.layers.2.self_attn.kv_b_proj").rule == -1);
  CHECK(placement(result, "model.layers.2.self_attn.kv_b_proj").op->name == "default");
}

namespace {

// The routed experts on the CPU in decode and on `prefill_device` in prefill, not walked below.
std::string experts_rule(const std::string& prefill_device) {
  return R"(
- match: {name: "^model\\.layers\\..*\\.mlp\\.experts$"}
  replace:
    class: ktransformers.operators.experts.KTransformersExperts
    kwargs: {generate_device: "cpu", generate_op: "KExpertsCPU", prefill_device: ")" +
         prefill_device + R"(", out_device: "cuda:0"}
  recursive: False
)";
}

}  // namespace

TEST_CASE("placement: recursive false stops the walk and the operator owns the weights") {
  const auto result = check_yaml(experts_rule("cuda:0"));
  const int experts = result.tree->find("model.layers.1.mlp.experts");
  const int expert_proj = result.tree->find("model.layers.1.mlp.experts.5.down_proj");
  REQUIRE(experts >= 0);
  REQUIRE(expert_proj >= 0);
  CHECK(result.plan.placement_of(experts) != nullptr);
  CHECK_FALSE(result.plan.placement_of(expert_proj));
  CHECK(result.plan.owner_of(expert_proj).module == experts);
  CHECK(result.plan.owner_of(expert_proj).generate_device.is_cpu());
  // The shared experts are siblings, still visited, on the default device.
  CHECK(placement(result, "model.layers.1.mlp.shared_experts.up_proj").generate_device == Device::cuda(0));
  // Every expert weight is counted on the CPU.
  std::uint64_t expert_bytes = 0;
  for (const Module& m : result.tree->modules())
    if (m.expert >= 0) expert_bytes += m.own_bytes();
  REQUIRE(expert_bytes > 0);
  for (const DeviceMemory& d : result.memory)
    if (d.device.is_cpu()) CHECK(d.weight_bytes == expert_bytes);
  // prefill_device cuda:0: the GPU holds a copy of them as well (the model uploads them for
  // prefill), which a profile that prefills them on the CPU does not need.
  const auto cpu_prefill = check_yaml(experts_rule("cpu"));
  auto on = [](const CheckResult& r, Device device) {
    for (const DeviceMemory& d : r.memory)
      if (d.device == device) return d.weight_bytes;
    return std::uint64_t{0};
  };
  CHECK(on(result, Device::cuda(0)) == on(cpu_prefill, Device::cuda(0)) + expert_bytes);
  CHECK(on(cpu_prefill, Device::cpu()) == expert_bytes);
  // A GPU budget that only the copy breaks: the error says so.
  CheckSetup tight;
  std::uint64_t cpu_prefill_gpu_total = 0;
  for (const DeviceMemory& d : cpu_prefill.memory)
    if (d.device == Device::cuda(0)) cpu_prefill_gpu_total = d.total_bytes();
  tight.gpu_bytes = {cpu_prefill_gpu_total + expert_bytes / 2};
  const auto over = with_code(check_yaml(experts_rule("cuda:0"), tight), "over-budget");
  REQUIRE(over.size() == 1);
  CHECK(over[0].message.find("routed experts held here for one phase only") != std::string::npos);
  CHECK(with_code(check_yaml(experts_rule("cpu"), tight), "over-budget").empty());
}

TEST_CASE("placement: recursive true visits the children of a matched module") {
  CheckSetup setup;
  setup.gpus = 1;
  const auto result = check_yaml(R"(
- match: {name: "^model\\.layers\\.1\\.mlp\\.experts$"}
  replace: {class: default, kwargs: {generate_device: "cpu", prefill_device: "cpu"}}
)", setup);
  CHECK(placement(result, "model.layers.1.mlp.experts.7.gate_proj").rule == -1);
  CHECK(placement(result, "model.layers.1.mlp.experts.7.gate_proj").generate_device == Device::cuda(0));
}

TEST_CASE("placement: unmatched modules go to the default device") {
  const std::string yaml = R"(
- match: {name: "^model\\.embed_tokens$"}
  replace: {class: default, kwargs: {generate_device: "cpu", prefill_device: "cpu"}}
)";
  SUBCASE("cuda:0 when the profile names no GPU but GPUs are given") {
    CheckSetup setup;
    setup.gpus = 2;
    const auto result = check_yaml(yaml, setup);
    CHECK(placement(result, "lm_head").generate_device == Device::cuda(0));
    CHECK(placement(result, "model.embed_tokens").generate_device == Device::cpu());
  }
  SUBCASE("cpu when neither --gpus nor the profile names a GPU") {
    const auto result = check_yaml(yaml);
    CHECK(placement(result, "lm_head").generate_device == Device::cpu());
  }
  SUBCASE("cpu with no GPUs") {
    CheckSetup setup;
    setup.gpus = 0;
    const auto result = check_yaml(yaml, setup);
    CHECK(placement(result, "lm_head").generate_device == Device::cpu());
    CHECK(placement(result, "lm_head").prefill_device == Device::cpu());
  }
  SUBCASE("--default_device") {
    CheckSetup setup;
    setup.gpus = 2;
    setup.default_device = Device::cuda(1);
    const auto result = check_yaml(yaml, setup);
    CHECK(placement(result, "model.layers.3.self_attn").generate_device == Device::cuda(1));
  }
}

TEST_CASE("placement: class matching follows isinstance") {
  SUBCASE("a YaRN rotary embedding is a rotary embedding") {
    const auto result = check_yaml(R"(
- match: {class: ktransformers.models.modeling_deepseek_v3.DeepseekV3RotaryEmbedding}
  replace: {class: ktransformers.operators.RoPE.YarnRotaryEmbeddingV3, kwargs: {generate_device: "cpu", prefill_device: "cpu"}}
)");
    CHECK(result.tree->at(result.tree->find("model.layers.0.self_attn.rotary_emb")).cls->name ==
          "DeepseekV3YarnRotaryEmbedding");
    for (int layer = 0; layer < 4; ++layer)
      CHECK(placement(result, "model.layers." + std::to_string(layer) + ".self_attn.rotary_emb").op->name == "YarnRoPE");
  }
  SUBCASE("native family-neutral classes") {
    const auto result = check_yaml(R"(
- match: {class: MoE}
  replace: {class: MoE, kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}}
)");
    CHECK(placement(result, "model.layers.0.mlp").rule == -1);  // layer 0 is dense
    CHECK(placement(result, "model.layers.1.mlp").rule == 0);
  }
  SUBCASE("torch.nn.Module matches every module, the root included") {
    const auto result = check_yaml(R"(
- match: {class: torch.nn.Module}
  replace: {class: default, kwargs: {generate_device: "cpu", prefill_device: "cpu"}}
)");
    for (const ModulePlacement& p : result.plan.visited) CHECK(p.rule == 0);
    CHECK(result.plan.visited.front().module == 0);
    CHECK(result.tree->at(0).name.empty());
  }
  SUBCASE("a sibling class does not match") {
    const auto result = check_yaml(R"(
- match: {class: ktransformers.models.modeling_deepseek.DeepseekV2MoE}
  replace: {class: MoE}
)");
    CHECK(placement(result, "model.layers.1.mlp").rule == -1);
    CHECK(only(result, "dead-rule").message.find("no module") != std::string::npos);
  }
}

TEST_CASE("placement: the walk is depth first in module order") {
  const auto result = check_yaml("- match: {name: '^lm_head$'}\n  replace: {class: default}\n");
  std::vector<std::string> names;
  for (const ModulePlacement& p : result.plan.visited) names.emplace_back(result.tree->at(p.module).name);
  REQUIRE(names.size() == result.tree->size());  // no recursive: false, so everything is visited
  CHECK(names[0] == "");
  CHECK(names[1] == "model");
  CHECK(names[2] == "model.embed_tokens");
  CHECK(names[3] == "model.layers");
  CHECK(names[4] == "model.layers.0");
  CHECK(names[5] == "model.layers.0.self_attn");
  CHECK(names[6] == "model.layers.0.self_attn.q_a_proj");
  CHECK(names.back() == "lm_head");
  // Each module comes after its parent and before the parent's next sibling.
  for (std::size_t i = 1; i < names.size(); ++i) {
    const Module& m = result.tree->at(result.plan.visited[i].module);
    CHECK(result.plan.visit_of[static_cast<std::size_t>(m.parent)] < static_cast<int>(i));
  }
}

TEST_CASE("placement: transfer_map decides where each layer runs") {
  CheckSetup setup;
  setup.gpus = 2;
  const auto result = check_yaml(R"(
- match: {name: "^model$"}
  replace:
    class: ktransformers.operators.models.KDeepseekV2Model
    kwargs:
      transfer_map: {2: "cuda:1"}
)", setup);
  CHECK(result.plan.layer_device(0) == Device::cuda(0));
  CHECK(result.plan.layer_device(1) == Device::cuda(0));
  CHECK(result.plan.layer_device(2) == Device::cuda(1));
  CHECK(result.plan.layer_device(3) == Device::cuda(1));
  CHECK(result.plan.final_device() == Device::cuda(1));
}
