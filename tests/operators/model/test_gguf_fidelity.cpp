// A quantised GGUF run on the CPU against a plain f32 reference run over its own dequantized
// weights: make-model writes the GGUF; the reference is a safetensors f32 checkpoint of exactly
// the values the GGUF's blocks decode to (core/quant_formats.h), run with the same profile and an
// f32 KV cache. What differs is only how the CPU multiplies: the integer path quantises each
// token's activations to 8-bit blocks (Q8_0-style for the 32-weight types, Q8_K for the K types;
// operators/cpu/kernels/quant_dot.h) and the panel path of the 32-weight types' prefill keeps f32
// activations. So the prompt's logits of the 32-weight types match to float rounding, and the
// rest within the activation quantisation's error, stated below. On a CPU with AMX or AVX512-BF16
// the prefill's expert groups of 16 tokens or more round activations and weights to bf16 instead
// (cpu::linear_rounds_x), within the same bounds.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checkpoint.h"
#include "core/make_model.h"
#include "core/model_description.h"
#include "core/safetensors_writer.h"
#include "tests/core_test_support.h"
#include "tests/fidelity_support.h"
#include "placement/weight_storage.h"
#include "switchyard_config.h"
#if SWITCHYARD_HAVE_CUDA
#include "tests/cuda_test_support.h"
#endif

namespace sy = switchyard;
using sy::core_testing::TempDir;

namespace {

// The safetensors f32 twin of the model `spec` names (a GGUF, or a block-scaled FP8 checkpoint):
// every tree tensor dequantized, config.json from the model's with torch_dtype float32.
void write_dequantized_twin(const sy::ModelSpec& spec, const std::filesystem::path& out) {
  sy::ModelConfig config = sy::model_config_of(spec);
  const sy::Checkpoint weights = sy::open_model_weights(spec, config);
  const sy::ModuleTree tree = sy::build_module_tree(config, *sy::find_weight_scheme("f32"));
  std::vector<sy::SafetensorsEntry> entries;
  std::vector<sy::Tensor> tensors;
  for (const sy::Module& m : tree.modules())
    for (const sy::Parameter& p : m.params) {
      const std::string name = std::string(m.name) + "." + std::string(p.name);
      std::vector<std::int64_t> shape(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
      tensors.push_back(weights.get_converted(name, shape, sy::DType::f32));
      entries.push_back({name, sy::DType::f32, shape});
    }
  std::filesystem::create_directories(out);
  sy::SafetensorsWriter writer(out / "model.safetensors", entries);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    writer.begin_tensor(entries[i].name);
    writer.write({static_cast<const std::byte*>(tensors[i].data()), tensors[i].bytes()});
  }
  writer.finish();
  config.torch_dtype = "float32";
  sy::write_file_atomically(out / "config.json", sy::model_config_to_json(config).dump(2));
}

struct Model {
  sy::CheckResult check;
  std::unique_ptr<sy::Checkpoint> weights;
  std::unique_ptr<sy::CausalLM> lm;
};

std::unique_ptr<Model> load(const sy::ModelSpec& spec, const std::string& profile,
                            const std::vector<std::string>& override_tensor) {
  auto m = std::make_unique<Model>();
  sy::CheckOptions options;
  options.model = spec;
  options.profile = sy::testing::source_path("optimize_rules/" + profile);
  options.quick_rules.override_tensor = override_tensor;
  options.budget.max_context = 128;
  options.budget.kv_cache_dtype = sy::DType::f32;
  m->check = sy::run_check(options);
  for (const sy::Diagnostic& d : m->check.diagnostics.items()) INFO(sy::format_diagnostic(d));
  REQUIRE_FALSE(m->check.diagnostics.has_errors());
  m->weights = std::make_unique<sy::Checkpoint>(sy::open_model_weights(spec, m->check.tree->config()));
  sy::BuildContext context{*m->check.tree, m->check.plan, *m->weights, options.budget.max_context, nullptr};
  context.kv_cache_dtype = sy::DType::f32;
  m->lm = std::make_unique<sy::CausalLM>(context, sy::CausalLMOptions{});
  return m;
}

struct Case {
  const char* preset;
  const char* dtype;
  const char* profile;
  std::vector<std::string> override_tensor = {};  // -ot values beside the profile
};

// Errors are relative to the logits' scale (max |a - b| / max |b|, sy::testing::relative_error),
// per prompt position and per decode step. The 8-bit activations carry up to 2^-8 relative error
// an element, per 32 inputs for the 32-weight types and per 256 for the K types (coarser); through
// the layers of these small models a position's logits move by 2e-3 to 3e-2 of their scale
// (measured on this suite's seeds: medians 5e-3 to 9e-3 for the 32-weight types, 1.7e-2 to
// 2.1e-2 for the K types). Routing is not continuous: where the drift moves a router score across
// the top-k boundary, other experts run and that position's logits jump (seen: up to 0.51 with
// Q3_K), and the cache rows it writes carry some of it on. So some positions may pass the
// tolerance, none the jump limit.
constexpr double kTolerance32 = 0.03;  // the 32-weight types: activations in blocks of 32
constexpr double kToleranceK = 0.05;   // the K types: in blocks of 256
constexpr int kJumps = 8;  // of 24 prompt positions and 32 steps
constexpr double kJumpLimit = 0.6;

// The gap between the best and the second-best logit, relative to the logits' scale.
double top_two_gap(const std::vector<float>& logits) {
  std::vector<float> sorted(logits);
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  double scale = 0;
  for (float v : logits) scale = std::max(scale, std::abs(static_cast<double>(v)));
  return (sorted[0] - sorted[1]) / scale;
}

}  // namespace

namespace {

// One case: the GGUF and its f32 twin under the same profile; the logits' errors and greedy
// choices as stated above. `gguf_on_gpu`: the GPU's projections must hold the file's blocks, and
// so must the routed experts that the case's -ot puts on the GPU.
void check_case(const Case& c, bool gguf_on_gpu) {
  const std::string name = std::string(c.preset) + " " + c.dtype;
  CAPTURE(name);
  TempDir dir;
  sy::MakeModelOptions make;
  make.preset = c.preset;
  make.out_dir = dir / "gguf";
  make.seed = 21;
  const bool fp8 = std::string(c.dtype) == "fp8";  // a block-scaled FP8 safetensors checkpoint
  make.format = fp8 ? "safetensors" : "gguf";
  make.dtype = c.dtype;
  sy::make_model(make);
  sy::ModelSpec gguf_spec, twin_spec;
  (fp8 ? gguf_spec.model_path : gguf_spec.gguf_path) = dir / "gguf";
  write_dequantized_twin(gguf_spec, dir / "twin");
  twin_spec.model_path = dir / "twin";
  const auto quantised = load(gguf_spec, c.profile, c.override_tensor);
  const auto reference = load(twin_spec, c.profile, c.override_tensor);
  if (gguf_on_gpu) {
    // Layer 0's attention projections run on cuda:0 from the file's blocks.
    const sy::PlacementPlan& plan = quantised->check.plan;
    int kept = 0;
    for (int i = 0; i < static_cast<int>(plan.tree->size()); ++i) {
      const sy::Module& m = plan.tree->at(i);
      if (m.name.rfind("model.layers.0.self_attn.", 0) != 0 || m.cls->role != sy::ModuleRole::linear) continue;
      const sy::DType stored = m.params.front().dtype;
      if (!sy::is_block_quantized(stored)) continue;  // kv_b_proj joined from attn_k_b / attn_v_b: f32
      const sy::DType resident = sy::resident_dtype(plan, i, stored, sy::Device::cuda(0));
      kept += resident == stored;
    }
    REQUIRE(kept >= 2);
    // Routed experts on cuda:0 (KExpertsMarlin, from -ot) hold the file's blocks too.
    int experts_on_gpu = 0, experts_kept = 0;
    for (int i = 0; i < static_cast<int>(plan.tree->size()); ++i) {
      const sy::Module& m = plan.tree->at(i);
      if (m.expert < 0 || m.cls->role != sy::ModuleRole::linear || plan.owner_of(i).generate_device.is_cpu())
        continue;
      const sy::DType stored = m.params.front().dtype;
      ++experts_on_gpu;
      experts_kept += sy::resident_dtype(plan, i, stored, sy::Device::cuda(0)) == stored;
    }
    CHECK(experts_kept == experts_on_gpu);
    if (!c.override_tensor.empty()) REQUIRE(experts_on_gpu > 0);
  }
  const std::int64_t vocab = reference->lm->vocab_size();

  // 24 prompt tokens: past the 32-weight types' panel threshold, so their prefill keeps f32 x (or,
  // with AMX or AVX512-BF16, rounds it to bf16).
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back(static_cast<std::int32_t>((i * 37 + 11) % vocab));
  const std::vector<float> ref_logits = reference->lm->forward(prompt, 0, /*all_logits=*/true);
  const std::vector<float> q_logits = quantised->lm->forward(prompt, 0, /*all_logits=*/true);
  REQUIRE(q_logits.size() == ref_logits.size());
  std::vector<double> errors;
  for (std::size_t p = 0; p < prompt.size(); ++p)
    errors.push_back(sy::testing::relative_error(q_logits.data() + p * vocab, ref_logits.data() + p * vocab,
                                                 static_cast<std::size_t>(vocab)));

  // 32 decode steps on the reference's greedy tokens (teacher forcing: both see one context).
  // Where the reference's best logit leads the next by more than twice this step's error, the
  // quantised run must choose it too: a well-separated choice cannot turn.
  std::int32_t next = sy::cpu::argmax(ref_logits.data() + ref_logits.size() - vocab, vocab);
  int same_choice = 0, separated = 0;
  auto position = static_cast<std::int64_t>(prompt.size());
  for (int step = 0; step < 32; ++step, ++position) {
    const std::vector<float> r = reference->lm->forward(std::span(&next, 1), position);
    const std::vector<float> q = quantised->lm->forward(std::span(&next, 1), position);
    const double error = sy::testing::relative_error(q.data(), r.data(), r.size());
    errors.push_back(error);
    const std::int32_t ref_next = sy::cpu::argmax(r.data(), vocab);
    const bool same = sy::cpu::argmax(q.data(), vocab) == ref_next;
    same_choice += same;
    if (top_two_gap(r) > 2 * error) {
      ++separated;
      CHECK_MESSAGE(same, "step " << step << ": a choice separated by more than twice the error turned");
    }
    next = ref_next;
  }
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  // The types whose activations are quantised per 256 inputs (BlockQ8_K) rather than per 32.
  const bool k_type = std::string(c.dtype).find("_k") != std::string::npos || std::string(c.dtype) == "iq4_xs";
  const double tolerance = k_type ? kToleranceK : kTolerance32;
  const auto jumps = std::count_if(errors.begin(), errors.end(), [tolerance](double e) { return e > tolerance; });
  MESSAGE(name << ": relative error of the logits over 24 prompt positions and 32 steps: median "
               << sorted[sorted.size() / 2] << ", largest " << sorted.back() << " (" << jumps << " past "
               << tolerance << "); greedy choice equal to the f32 reference's at " << same_choice
               << " of 32 steps, " << separated << " of them well separated");
  CHECK(sorted[sorted.size() / 2] <= tolerance);
  CHECK(jumps <= kJumps);
  CHECK(sorted.back() <= kJumpLimit);
  CHECK(sorted.front() > 0);  // activations are quantised: an exact match would mean they are not
  CHECK(separated >= 12);
}

}  // namespace

TEST_CASE("gguf fidelity: quantised GGUFs on the CPU match an f32 run over their dequantized weights") {
  // The K types on the preset whose widths hold their super-blocks; the 32-weight types on the tiny
  // presets of each family too (DeepSeek's split kv_b, Mixtral's reordered q/k rows, GLM's biases).
  const Case cases[] = {
      {"small-qwen3-moe", "q8_0", "Qwen3-MoE-cpu.yaml"},      {"small-qwen3-moe", "q6_k", "Qwen3-MoE-cpu.yaml"},
      {"small-qwen3-moe", "q5_k", "Qwen3-MoE-cpu.yaml"},      {"small-qwen3-moe", "q4_k_m", "Qwen3-MoE-cpu.yaml"},
      {"small-qwen3-moe", "q3_k", "Qwen3-MoE-cpu.yaml"},      {"small-qwen3-moe", "q2_k", "Qwen3-MoE-cpu.yaml"},
      {"small-qwen3-moe", "q4_0", "Qwen3-MoE-cpu.yaml"},      {"small-qwen3-moe", "q5_1", "Qwen3-MoE-cpu.yaml"},
      {"tiny-deepseek-v3", "q4_1", "DeepSeek-V3-Chat-cpu.yaml"}, {"tiny-mixtral", "q5_0", "Mixtral-cpu.yaml"},
      {"tiny-glm4-moe", "q8_0", "GLM-4.5-Air-cpu.yaml"},
      {"small-qwen3-moe", "iq4_xs", "Qwen3-MoE-cpu.yaml"},    {"small-qwen3-moe", "iq4_nl", "Qwen3-MoE-cpu.yaml"},
      {"tiny-deepseek-v3", "mxfp4", "DeepSeek-V3-Chat-cpu.yaml"},
      {"tiny-deepseek-v3", "fp8", "DeepSeek-V3-Chat-cpu.yaml"},
  };
  for (const Case& c : cases) check_case(c, false);
}

TEST_CASE("gguf fidelity: GPU projections and routed experts on the file's blocks (KLinearMarlin, KExpertsMarlin) match the f32 run") {
  // The hybrid profiles: attention, shared experts and head on cuda:0, decoding from the blocks in
  // HBM (prefill: bf16 chunks through cuBLAS), the routed experts on the CPU as above. The GPU's
  // f32 decode and bf16 prefill add less error than the CPU experts' 8-bit activations do, so the
  // same bounds hold.
#if SWITCHYARD_HAVE_CUDA
  if (sy::testing::no_gpu()) return;
  // Then the even layers' routed experts on cuda:0 as well (-ot, KExpertsMarlin): decoded from
  // their blocks in HBM, in f32 (decode) and bf16 (prefill), beside the odd layers' on the CPU.
  const std::vector<std::string> even_experts_on_gpu = {"blk\\.[0-9]*[02468]\\.ffn_.*_exps=CUDA0"};
  const Case cases[] = {
      {"small-qwen3-moe", "q4_k_m", "Qwen3-MoE.yaml"},
      {"small-qwen3-moe", "q6_k", "Qwen3-MoE.yaml"},
      {"small-qwen3-moe", "q5_1", "Qwen3-MoE.yaml"},
      {"tiny-deepseek-v3", "q8_0", "DeepSeek-V3-Chat.yaml"},
      {"small-qwen3-moe", "q4_k_m", "Qwen3-MoE.yaml", even_experts_on_gpu},
      {"small-qwen3-moe", "q3_k", "Qwen3-MoE.yaml", even_experts_on_gpu},
      {"tiny-deepseek-v3", "q4_0", "DeepSeek-V3-Chat.yaml", even_experts_on_gpu},
      {"tiny-mixtral", "q5_0", "Mixtral.yaml", even_experts_on_gpu},
      {"small-qwen3-moe", "iq4_xs", "Qwen3-MoE.yaml", even_experts_on_gpu},
      {"tiny-deepseek-v3", "mxfp4", "DeepSeek-V3-Chat.yaml", even_experts_on_gpu},
  };
  for (const Case& c : cases) check_case(c, true);
#else
  MESSAGE("skipped: no CUDA backend in this build");
#endif
}
