// ktransformers' current rule files load: the classes, kwargs and device spellings they use, in
// profiles of our own that use each of them, map to our operators; a profile for a model family or
// a device Switchyard does not run gets one located error that names it.
#include "core/arch_presets.h"
#include "core/text.h"
#include "placement/foreign_targets.h"
#include "placement/implementation.h"
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;

namespace {

std::string runs(const CheckResult& result, const std::string& module) {
  const int index = result.tree->find(module);
  REQUIRE_MESSAGE(index >= 0, "no module " << module);
  const PhaseImplementations phases = implementation_of(result.plan, index);
  return std::string(implementation_name(phases.generate)) + "/" + implementation_name(phases.prefill);
}

void require_clean(const CheckResult& result) {
  for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
  REQUIRE(result.diagnostics.items().empty());
}

// The kinds of rules of ktransformers' balance_serve profiles for DeepSeek, in our words.
const char* kDeepseekServe = R"(- match: {class: ktransformers.models.modeling_deepseek_v3.DeepseekV3RotaryEmbedding}
  replace:
    class: ktransformers.operators.RoPE.RotaryEmbeddingV4
    kwargs: {generate_device: cuda, prefill_device: cuda}
- match: {name: "^model\\.layers\\..*$", class: torch.nn.Linear}
  replace:
    class: ktransformers.operators.linear.KTransformersLinear
    kwargs: {generate_device: cuda, prefill_device: cuda, generate_op: VLinearMarlin, prefill_op: KLinearTorch}
- match: {name: "^model\\.layers\\..*\\.mlp$", class: ktransformers.models.modeling_deepseek_v3.DeepseekV3MoE}
  replace:
    class: ktransformers.operators.experts.KDeepseekV3MoEV2
    kwargs: {generate_device: cuda, prefill_device: cuda}
- match: {name: "^model\\.layers\\..*\\.mlp\\.experts$"}
  replace:
    class: ktransformers.operators.experts.KTransformersExpertsV2
    kwargs: {prefill_device: cuda, prefill_op: KExpertsTorch, generate_device: cpu, generate_op: KExpertsCPU, out_device: cuda}
  recursive: False
- match: {name: "^model\\.layers\\..*\\.self_attn$"}
  replace:
    class: ktransformers.operators.balance_serve_attention.flashinfer_attn
    kwargs: {generate_device: cuda, prefill_device: cuda, absorb_for_prefill: False}
- match: {name: "^model$"}
  replace:
    class: ktransformers.operators.models.KDeepseekV2Model
    kwargs: {per_layer_prefill_intput_threshold: 0}
- match: {name: "^model.embed_tokens"}
  replace: {class: default, kwargs: {generate_device: cpu, prefill_device: cpu}}
- match: {class: ktransformers.models.modeling_deepseek_v3.DeepseekV3RMSNorm}
  replace: {class: ktransformers.operators.layernorm.RMSNorm, kwargs: {generate_device: cuda, prefill_device: cuda}}
- match: {class: ktransformers.models.modeling_deepseek_v3.DeepseekV3MLP}
  replace: {class: ktransformers.operators.mlp.kDeepseekV3MLP, kwargs: {generate_device: cuda, prefill_device: cuda}}
)";

// The same for Qwen3-MoE, which ktransformers writes partly with its Qwen2-MoE classes.
const char* kQwen3Serve = R"(- match: {class: ktransformers.models.modeling_qwen2_moe.Qwen2MoeRotaryEmbedding}
  replace: {class: ktransformers.operators.RoPE.KQwen3MoeRotaryEmbedding, kwargs: {generate_device: cuda, prefill_device: cuda}}
- match: {name: "^model\\.layers\\..*\\.mlp$", class: ktransformers.models.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock}
  replace:
    class: ktransformers.operators.experts.KQwen3MoeSparseMoeBlockV2
    kwargs: {generate_device: cuda, prefill_device: cuda}
- match: {name: "^model\\.layers\\..*\\.mlp\\.experts$"}
  replace:
    class: ktransformers.operators.experts.KTransformersExpertsV2
    kwargs: {prefill_device: cuda, prefill_op: KExpertsTorch, generate_device: cpu, generate_op: KExpertsCPU, out_device: cuda}
  recursive: False
- match: {name: "^model\\.layers\\..*\\.self_attn$"}
  replace: {class: ktransformers.operators.balance_serve_attention.KQwen3MoeAttention, kwargs: {generate_device: cuda, prefill_device: cuda}}
- match: {name: "^model$"}
  replace: {class: ktransformers.operators.models.KQwen2MoeModel, kwargs: {per_layer_prefill_intput_threshold: 0}}
- match: {class: ktransformers.models.modeling_qwen3_moe.Qwen3MoeMLP}
  replace: {class: ktransformers.operators.mlp.KQwen2MoeMLP, kwargs: {generate_device: cuda, prefill_device: cuda}}
- match: {name: "^model.embed_tokens"}
  replace: {class: default, kwargs: {generate_device: cpu, prefill_device: cpu}}
)";

}  // namespace

TEST_CASE("ktransformers profiles: DeepSeek's serve classes map to our operators") {
  CheckSetup setup;
  setup.gpus = 1;
  const CheckResult result = check_yaml(kDeepseekServe, setup);
  require_clean(result);
  CHECK(runs(result, "model.layers.1.self_attn.rotary_emb") == "rotary/rotary");
  CHECK(runs(result, "model.layers.1.self_attn.q_a_proj") == "linear.gpu.quant/linear.gpu");
  CHECK(runs(result, "model.layers.1.mlp") == "moe.gpu/moe.gpu");
  CHECK(runs(result, "model.layers.1.mlp.experts") == "experts.cpu/experts.gpu");
  CHECK(runs(result, "model.layers.1.self_attn") == "mla.gpu/mla.gpu");
  CHECK(runs(result, "model") == "decoder-stack/decoder-stack");
  CHECK(runs(result, "model.layers.0.mlp") == "mlp.gpu/mlp.gpu");
  CHECK(runs(result, "model.layers.1.mlp.shared_experts") == "mlp.gpu/mlp.gpu");
  CHECK(runs(result, "model.norm") == "rms-norm.gpu/rms-norm.gpu");
  CHECK(placement(result, "model.layers.1.mlp").op->name == "MoE");
  CHECK(placement(result, "model.layers.1.self_attn").op->name == "MLA");
  CHECK(placement(result, "model.layers.1.mlp.experts").op->name == "Experts");
}

TEST_CASE("ktransformers profiles: Qwen3-MoE's serve classes, Qwen2-MoE spellings included, map to ours") {
  CheckSetup setup;
  setup.arch = "tiny-qwen3-moe";
  setup.gpus = 1;
  const CheckResult result = check_yaml(kQwen3Serve, setup);
  // tiny-qwen3-moe has no dense layer: every Qwen3MoeMLP is a routed expert, below the experts'
  // recursive: false, so the KQwen2MoeMLP rule (an MLP operator) places nothing.
  for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
  CHECK_FALSE(result.diagnostics.has_errors());
  CHECK(only(result, "dead-rule").rule == 5);
  CHECK(result.diagnostics.items().size() == 1);
  CHECK(result.rules->rules[5].op().name == "MLP");
  CHECK(runs(result, "model.rotary_emb") == "rotary/rotary");
  CHECK(placement(result, "model.rotary_emb").rule == 0);
  CHECK(runs(result, "model.layers.1.mlp") == "moe.gpu/moe.gpu");
  CHECK(runs(result, "model.layers.1.mlp.experts") == "experts.cpu/experts.gpu");
  CHECK(runs(result, "model.layers.1.self_attn") == "gqa.gpu/gqa.gpu");
  CHECK(runs(result, "model") == "decoder-stack/decoder-stack");
}

TEST_CASE("ktransformers profiles: a family Switchyard does not run gets one error that names it") {
  // Rules for Qwen2-MoE as ktransformers writes them: its module classes and replacement classes,
  // and rules of generic classes that would place parts of any model.
  const std::string qwen2 = R"(- match: {class: ktransformers.models.modeling_qwen2_moe.Qwen2MoeRotaryEmbedding}
  replace: {class: ktransformers.operators.RoPE.RotaryEmbedding, kwargs: {generate_device: cuda, prefill_device: cuda}}
- match: {name: "^model\\.layers\\..*$", class: torch.nn.Linear}
  replace: {class: ktransformers.operators.linear.KTransformersLinear, kwargs: {generate_device: "cuda:3", prefill_device: cuda}}
- match:
    name: "^model\\.layers\\..*\\.mlp$"
    class: ktransformers.models.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock
  replace: {class: ktransformers.operators.experts.KQwen2MoeSparseMoeBlockV2, kwargs: {generate_device: cuda}}
- match: {name: "^model\\.layers\\..*\\.self_attn$"}
  replace: {class: ktransformers.operators.balance_serve_attention.KQwen2MoeAttention, kwargs: {chunck_size: 0}}
- match: {class: ktransformers.models.modeling_qwen2_moe.Qwen2MoeRMSNorm}
  replace: {class: ktransformers.operators.layernorm.KQwen2MoeRMSNorm}
)";
  for (const char* arch : {"tiny-qwen3-moe", "tiny-deepseek-v3"}) {
    INFO(arch);
    CheckSetup setup;
    setup.arch = arch;
    const CheckResult result = check_yaml(qwen2, setup);
    // One error, at the first class of the family, and nothing about how the rules would place
    // this model (cuda:3 with one GPU, layer devices).
    for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
    REQUIRE(result.diagnostics.items().size() == 1);
    const Diagnostic d = only(result, "profile-family-unsupported");
    CHECK(d.severity == Severity::error);
    CHECK(d.location.line == 7);
    CHECK(d.location.column == 12);
    CHECK(d.rule == 2);
    CHECK(d.message.find("Qwen2-MoE") != std::string::npos);
    CHECK(d.message.find("model_type qwen2_moe") != std::string::npos);
    CHECK(d.message.find("rule #3 names 'ktransformers.models.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock'") !=
          std::string::npos);
    CHECK(d.message.find("and 2 more rules name its classes") != std::string::npos);
    CHECK(d.message.find("Switchyard runs " + join(families_switchyard_runs(), ", ")) != std::string::npos);
    CHECK(result.rules->for_unsupported_target);
  }
  // A typo in a class of a family we run is a plain unknown class, with a suggestion.
  const CheckResult typo = check_yaml(
      "- match: {class: ktransformers.models.modeling_deepseek_v3.DeepseekV3MoEE}\n  replace: {class: MoE}\n");
  const Diagnostic d = only(typo, "unknown-match-class");
  CHECK(d.message.find("did you mean 'ktransformers.models.modeling_deepseek_v3.DeepseekV3MoE'") != std::string::npos);
  CHECK(with_code(typo, "profile-family-unsupported").empty());
  CHECK_FALSE(typo.rules->for_unsupported_target);
}

TEST_CASE("ktransformers profiles: the families Switchyard runs are its presets' model types") {
  std::vector<std::string> expected;
  for (const ArchPreset& preset : arch_presets()) {
    const std::string type = preset_model_config(preset.name).model_type;
    if (std::find(expected.begin(), expected.end(), type) == expected.end()) expected.push_back(type);
  }
  CHECK(families_switchyard_runs() == expected);
  // A family that Switchyard runs is never foreign, whatever the table of foreign families holds.
  for (const std::string& type : families_switchyard_runs()) {
    INFO(type);
    CHECK(foreign_family_of_module_class("ktransformers.models.modeling_" + type + ".AnyClass") == nullptr);
  }
  CHECK(foreign_family_of_module_class("ktransformers.models.modeling_qwen3_next.Qwen3NextMLP")->model_type == "qwen3_next");
  CHECK(foreign_family_of_replacement("ktransformers.operators.experts.KSmallthinkerExperts")->model_type == "smallthinker");
  CHECK(foreign_family_of_replacement("ktransformers.operators.experts.KTransformersExperts") == nullptr);
}

TEST_CASE("ktransformers profiles: a device Switchyard does not run gets one error that names it") {
  const std::string npu = R"(- match: {name: "^model\\.layers\\..*\\.self_attn$"}
  replace: {class: MLA, kwargs: {generate_device: "npu", prefill_device: "npu:0"}}
- match: {name: "^model\\.layers\\..*\\.mlp\\.experts$"}
  replace: {class: Experts, kwargs: {generate_device: cpu, prefill_device: cpu, out_device: "NPU:1"}}
  recursive: false
- match: {name: "^model$"}
  replace: {class: Model, kwargs: {transfer_map: {2: "xpu:1"}}}
)";
  const CheckResult result = check_yaml(npu);
  for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
  const auto found = with_code(result, "unsupported-device");
  REQUIRE(found.size() == 2);  // one for npu (three places), one for xpu
  REQUIRE(result.diagnostics.items().size() == 2);
  CHECK(found[0].location.line == 2);
  const std::string line2 = npu.substr(npu.find('\n') + 1);
  CHECK(found[0].location.column == static_cast<int>(line2.find("\"npu\"")) + 1);
  CHECK(found[0].message.find("'npu' is an Ascend NPU") != std::string::npos);
  CHECK(found[0].message.find("it runs on cpu and cuda:N") != std::string::npos);
  CHECK(found[0].message.find("npu devices in 3 places") != std::string::npos);
  CHECK(found[1].location.line == 7);
  CHECK(found[1].message.find("'xpu:1' is an Intel GPU") != std::string::npos);
  CHECK(found[1].message.find("places") == std::string::npos);
  // Anything else that is not a device stays a bad device, where it is written.
  const CheckResult bad = check_yaml("- match: {name: '^lm_head$'}\n  replace: {class: default, kwargs: {generate_device: gpu}}\n");
  CHECK(only(bad, "bad-device").location.line == 2);
  CHECK(with_code(bad, "unsupported-device").empty());
}
