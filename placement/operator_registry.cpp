#include "placement/operator_registry.h"

#include <deque>
#include <string_view>
#include <unordered_map>

#include "core/model_family.h"

namespace switchyard {
namespace {

// A prefill chunk longer than any context a model here has (DeepSeek-V3: 163840 tokens).
constexpr long long kMaxChunkTokens = 1 << 20;

const KwargSpec kGenerateDevice{"generate_device", KwargType::device, "device the operator runs on in decode", {}};
const KwargSpec kPrefillDevice{"prefill_device", KwargType::device, "device the operator runs on in prefill", {}};
const KwargSpec kGenerateOp{"generate_op", KwargType::op, "kernel used in decode", {}};
const KwargSpec kPrefillOp{"prefill_op", KwargType::op, "kernel used in prefill", {}};

// ktransformers' kwargs that Switchyard accepts and does not act on, each with the reason. Read
// operators/ before changing one: the reason is what the engine does.
const KwargSpec kLinearOutDevice{
    .name = "out_device",
    .type = KwargType::device,
    .help = "device a CPU linear's output is written to (ktransformers' KLinearCPUInfer)",
    .honoured = false,
    .no_effect = "a Linear runs on its layer's device and its output stays there for the next module; only the "
                 "routed experts (Experts) hand their output to another device"};
const KwargSpec kExpertsBackend{
    .name = "backend",
    .type = KwargType::choice,
    .help = "CPU kernel family",
    .choices = {"auto", "llamafile", "AMXBF16", "AMXInt8", "AVX512"},
    .honoured = false,
    .no_effect = "the CPU experts choose their kernels per machine (the widest of AVX2, AVX-512 and AMX that this CPU "
                 "runs) and have no llamafile or Int8 backend; run's --cpu_kernels picks a variant",
    .asks_what_switchyard_does = [](const nlohmann::ordered_json& value, const Device&) { return value == "auto"; }};
const KwargSpec kAbsorbForPrefill{
    .name = "absorb_for_prefill",
    .type = KwargType::boolean,
    .help = "use the absorbed form in prefill too",
    .honoured = false,
    .no_effect = "MLA's prefill form is fixed per device: on the CPU prefill runs in the absorbed form, as decode does; "
                 "on a GPU it expands the cached latent into per-head keys and values (decode runs absorbed)",
    .asks_what_switchyard_does = [](const nlohmann::ordered_json& value, const Device& prefill_device) {
      return value.is_boolean() && value.get<bool>() == prefill_device.is_cpu();
    }};
// ktransformers' attention splits a long prompt into chunks of this many tokens.
KwargSpec prefill_chunk_kwarg(std::string name, std::string help) {
  return KwargSpec{
      .name = std::move(name),
      .type = KwargType::integer,
      .help = std::move(help),
      .min_value = 1,
      .max_value = kMaxChunkTokens,
      .honoured = false,
      .no_effect = "a prompt runs through the whole model in chunks of run's --prefill_chunk tokens (default 512), "
                   "and a GPU's prefill attention splits its scores by its own workspace bound; set --prefill_chunk "
                   "instead"};
}
const KwargSpec kChunckSize = prefill_chunk_kwarg("chunck_size", "prefill chunk length in tokens (ktransformers' spelling)");
const KwargSpec kChunkSize = prefill_chunk_kwarg("chunk_size", "prefill chunk length in tokens");
constexpr const char* kLayersResident =
    "Switchyard keeps every layer resident on the device the plan gives it and never streams layers to a GPU for a "
    "long prompt";
const KwargSpec kPerLayerPrefillThreshold{
    .name = "per_layer_prefill_intput_threshold",
    .type = KwargType::integer,
    .help = "prompt length in tokens from which prefill runs layer by layer (0: never)",
    .min_value = 0,
    .max_value = std::numeric_limits<int>::max(),
    .honoured = false,
    .no_effect = std::string(kLayersResident) + "; write 0 (never), or remove it",
    .asks_what_switchyard_does = [](const nlohmann::ordered_json& value, const Device&) { return value == 0; }};
const KwargSpec kPerLayerPrefillDevice{.name = "per_layer_prefill_device",
                                       .type = KwargType::device,
                                       .help = "device for layer-wise prefill",
                                       .honoured = false,
                                       .no_effect = std::string(kLayersResident) + ", so no device runs one"};

// Names that share one implementation: every linear op runs the same kernels on bf16/f16/f32
// weights (cuBLAS or our gemv on a GPU, the AVX kernels on the CPU), whatever ktransformers calls
// its kernel; KExpertsTorch runs where it is placed.
const DeviceImplementations kLinear{Implementation::linear_cpu, Implementation::linear_gpu};
const DeviceImplementations kLinearGpu{Implementation::none, Implementation::linear_gpu};
const DeviceImplementations kLinearGpuQuant{Implementation::none, Implementation::linear_gpu_quant};
const DeviceImplementations kLinearCpu{Implementation::linear_cpu, Implementation::none};
const DeviceImplementations kExperts{Implementation::experts_cpu, Implementation::experts_gpu};
const DeviceImplementations kExpertsGpuQuant{Implementation::none, Implementation::experts_gpu_quant};
const DeviceImplementations kExpertsCpu{Implementation::experts_cpu, Implementation::none};

// The attention classes of every family whose attention is `kind` (core/model_family.h), which the
// native MLA and GQA replace.
std::vector<std::string> attention_classes(AttentionKind kind) {
  std::vector<std::string> names;
  for (const ModelFamily* family : model_families())
    if (family->attention == kind)
      for (const FamilyClasses& group : family->classes)
        for (const FamilyClass& cls : group.classes)
          if (std::string_view(cls.base) == "Attention") names.push_back(cls.name);
  return names;
}

std::vector<KwargSpec> devices_and(std::vector<KwargSpec> extra) {
  std::vector<KwargSpec> all = {kGenerateDevice, kPrefillDevice};
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

struct Registry {
  std::deque<OperatorInfo> operators;
  std::deque<ReplacementClass> classes;
  std::unordered_map<std::string, const ReplacementClass*> by_spelling;
  std::vector<std::string> spellings;
  // The operator each native spelling's replaced classes default to (native_operator), in
  // registration order.
  std::vector<std::pair<const ModuleClass*, const OperatorInfo*>> natives;

  const OperatorInfo& add(OperatorInfo info) { return operators.emplace_back(std::move(info)); }
  // `replaces` must name registered module classes (core/module_class.cpp).
  void spell(const OperatorInfo& op, std::string spelling, std::vector<std::string> replaces) {
    ReplacementClass c{spelling, &op, std::move(replaces), {}};
    for (const std::string& name : c.replaces) c.replaced_classes.push_back(&module_class(name));
    const ReplacementClass& stored = classes.emplace_back(std::move(c));
    if (!by_spelling.emplace(spelling, &stored).second) return;
    spellings.push_back(spelling);
    if (spelling == op.name && op.kind != OperatorKind::default_op)
      for (const ModuleClass* replaced : stored.replaced_classes) natives.emplace_back(replaced, &op);
  }

  Registry() {
    const std::string kt = "ktransformers.operators.";
    const OperatorInfo& def = add({"default", OperatorKind::default_op,
                                   "keep the module's own implementation; only place it", devices_and({}),
                                   {}, "", "", std::nullopt, false, {Implementation::none, Implementation::none}});
    spell(def, "default", {});

    const OperatorInfo& linear = add(
        {"Linear", OperatorKind::linear, "linear projection with a choice of kernels",
         devices_and({kGenerateOp, kPrefillOp, kLinearOutDevice}),
         // KLinearMarlin first: a linear placed with the default class on a GPU keeps the file's
         // blocks, as llama.cpp's -ngl does; on the CPU the first op that runs there is KLinearTorch.
         {{"KLinearMarlin", {"marlin"}, kLinearGpuQuant},
          {"KLinearTorch", {"torch"}, kLinear},
          {"VLinearMarlin", {"vmarlin"}, kLinearGpuQuant},
          {"KLinearFP8", {"fp8"}, kLinearGpu},
          {"KLinearCPUInfer", {"cpu"}, kLinearCpu}},
         "KLinearMarlin", "KLinearTorch", std::nullopt, false, {Implementation::none, Implementation::none}});
    spell(linear, "Linear", {"Linear"});
    spell(linear, kt + "linear.KTransformersLinear", {"Linear"});

    // ktransformers' V2 experts (balance_serve) take the same kwargs and ops as KTransformersExperts.
    const OperatorInfo& experts = add(
        {"Experts", OperatorKind::experts, "all routed experts of one MoE layer as one operator",
         devices_and({kGenerateOp, kPrefillOp,
                      {"out_device", KwargType::device, "device the experts' output is handed to", {}},
                      kExpertsBackend}),
         // KExpertsMarlin before KExpertsTorch: routed experts placed with the default class on a
         // GPU keep the file's blocks, as linears do; a rule naming KExpertsTorch gets bf16 copies.
         {{"KExpertsCPU", {"cpu"}, kExpertsCpu},
          {"KExpertsMarlin", {"marlin"}, kExpertsGpuQuant},
          {"KExpertsTorch", {"torch"}, kExperts}},
         "KExpertsCPU", "KExpertsTorch", Device::cpu(), true, {Implementation::none, Implementation::none}});
    spell(experts, "Experts", {"ModuleList"});
    spell(experts, kt + "experts.KTransformersExperts", {"ModuleList"});
    spell(experts, kt + "experts.KTransformersExpertsV2", {"ModuleList"});

    const OperatorInfo& moe = add({"MoE", OperatorKind::moe,
                                   "MoE block: gate, routed experts (possibly on the CPU) and shared experts",
                                   devices_and({}), {}, "", "", std::nullopt, false, {Implementation::moe_cpu, Implementation::moe_gpu}});
    spell(moe, "MoE", {"MoE"});
    spell(moe, kt + "experts.KDeepseekV3MoE", {"DeepseekV3MoE"});
    spell(moe, kt + "experts.KDeepseekV3MoEV2", {"DeepseekV3MoE"});
    spell(moe, kt + "experts.KDeepseekV2MoE", {"DeepseekV2MoE"});
    spell(moe, kt + "experts.KQwen3MoeSparseMoeBlock", {"Qwen3MoeSparseMoeBlock"});
    spell(moe, kt + "experts.KQwen3MoeSparseMoeBlockV2", {"Qwen3MoeSparseMoeBlock"});
    spell(moe, kt + "experts.KMistralSparseMoEBlock", {"MixtralSparseMoeBlock"});

    const OperatorInfo& gate = add({"Gate", OperatorKind::gate, "MoE router: scores and top-k expert selection",
                                    devices_and({}), {}, "", "", std::nullopt, false, {Implementation::gate_cpu, Implementation::gate_gpu}});
    spell(gate, "Gate", {"MoEGate"});
    spell(gate, kt + "gate.KMoEGate", {"MoEGate"});
    spell(gate, kt + "gate.KMoEGateDeepSeekV3", {"DeepseekV3MoEGate"});

    // flashinfer_attn is ktransformers' MLA for its balance_serve server; ours is one operator.
    const OperatorInfo& mla = add(
        {"MLA", OperatorKind::attention, "multi-head latent attention with a compressed KV cache",
         devices_and({kAbsorbForPrefill, kChunckSize, kChunkSize}),
         {}, "", "", std::nullopt, false, {Implementation::mla_cpu, Implementation::mla_gpu}});
    spell(mla, "MLA", attention_classes(AttentionKind::mla));
    spell(mla, kt + "attention.KDeepseekV2Attention", {"DeepseekV3Attention", "DeepseekV2Attention"});
    spell(mla, kt + "balance_serve_attention.flashinfer_attn", {"DeepseekV3Attention", "DeepseekV2Attention"});

    const OperatorInfo& gqa = add({"GQA", OperatorKind::attention, "grouped-query attention with a K/V cache",
                                   devices_and({kChunckSize, kChunkSize}), {}, "", "", std::nullopt, false,
                                   {Implementation::gqa_cpu, Implementation::gqa_gpu}});
    spell(gqa, "GQA", attention_classes(AttentionKind::gqa));
    spell(gqa, kt + "balance_serve_attention.KQwen3MoeAttention", {"Qwen3MoeAttention"});

    // The RoPE classes differ in how ktransformers caches their tables; ours are built from the
    // config's rope_theta and rope_scaling whatever the spelling.
    const OperatorInfo& rope = add({"RoPE", OperatorKind::rotary, "rotary position embedding", devices_and({}), {},
                                    "", "", std::nullopt, false, {Implementation::rotary, Implementation::rotary}});
    spell(rope, "RoPE", {"RotaryEmbedding"});
    spell(rope, kt + "RoPE.RotaryEmbedding", {"RotaryEmbedding"});
    spell(rope, kt + "RoPE.RotaryEmbeddingV2", {"RotaryEmbedding"});
    spell(rope, kt + "RoPE.RotaryEmbeddingV3", {"RotaryEmbedding"});
    spell(rope, kt + "RoPE.RotaryEmbeddingV4", {"RotaryEmbedding"});
    spell(rope, kt + "RoPE.KQwen3MoeRotaryEmbedding", {"Qwen3MoeRotaryEmbedding"});
    const OperatorInfo& yarn = add({"YarnRoPE", OperatorKind::rotary, "YaRN-scaled rotary embedding (DeepSeek)",
                                    devices_and({}), {}, "", "", std::nullopt, false, {Implementation::rotary, Implementation::rotary}});
    spell(yarn, "YarnRoPE", {"DeepseekV3YarnRotaryEmbedding", "DeepseekV2YarnRotaryEmbedding"});
    spell(yarn, kt + "RoPE.YarnRotaryEmbedding", {"DeepseekV3YarnRotaryEmbedding", "DeepseekV2YarnRotaryEmbedding"});
    spell(yarn, kt + "RoPE.YarnRotaryEmbeddingV3", {"DeepseekV3YarnRotaryEmbedding", "DeepseekV2YarnRotaryEmbedding"});

    // ktransformers' Qwen3-MoE profiles place the model with KQwen2MoeModel and the dense MLPs
    // with KQwen2MoeMLP (its Qwen3 classes derive from the Qwen2 ones).
    const OperatorInfo& model = add(
        {"Model", OperatorKind::model, "the decoder stack; moves the hidden state across devices by transfer_map",
         devices_and({{"transfer_map", KwargType::transfer_map, "layer -> device the hidden state moves to", {}},
                      kPerLayerPrefillThreshold, kPerLayerPrefillDevice}),
         {}, "", "", std::nullopt, false, {Implementation::decoder_stack, Implementation::decoder_stack}});
    spell(model, "Model", {"Model"});
    spell(model, kt + "models.KDeepseekV2Model", {"DeepseekV3Model", "DeepseekV2Model"});
    spell(model, kt + "models.KQwen3MoeModel", {"Qwen3MoeModel"});
    spell(model, kt + "models.KQwen2MoeModel", {"Qwen3MoeModel"});

    const OperatorInfo& norm = add({"RMSNorm", OperatorKind::rms_norm, "fused RMSNorm", devices_and({}), {}, "", "",
                                    std::nullopt, false, {Implementation::rms_norm_cpu, Implementation::rms_norm_gpu}});
    spell(norm, "RMSNorm", {"RMSNorm"});
    spell(norm, kt + "layernorm.RMSNorm", {"RMSNorm"});
    spell(norm, kt + "layernorm.KDeepseekRMSNorm", {"DeepseekV3RMSNorm", "DeepseekV2RMSNorm"});
    spell(norm, kt + "layernorm.KQwen3MoeRMSNorm", {"Qwen3MoeRMSNorm"});

    const OperatorInfo& mlp = add({"MLP", OperatorKind::mlp, "fused SwiGLU MLP (dense layers, shared experts)",
                                   devices_and({}), {}, "", "", std::nullopt, false, {Implementation::mlp_cpu, Implementation::mlp_gpu}});
    spell(mlp, "MLP", {"MLP"});
    spell(mlp, kt + "mlp.kDeepseekV3MLP", {"DeepseekV3MLP", "DeepseekV2MLP"});
    spell(mlp, kt + "mlp.KQwen3MoeMLP", {"Qwen3MoeMLP"});
    spell(mlp, kt + "mlp.KQwen2MoeMLP", {"Qwen3MoeMLP"});

    // GLM-4.5 (glm4_moe): the classes of ktransformers' Glm4Moe rules.
    spell(moe, kt + "experts.KGlm4MoeMoE", {"Glm4MoeMoE"});
    spell(experts, kt + "experts.KGlm4Experts", {"ModuleList"});
    spell(gqa, kt + "balance_serve_attention.KGlm4MoeAttention", {"Glm4MoeAttention"});
    spell(rope, kt + "RoPE.KGlm4MoeRotaryEmbedding", {"Glm4MoeRotaryEmbedding"});
    spell(norm, kt + "layernorm.KGlm4MoeRMSNorm", {"Glm4MoeRMSNorm"});
    spell(mlp, kt + "mlp.KGlm4MoeMLP", {"Glm4MoeMLP"});
  }
};

const Registry& registry() {
  static const Registry r;
  return r;
}

}  // namespace

const char* kwarg_type_name(KwargType type) {
  switch (type) {
    case KwargType::device: return "a device (cpu, cuda:N)";
    case KwargType::op: return "an op name";
    case KwargType::integer: return "an integer";
    case KwargType::boolean: return "true or false";
    case KwargType::string: return "a string";
    case KwargType::transfer_map: return "a map of layer -> device";
    case KwargType::choice: return "one of the listed values";
  }
  return "a value";
}

const KwargSpec* OperatorInfo::find_kwarg(std::string_view kwarg) const {
  for (const KwargSpec& k : kwargs)
    if (k.name == kwarg) return &k;
  return nullptr;
}

const OpInfo* OperatorInfo::find_op(std::string_view op) const {
  for (const OpInfo& o : ops) {
    if (o.name == op) return &o;
    for (const std::string& alias : o.aliases)
      if (alias == op) return &o;
  }
  return nullptr;
}

std::vector<std::string> OperatorInfo::kwarg_names() const {
  std::vector<std::string> names;
  for (const KwargSpec& k : kwargs) names.push_back(k.name);
  return names;
}

std::vector<std::string> OperatorInfo::op_spellings() const {
  std::vector<std::string> names;
  for (const OpInfo& o : ops) {
    names.push_back(o.name);
    names.insert(names.end(), o.aliases.begin(), o.aliases.end());
  }
  return names;
}

const ReplacementClass* find_replacement_class(std::string_view spelling) {
  const auto& map = registry().by_spelling;
  const auto it = map.find(std::string(spelling));
  return it == map.end() ? nullptr : it->second;
}

const std::vector<std::string>& replacement_class_spellings() { return registry().spellings; }
const OperatorInfo& default_operator() { return registry().operators.front(); }

const std::vector<OperatorInfo>& operators() {
  static const std::vector<OperatorInfo> all(registry().operators.begin(), registry().operators.end());
  return all;
}

bool ReplacementClass::can_replace(const ModuleClass& cls) const {
  if (replaced_classes.empty()) return true;
  for (const ModuleClass* replaced : replaced_classes)
    if (cls.is_a(*replaced)) return true;
  return false;
}

const OperatorInfo* native_operator(const ModuleClass& cls) {
  for (const auto& [replaced, op] : registry().natives)
    if (cls.is_a(*replaced)) return op;
  return nullptr;
}

const OperatorInfo* find_operator(std::string_view native_name) {
  for (const OperatorInfo& op : registry().operators)
    if (op.name == native_name) return &op;
  return nullptr;
}

}  // namespace switchyard
