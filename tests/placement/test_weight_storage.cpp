// placement/weight_storage.h: the dtype each device holds a weight in, which check's estimate and
// the model's loader share. Checked on DeepSeek-V3's description in Q4_K_M (every projection in
// blocks) with everything on cuda:0 and, through --cpu-moe, the routed experts on the CPU.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "placement/check.h"
#include "placement/report.h"
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
    // The routed experts' default op on a GPU is KExpertsMarlin: their blocks stay as well. (With
    // --cpu-moe no GPU runs them, so none would hold them: a GPU copy would be bf16.)
    const sy::DType expert_on_gpu = cpu_moe ? sy::DType::bf16 : sy::DType::q8_0;
    CHECK(resident(r, "model.layers.1.mlp.experts.3.up_proj", gpu) == expert_on_gpu);
    CHECK(resident(r, "model.layers.1.mlp.experts.3.down_proj", gpu) == expert_on_gpu);
    // Operators that multiply floats: MLA's kv_b_proj.
    CHECK(resident(r, "model.layers.1.self_attn.kv_b_proj", gpu) == sy::DType::bf16);
    // The embedding's rows are decoded where they are gathered, on either device.
    CHECK(resident(r, "model.embed_tokens", gpu) == sy::DType::q8_0);
    CHECK(resident(r, "model.embed_tokens", cpu) == sy::DType::q8_0);
    // The CPU reads blocks in place.
    CHECK(resident(r, "model.layers.1.mlp.experts.3.up_proj", cpu) == sy::DType::q8_0);
  }
}

TEST_CASE("weight storage: a plan on the CPU alone keeps the embedding's blocks too, and check counts them") {
  sy::CheckOptions o;
  o.model.arch = "tiny-deepseek-v3";
  o.model.weight_dtype = "q4_k_m";
  o.gpus = 0;
  o.default_device = sy::Device::cpu();
  const sy::CheckResult r = sy::run_check(o);
  for (const sy::Diagnostic& d : r.diagnostics.items()) INFO(sy::format_diagnostic(d));
  REQUIRE_FALSE(r.diagnostics.has_errors());
  const int embed = r.tree->find("model.embed_tokens");
  REQUIRE(embed >= 0);
  const sy::DType stored = r.tree->at(embed).params.front().dtype;
  REQUIRE(sy::is_block_quantized(stored));
  CHECK(sy::resident_dtype(r.plan, embed, stored, sy::Device::cpu()) == stored);
  // The CPU's estimate holds the table's blocks, not a bf16 copy of it.
  const sy::Shape& shape = r.tree->at(embed).params.front().shape;
  std::uint64_t all_params = 0;
  for (const sy::Module& m : r.tree->modules())
    for (const sy::Parameter& p : m.params)
      all_params += sy::storage_bytes(sy::resident_dtype(r.plan, static_cast<int>(&m - r.tree->modules().data()), p.dtype,
                                                         sy::Device::cpu()),
                                      p.shape.elements());
  for (const sy::DeviceMemory& d : r.memory)
    if (d.device.is_cpu()) CHECK(d.weight_bytes == all_params);
  CHECK(sy::storage_bytes(stored, shape.elements()) < sy::storage_bytes(sy::DType::bf16, shape.elements()));
}

TEST_CASE("weight storage: GPU routed experts keep blocks under KExpertsMarlin and -ot, become bf16 under KExpertsTorch") {
  const sy::Device gpu = sy::Device::cuda(0);
  const std::string expert = "model.layers.1.mlp.experts.3.";
  auto plan = [](const std::string& op, const std::vector<std::string>& override_tensor) {
    sy::CheckOptions o;
    o.model.arch = "tiny-deepseek-v3";
    o.model.weight_dtype = "q4_k_m";
    o.gpus = 1;
    o.quick_rules.override_tensor = override_tensor;
    if (!op.empty())
      o.profile_text = "- match:\n    name: \"^model\\\\.layers\\\\..*\\\\.mlp\\\\.experts$\"\n  replace:\n"
                       "    class: ktransformers.operators.experts.KTransformersExperts\n    kwargs:\n"
                       "      generate_device: \"cuda:0\"\n      generate_op: \"" + op + "\"\n"
                       "      prefill_device: \"cuda:0\"\n      prefill_op: \"" + op + "\"\n  recursive: False\n";
    sy::CheckResult r = sy::run_check(o);
    for (const sy::Diagnostic& d : r.diagnostics.items()) INFO(sy::format_diagnostic(d));
    REQUIRE_FALSE(r.diagnostics.has_errors());
    return r;
  };
  const sy::CheckResult marlin = plan("KExpertsMarlin", {});
  const sy::CheckResult torch = plan("KExpertsTorch", {});
  const sy::CheckResult ot = plan("", {"exps=CUDA0"});
  for (const char* projection : {"gate_proj", "up_proj", "down_proj"}) {
    INFO(projection);
    const int i = marlin.tree->find(expert + projection);
    REQUIRE(i >= 0);
    const sy::DType stored = marlin.tree->at(i).params.front().dtype;
    CHECK(resident(marlin, expert + projection, gpu) == stored);
    CHECK(resident(ot, expert + projection, gpu) == stored);
    CHECK(resident(torch, expert + projection, gpu) == sy::DType::bf16);
  }
  // The estimate counts what each op keeps: blocks take less of cuda:0 than their bf16 copies.
  auto gpu_bytes = [](const sy::CheckResult& r) {
    for (const sy::DeviceMemory& m : r.memory)
      if (m.device == sy::Device::cuda(0)) return m.total_bytes();
    FAIL("no cuda:0 in the estimate");
    return std::uint64_t{0};
  };
  CHECK(gpu_bytes(marlin) < gpu_bytes(torch));
  CHECK(gpu_bytes(ot) == gpu_bytes(marlin));
}

TEST_CASE("weight storage: the plan carries every parameter's resident dtype on each device that holds it, and check reports it") {
  // A ktransformers-style profile whose routed experts decode on the CPU and prefill on the GPU
  // (two devices hold them), on a model stored in Q4_K_M (floats and blocks mixed).
  sy::CheckOptions o;
  o.model.arch = "tiny-deepseek-v3";
  o.model.weight_dtype = "q4_k_m";
  o.gpus = 1;
  o.profile = "split-experts.yaml";
  o.profile_text = R"(- match:
    name: "^model\\.layers\\.\\d+\\.mlp\\.experts$"
  replace:
    class: ktransformers.operators.experts.KTransformersExperts
    kwargs:
      generate_device: "cpu"
      generate_op: "KExpertsCPU"
      prefill_device: "cuda:0"
      prefill_op: "KExpertsTorch"
  recursive: False
)";
  const sy::CheckResult r = sy::run_check(o);
  for (const sy::Diagnostic& d : r.diagnostics.items()) INFO(sy::format_diagnostic(d));
  REQUIRE_FALSE(r.diagnostics.has_errors());
  const sy::ModuleTree& tree = *r.tree;
  REQUIRE(r.plan.resident.size() == tree.size());
  int two_devices = 0, converted = 0;
  for (int i = 0; i < static_cast<int>(tree.size()); ++i) {
    const sy::Module& m = tree.at(i);
    const std::vector<sy::Device> held_by = sy::weight_devices(r.plan.owner_of(i));
    // One entry per parameter and holding device, each the weight-storage rule's answer.
    CHECK(r.plan.resident[static_cast<std::size_t>(i)].size() == m.params.size() * held_by.size());
    for (std::size_t p = 0; p < m.params.size(); ++p)
      for (const sy::Device& d : held_by) {
        const sy::DType kept = r.plan.resident_dtype(i, static_cast<int>(p), d);
        CHECK(kept == sy::resident_dtype(r.plan, i, m.params[p].dtype, d));
        converted += kept != m.params[p].dtype;
      }
    two_devices += !m.params.empty() && held_by.size() == 2;
    // A device that does not hold the module's weights has no answer.
    if (!m.params.empty() && held_by.size() == 1)
      CHECK_THROWS_AS(r.plan.resident_dtype(i, 0, held_by.front().is_cpu() ? sy::Device::cuda(0) : sy::Device::cpu()),
                      std::logic_error);
  }
  CHECK(two_devices > 0);  // the experts' projections, on the CPU and the GPU
  CHECK(converted > 0);    // KExpertsTorch's bf16 copies on the GPU
  // check --format json names them: an expert projection's blocks on the CPU, bf16 on the GPU.
  const nlohmann::ordered_json doc = sy::check_to_json(r, o.budget);
  bool found = false;
  for (const auto& module : doc["modules"]) {
    if (module["name"] != "model.layers.1.self_attn.kv_b_proj") continue;
    found = true;
    REQUIRE(module["weights"].size() == 1);
    CHECK(module["weights"][0]["stored"] != "bf16");
    CHECK(module["weights"][0]["resident"]["cuda:0"] == "bf16");  // MLA's kv_b_proj is always floats on a GPU
  }
  CHECK(found);
}
