// A GGUF model read as a checkpoint (core/checkpoint.h over core/gguf.h): make-model writes the
// same random weights as safetensors and as GGUF for a seed, so every tensor the engine asks for by
// its checkpoint name must come back from the GGUF equal to the safetensors one, through the
// fused experts, Mixtral's reordered q/k rows and DeepSeek's split kv_b_proj; quantised files
// decode to the quantiser's values; and the dry-run description takes the file's types.
#include <fstream>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "core/checkpoint.h"
#include "core/diagnostics.h"
#include "core/gguf.h"
#include "core/gguf_description.h"
#include "core/make_model.h"
#include "core/model_description.h"
#include "core/module_tree.h"
#include "core/quant_formats.h"
#include "placement/check.h"
#include "tests/core_test_support.h"
#include "tests/test_support.h"

namespace sy = switchyard;
using sy::core_testing::TempDir;

namespace {

void make(const std::string& preset, const std::string& format, const std::string& dtype, const std::filesystem::path& out,
          std::uint64_t seed = 11) {
  sy::MakeModelOptions options;
  options.preset = preset;
  options.out_dir = out;
  options.seed = seed;
  options.format = format;
  options.dtype = dtype;
  sy::make_model(options);
}

std::vector<std::int64_t> shape_of(const sy::Parameter& p) {
  return std::vector<std::int64_t>(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
}

std::vector<float> as_f32(const sy::Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  sy::quant::dequantize_rows(t.dtype(), t.data(), out.data(), t.numel() / t.dim(-1), t.dim(-1));
  return out;
}

const char* const kPresets[] = {"tiny-deepseek-v3", "tiny-deepseek-v2", "tiny-qwen3-moe", "tiny-mixtral", "tiny-glm4-moe"};

}  // namespace

TEST_CASE("gguf checkpoint: every tensor of an f32 GGUF equals the safetensors checkpoint of the same seed") {
  for (const char* preset : kPresets) {
    CAPTURE(preset);
    TempDir dir;
    make(preset, "safetensors", "f32", dir / "st");
    make(preset, "gguf", "f32", dir / "gguf");
    sy::ModelSpec spec;
    spec.gguf_path = dir / "gguf" / "model.gguf";
    const sy::ModelConfig config = sy::model_config_of(spec);
    const sy::Checkpoint st = sy::Checkpoint::open(dir / "st");
    const sy::Checkpoint gguf = sy::Checkpoint::open_gguf(dir / "gguf", config);
    CHECK(gguf.is_gguf());
    const sy::ModuleTree tree = sy::build_module_tree(config, *sy::find_weight_scheme("f32"));
    int compared = 0, experts = 0;
    for (const sy::Module& m : tree.modules())
      for (const sy::Parameter& p : m.params) {
        const std::string name = std::string(m.name) + "." + std::string(p.name);
        CAPTURE(name);
        const sy::Tensor a = st.get(name, shape_of(p), {sy::DType::f32});
        const sy::Tensor b = gguf.get(name, shape_of(p), {sy::DType::f32});
        REQUIRE(a.bytes() == b.bytes());
        CHECK(std::memcmp(a.data(), b.data(), a.bytes()) == 0);
        ++compared;
        experts += name.find(".experts.") != std::string::npos;
      }
    CHECK(compared > 30);
    CHECK(experts > 0);
  }
}

TEST_CASE("gguf checkpoint: a quantised file decodes to the quantiser's values, experts in place") {
  TempDir dir;
  make("tiny-qwen3-moe", "safetensors", "f32", dir / "st");
  make("tiny-qwen3-moe", "gguf", "q8_0", dir / "gguf");
  const std::filesystem::path file = dir / "gguf" / "model.gguf";
  sy::ModelSpec spec;
  spec.gguf_path = file;
  const sy::ModelConfig config = sy::model_config_of(spec);
  const sy::Checkpoint st = sy::Checkpoint::open(dir / "st");
  const sy::Checkpoint gguf = sy::Checkpoint::open_gguf(file, config);
  const sy::ModuleTree tree = sy::build_module_tree(config, *sy::find_weight_scheme("q8_0"));
  int quantised = 0;
  for (const sy::Module& m : tree.modules())
    for (const sy::Parameter& p : m.params) {
      const std::string name = std::string(m.name) + "." + std::string(p.name);
      CAPTURE(name);
      const sy::Tensor original = st.get(name, shape_of(p), {sy::DType::f32});
      const sy::DType stored = gguf.stored_dtype(name);
      const sy::Tensor as_stored = gguf.get(name, shape_of(p), {stored});
      // Dequantized by get_converted: the quantiser's decoded values of the original weights.
      const std::vector<float> decoded = as_f32(gguf.get_converted(name, shape_of(p), sy::DType::f32));
      std::vector<std::byte> requantised(as_stored.bytes());
      const std::int64_t columns = original.dim(-1);
      sy::quant::quantize_rows(stored, original.data_as<float>(), requantised.data(), original.numel() / columns, columns);
      CHECK(std::memcmp(requantised.data(), as_stored.data(), as_stored.bytes()) == 0);
      if (stored == sy::DType::q8_0) {
        ++quantised;
        const float* w = original.data_as<float>();
        double err = 0, norm = 0;
        for (std::size_t i = 0; i < decoded.size(); ++i) {
          err += (decoded[i] - w[i]) * static_cast<double>(decoded[i] - w[i]);
          norm += static_cast<double>(w[i]) * w[i];
        }
        CHECK(std::sqrt(err / norm) < 0.01);  // Q8_0: about 0.4% of the RMS
      }
      // Experts are slices of the fused tensor, read in place from the file's mapping.
      if (name.find(".experts.") != std::string::npos) CHECK(as_stored.in_read_only_pages());
    }
  CHECK(quantised > 10);
}

TEST_CASE("gguf checkpoint: the description takes the file's types, and a missing tensor is reported") {
  TempDir dir;
  make("tiny-deepseek-v3", "gguf", "q4_k_m", dir / "gguf");
  sy::Diagnostics diagnostics;
  sy::ModelSpec spec;
  spec.gguf_path = dir / "gguf";
  const sy::ModuleTree tree = sy::describe_model(spec, diagnostics);
  for (const sy::Diagnostic& d : diagnostics.items()) INFO(sy::format_diagnostic(d));
  CHECK_FALSE(diagnostics.has_errors());
  CHECK(diagnostics.items().empty());
  const sy::GgufFile file = sy::GgufFile::open(spec.gguf_path);
  const int head = tree.find("lm_head");
  REQUIRE(head >= 0);
  CHECK(tree.at(head).params.front().dtype == file.find_tensor("output.weight")->dtype);
  // Q4_K_M's output is Q6_K, whose 256-weight blocks a tiny row of 64 cannot hold: Q8_0 instead.
  CHECK(tree.at(head).params.front().dtype == sy::DType::q8_0);
}

TEST_CASE("gguf checkpoint: check counts a GGUF's weights as the operators hold them, per device") {
  // Qwen3-MoE's hybrid profile: attention, norms, router and head on cuda:0, the routed experts on
  // the CPU. What the CPU holds stays in the file's blocks (mapped), the token embedding's too
  // (the GPU's gather decodes its rows). The GPU's projections run
  // KLinearMarlin in decode, so they keep the file's blocks too, except the router
  // (ffn_gate_inp), which becomes floats; prefill dequantizes a bounded chunk of rows per product,
  // which the GPU's prefill buffer counts. The file gives the stored bytes, so the totals follow
  // from it alone.
  TempDir dir;
  make("small-qwen3-moe", "gguf", "q4_k_m", dir / "gguf");
  sy::CheckOptions options;
  options.model.gguf_path = dir / "gguf";
  options.profile = sy::testing::source_path("optimize_rules/Qwen3-MoE.yaml");
  options.gpus = 1;
  const sy::CheckResult check = sy::run_check(options);
  for (const sy::Diagnostic& d : check.diagnostics.items()) INFO(sy::format_diagnostic(d));
  REQUIRE_FALSE(check.diagnostics.has_errors());
  const sy::GgufFile file = sy::GgufFile::open(dir / "gguf");
  std::uint64_t expert_bytes = 0, gpu_bytes = 0, embedding_bytes = 0, chunk_bytes = 0;
  int blocks_on_gpu = 0;
  for (const sy::GgufTensorInfo& t : file.tensors()) {
    std::uint64_t elements = 1;
    for (std::int64_t d : t.shape) elements *= static_cast<std::uint64_t>(d);
    const bool experts = t.name.find("_exps.") != std::string::npos;
    const bool router = t.name.find("ffn_gate_inp.") != std::string::npos;
    if (experts) expert_bytes += t.bytes;
    else if (t.name == "token_embd.weight") embedding_bytes = t.bytes;  // its blocks, gathered from the CPU's pages
    else if (router && sy::is_block_quantized(t.dtype)) gpu_bytes += 2 * elements;
    else {
      gpu_bytes += t.bytes;
      if (sy::is_block_quantized(t.dtype)) {
        ++blocks_on_gpu;
        // GGUF shapes run innermost first: [in, out].
        const auto in = t.shape[0], out = t.shape[1];
        chunk_bytes = std::max<std::uint64_t>(chunk_bytes, 2 * static_cast<std::uint64_t>(sy::quant::dequantize_chunk_rows(out, in) * in));
      }
    }
  }
  REQUIRE(blocks_on_gpu > 0);
  std::uint64_t cpu = 0, gpu = 0, gpu_prefill = 0;
  for (const sy::DeviceMemory& m : check.memory) {
    (m.device.is_cpu() ? cpu : gpu) += m.weight_bytes;
    if (m.device.is_cuda()) gpu_prefill = m.dequantize_buffer_bytes;
  }
  CHECK(cpu == expert_bytes + embedding_bytes);
  CHECK(gpu == gpu_bytes);
  CHECK(gpu_prefill == chunk_bytes);
}

TEST_CASE("gguf checkpoint: KLinearTorch on a GPU dequantizes at load, KLinearMarlin keeps the blocks") {
  // One rule set, the projections' op the only change: the GPU's weight bytes follow the op, and
  // MLA's kv_b_proj (split in the file as attn_k_b / attn_v_b or whole) is bf16 under both.
  TempDir dir;
  make("tiny-deepseek-v3", "gguf", "q8_0", dir / "gguf");
  const auto gpu_weights = [&](const char* op) {
    const std::filesystem::path rules = dir / (std::string(op) + ".yaml");
    std::ofstream(rules) << R"(- match:
    name: "^model\\.layers\\..*\\.mlp\\.experts$"
  replace:
    class: ktransformers.operators.experts.KTransformersExperts
    kwargs: {generate_device: cpu, prefill_device: cpu, generate_op: KExpertsCPU, prefill_op: KExpertsCPU, out_device: "cuda:0"}
  recursive: False
- match:
    class: torch.nn.Linear
  replace:
    class: ktransformers.operators.linear.KTransformersLinear
    kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0", generate_op: )"
                         << op << ", prefill_op: " << op << R"(}
- match:
    name: ".*"
  replace: {class: default, kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}}
)";
    sy::CheckOptions options;
    options.model.gguf_path = dir / "gguf";
    options.profile = rules;
    options.gpus = 1;
    const sy::CheckResult check = sy::run_check(options);
    for (const sy::Diagnostic& d : check.diagnostics.items()) INFO(sy::format_diagnostic(d));
    REQUIRE_FALSE(check.diagnostics.has_errors());
    for (const sy::DeviceMemory& m : check.memory)
      if (m.device.is_cuda()) return m.weight_bytes;
    FAIL("no GPU in the plan");
    return std::uint64_t{0};
  };
  const sy::GgufFile file = sy::GgufFile::open(dir / "gguf");
  // What the two plans differ by: every Q8_0 projection outside the experts, the router and
  // kv_b_proj, as bf16 (2 bytes a weight) against its blocks.
  std::uint64_t difference = 0;
  for (const sy::GgufTensorInfo& t : file.tensors()) {
    if (!sy::is_block_quantized(t.dtype) || t.name.find("_exps.") != std::string::npos ||
        t.name.find("ffn_gate_inp.") != std::string::npos || t.name.find("attn_k_b.") != std::string::npos ||
        t.name.find("attn_v_b.") != std::string::npos || t.name.find("attn_kv_b.") != std::string::npos ||
        t.name == "token_embd.weight")
      continue;
    std::uint64_t elements = 1;
    for (std::int64_t d : t.shape) elements *= static_cast<std::uint64_t>(d);
    difference += 2 * elements - t.bytes;
  }
  REQUIRE(difference > 0);
  CHECK(gpu_weights("KLinearTorch") - gpu_weights("KLinearMarlin") == difference);
}
