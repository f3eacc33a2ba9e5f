// The `switchyard check` command line: exit statuses, the JSON document, --explain, and the
// shipped profiles, which must pass with no errors and no warnings.
#include <nlohmann/json.hpp>

#include "tests/core_test_support.h"
#include "tests/test_support.h"

using namespace switchyard::testing;
using nlohmann::json;

namespace {

json parse_document(const std::string& text) {
  const json doc = json::parse(text, nullptr, false);
  REQUIRE_MESSAGE(!doc.is_discarded(), "stdout is not one JSON document:\n" << text);
  return doc;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / ("switchyard-test-" + name)).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("check command: shipped profiles are clean against their architectures") {
  const std::pair<const char*, const char*> shipped[] = {
      {"DeepSeek-V3-Chat.yaml", "deepseek-v3"},
      {"DeepSeek-V3-Chat-cpu.yaml", "deepseek-v3"},
      {"DeepSeek-V3-Chat-multi-gpu-4.yaml", "deepseek-v3"},
      {"DeepSeek-V3-Chat-multi-gpu-6.yaml", "deepseek-v3"},
      {"DeepSeek-V3-Chat-multi-gpu-8.yaml", "deepseek-v3"},
      {"DeepSeek-V2-Lite-Chat.yaml", "deepseek-v2-lite"},
      {"DeepSeek-V2-Lite-Chat-cpu.yaml", "deepseek-v2-lite"},
      {"DeepSeek-V2-Lite-Chat-gpu.yaml", "deepseek-v2-lite"},
      {"Qwen3-MoE-cpu.yaml", "qwen3-30b-a3b"},
      {"Mixtral-cpu.yaml", "mixtral-8x7b"},
      {"Qwen3-MoE.yaml", "qwen3-30b-a3b"},
      {"Mixtral.yaml", "mixtral-8x7b"},
      {"GLM-4.5-Air.yaml", "glm-4.5-air"},
      {"GLM-4.5-Air-cpu.yaml", "glm-4.5-air"},
  };
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_path("optimize_rules")))
    if (entry.path().extension() == ".yaml") ++files;
  CHECK_MESSAGE(files == std::size(shipped), "every shipped profile needs an entry in this test");
  for (const auto& entry : shipped) {
    const auto& file = entry.first;
    const auto& arch = entry.second;
    switchyard::CheckOptions options;
    options.model.arch = arch;
    options.profile = source_path(std::string("optimize_rules/") + file);
    const auto result = switchyard::run_check(options);
    INFO(file);
    for (const auto& d : result.diagnostics.items()) INFO(switchyard::format_diagnostic(d));
    CHECK(result.diagnostics.items().empty());
    // Routed experts stay on the CPU in decode in every shipped profile but the all-GPU one.
    const int experts =
        result.tree->find("model.layers.5." + result.tree->config().family->feed_forward_child + ".experts");
    REQUIRE(experts >= 0);
    const bool all_gpu = std::string(file).find("-gpu.yaml") != std::string::npos;
    CHECK(result.plan.owner_of(experts).generate_device.is_cpu() != all_gpu);
  }
}

TEST_CASE("check command: JSON output has the documented shape") {
  const auto run = run_switchyard("check --arch tiny-deepseek-v3 --optimize_config_path " +
                                  source_path("tests/fixtures/tiny-deepseek-v3-2gpu.yaml") + " --format json --gpu_memory 1GiB");
  CHECK(run.exit_code == 0);
  const json doc = parse_document(run.output);
  for (const char* key : {"model", "modules", "rules", "transfer_map", "devices", "diagnostics"}) CHECK(doc.contains(key));
  REQUIRE(doc["modules"].is_array());
  REQUIRE(doc["modules"].size() > 10);
  for (const json& m : doc["modules"])
    for (const char* key : {"name", "class", "op", "generate_device", "prefill_device", "generate_op", "prefill_op",
                            "implementation", "rule_number", "line"})
      CHECK_MESSAGE(m.contains(key), m.dump());
  // Rules are listed once each, in file order, numbered from 1 as messages number them, with their
  // kwargs as written; modules name theirs by that number.
  REQUIRE(doc["rules"].is_array());
  for (std::size_t r = 0; r < doc["rules"].size(); ++r) {
    CHECK(doc["rules"][r]["rule_number"] == r + 1);
    CHECK(doc["rules"][r]["kwargs"].is_object());
  }
  // Walk order starts at the root; unmatched modules have rule_number and line null.
  CHECK(doc["modules"][0]["name"] == "");
  CHECK(doc["modules"][0]["rule_number"].is_null());
  CHECK(doc["modules"][0]["line"].is_null());
  // Children of a recursive: false match are not listed.
  bool experts_listed = false, expert_child_listed = false;
  for (const json& m : doc["modules"]) {
    if (m["name"] == "model.layers.1.mlp.experts") {
      experts_listed = true;
      CHECK(m["rule_number"].is_number_integer());
      CHECK(m["line"].is_number_integer());
      CHECK(m["generate_device"] == "cpu");
      const json& rule = doc["rules"][m["rule_number"].get<std::size_t>() - 1];
      CHECK(rule["line"] == m["line"]);
      CHECK(rule["kwargs"]["out_device"] == "cuda:0");
    }
    if (std::string(m["name"]).rfind("model.layers.1.mlp.experts.", 0) == 0) expert_child_listed = true;
  }
  CHECK(experts_listed);
  CHECK_FALSE(expert_child_listed);
  CHECK(doc["transfer_map"]["2"] == "cuda:1");
  REQUIRE(doc["devices"].size() == 3);
  CHECK(doc["devices"][0]["device"] == "cuda:0");
  CHECK(doc["devices"][0]["budget_bytes"] == 1ULL << 30);
  CHECK(doc["devices"][0]["total_bytes"] ==
        doc["devices"][0]["weight_bytes"].get<std::uint64_t>() + doc["devices"][0]["kv_cache_bytes"].get<std::uint64_t>() +
            doc["devices"][0]["prefill_buffer_bytes"].get<std::uint64_t>() +
            doc["devices"][0]["dequantize_buffer_bytes"].get<std::uint64_t>());
  CHECK(doc["devices"][2]["device"] == "cpu");
  CHECK(doc["devices"][2]["budget_bytes"].is_null());
  CHECK(doc["diagnostics"].empty());
}

TEST_CASE("check command: JSON is one document also when the profile is broken") {
  const std::string profile = write_temp("broken.yaml", "- match: {name: '(unclosed'}\n  replace: {class: default}\n");
  const auto run = run_switchyard("check --arch tiny-deepseek-v3 --optimize_config_path " + profile + " --format json");
  CHECK(run.exit_code == 1);
  const json doc = parse_document(run.output);
  REQUIRE(doc["diagnostics"].size() >= 1);
  const json& d = doc["diagnostics"][0];
  CHECK(d["severity"] == "error");
  CHECK(d["code"] == "regex-compile");
  CHECK(d["line"] == 1);
  CHECK(d["column"].is_number_integer());
  CHECK(d["rule_number"] == 1);
  CHECK(d["file"] == profile);
}

TEST_CASE("check command: exit statuses") {
  const std::string good = source_path("optimize_rules/DeepSeek-V2-Lite-Chat.yaml");
  CHECK(run_switchyard("check --arch deepseek-v2-lite --optimize_config_path " + good).exit_code == 0);
  // The alias spelling of the flag.
  CHECK(run_switchyard("check --arch deepseek-v2-lite --optimize_rule_path " + good).exit_code == 0);
  // A profile error is 1.
  CHECK(run_switchyard("check --arch deepseek-v2-lite --optimize_config_path " + good + " --gpu_memory 1GiB").exit_code == 1);
  // Usage and I/O problems are 2, also in JSON mode, which still prints one document.
  CHECK(run_switchyard("check --arch deepseek-v2-lite").exit_code == 2);
  CHECK(run_switchyard("check --arch no-such-model --optimize_config_path " + good).exit_code == 2);
  CHECK(run_switchyard("check --arch deepseek-v2-lite --optimize_config_path /nonexistent.yaml").exit_code == 2);
  CHECK(run_switchyard("check --arch deepseek-v2-lite --optimize_config_path " + good + " --gpu_memory lots").exit_code == 2);
  CHECK(run_switchyard("check --model_path /nonexistent --optimize_config_path " + good).exit_code == 2);
  const auto json_run = run_switchyard("check --arch deepseek-v2-lite --optimize_config_path /nonexistent.yaml --format json");
  CHECK(json_run.exit_code == 2);
  CHECK(parse_document(json_run.output)["diagnostics"][0]["code"] == "input");
  CHECK(run_switchyard("frobnicate").exit_code == 2);
}

TEST_CASE("check command: the device table names a GPU's one-phase copy of routed experts") {
  // DeepSeek-V2-Lite's hybrid profile prefills its experts on cuda:0 and decodes them on the CPU;
  // the CPU-only profile holds nothing twice.
  const auto hybrid = run_switchyard("check --arch deepseek-v2-lite --optimize_config_path " +
                                     source_path("optimize_rules/DeepSeek-V2-Lite-Chat.yaml"));
  CHECK(hybrid.exit_code == 0);
  CHECK(hybrid.output.find("cuda:0 holds ") != std::string::npos);
  CHECK(hybrid.output.find("of routed experts for one phase only") != std::string::npos);
  const auto json = parse_document(run_switchyard("check --arch deepseek-v2-lite --format json --optimize_config_path " +
                                                  source_path("optimize_rules/DeepSeek-V2-Lite-Chat.yaml"))
                                       .output);
  CHECK(json["devices"][0]["device"] == "cuda:0");
  CHECK(json["devices"][0]["one_phase_weight_bytes"].get<std::uint64_t>() > 0);
  const auto cpu_only = run_switchyard("check --arch deepseek-v2-lite --optimize_config_path " +
                                       source_path("optimize_rules/DeepSeek-V2-Lite-Chat-cpu.yaml"));
  CHECK(cpu_only.exit_code == 0);
  CHECK(cpu_only.output.find("for one phase only") == std::string::npos);
}

TEST_CASE("check command: the CPU's total counts the routed experts' prefill buffers, by chunk") {
  // DeepSeek-V3 with its experts prefilled on the CPU: a chunk's rows (tokens x top-8) of inputs and
  // outputs (hidden 7168) and of gate and up activations (2048), f32. V2-Lite's hybrid profile
  // prefills its experts on cuda:0: no buffers.
  auto estimate = [](const char* profile, const char* arch, std::int64_t chunk) {
    switchyard::CheckOptions options;
    options.model.arch = arch;
    options.profile = source_path(std::string("optimize_rules/") + profile);
    options.budget.prefill_chunk = chunk;
    const auto result = switchyard::run_check(options);
    REQUIRE(result.memory.back().device.is_cpu());
    return result.memory.back();
  };
  for (const std::int64_t chunk : {512, 37}) {
    INFO("chunk " << chunk);
    const switchyard::DeviceMemory cpu = estimate("DeepSeek-V3-Chat.yaml", "deepseek-v3", chunk);
    CHECK(cpu.prefill_buffer_bytes == static_cast<std::uint64_t>(chunk) * 8 * (2 * 7168 + 2 * 2048) * 4);
    CHECK(cpu.total_bytes() == cpu.weight_bytes + cpu.kv_cache_bytes + cpu.prefill_buffer_bytes);
    CHECK(cpu.dequantize_buffer_bytes == 0);
  }
  CHECK(estimate("DeepSeek-V2-Lite-Chat.yaml", "deepseek-v2-lite", 512).prefill_buffer_bytes == 0);
  const auto table = run_switchyard("check --arch deepseek-v3 --optimize_config_path " +
                                    source_path("optimize_rules/DeepSeek-V3-Chat.yaml"));
  CHECK(table.output.find("cpu's total includes 288.0 MiB of buffers for the routed experts' prefill") !=
        std::string::npos);
  const auto over = run_switchyard("check --arch deepseek-v3 --cpu_memory 1TiB --optimize_config_path " +
                                   source_path("optimize_rules/DeepSeek-V3-Chat.yaml"));
  CHECK(over.exit_code == 1);
  CHECK(over.output.find("the experts' prefill buffers 288.0 MiB) but its budget is 1.0 TiB") != std::string::npos);
}

TEST_CASE("check command: --explain shows each rule tried") {
  const auto run = run_switchyard("check --arch deepseek-v3 --optimize_config_path " +
                                  source_path("optimize_rules/DeepSeek-V3-Chat.yaml") +
                                  " --explain model.layers.20.mlp.experts");
  CHECK(run.exit_code == 0);
  // Rules count from 1: the first is rule #1 (line 7), the Linear rule is rule #2.
  CHECK(run.output.find("rule #1 (line 7)") != std::string::npos);
  CHECK(run.output.find("rule #0") == std::string::npos);
  CHECK(run.output.find("rule #2 (line 17) class torch.nn.Linear") != std::string::npos);
  CHECK(run.output.find("ModuleList is not a Linear") != std::string::npos);  // class test of rule #2
  CHECK(run.output.find("MATCH -> Experts") != std::string::npos);
  CHECK(run.output.find("not tried") != std::string::npos);
  CHECK(run.output.find("recursive: false") != std::string::npos);
  const auto attention = run_switchyard("check --arch deepseek-v3 --optimize_config_path " +
                                        source_path("optimize_rules/DeepSeek-V3-Chat.yaml") +
                                        " --explain model.layers.20.self_attn");
  CHECK(attention.output.find("rule #5 (line 46) name '^model\\.layers\\..*\\.mlp\\.experts$': no: the name regex does not match") !=
        std::string::npos);
  CHECK(attention.output.find("MATCH -> MLA") != std::string::npos);
  const auto below = run_switchyard("check --arch deepseek-v3 --optimize_config_path " +
                                    source_path("optimize_rules/DeepSeek-V3-Chat.yaml") +
                                    " --explain model.layers.20.mlp.experts.3.up_proj");
  CHECK(below.output.find("not visited") != std::string::npos);
  const auto typo = run_switchyard("check --arch deepseek-v3 --optimize_config_path " +
                                   source_path("optimize_rules/DeepSeek-V3-Chat.yaml") + " --explain model.layers.20.mlp.expert");
  CHECK(typo.exit_code == 2);
  CHECK(typo.output.find("closest: model.layers.20.mlp.experts") != std::string::npos);
}

TEST_CASE("check command: checkpoints saved by transformers match the module trees") {
  // tests/fixtures/fidelity holds tiny models saved by transformers' save_pretrained
  // (tests/fidelity/make_fixtures.py): their tensor names and shapes must be exactly our trees'.
  for (const char* name : {"deepseek_v3", "deepseek_v2", "qwen3_moe", "mixtral", "glm4_moe", "glm4_moe_qk_norm"}) {
    INFO(name);
    switchyard::Diagnostics diagnostics;
    switchyard::ModelSpec spec;
    spec.model_path = source_path(std::string("tests/fixtures/fidelity/") + name);
    const switchyard::ModuleTree tree = switchyard::describe_model(spec, diagnostics);
    for (const auto& d : diagnostics.items()) INFO(switchyard::format_diagnostic(d));
    CHECK(diagnostics.items().empty());
    std::size_t tensors = 0;
    for (const auto& m : tree.modules())
      for (const auto& p : m.params) {
        CHECK(p.dtype == switchyard::DType::f32);
        ++tensors;
      }
    CHECK(tensors > 40);
  }
}

TEST_CASE("check command: a rule's kwargs appear once in the JSON document, not once per module") {
  // 20,000 list items in the kwargs of a rule that places every module: written per module, the
  // document grew to 70 MB on the 271-module tiny model (and gigabytes on DeepSeek-V3).
  std::string items;
  for (int i = 0; i < 20000; ++i) items += (i ? ", " : "") + std::to_string(i % 10);
  const std::string profile = write_temp("big-kwargs.yaml", "- match:\n    name: \".\"\n  replace:\n    class: default\n"
                                                            "    kwargs: {generate_device: cpu, notes: [" + items + "]}\n");
  const auto run = run_switchyard("check --arch tiny-deepseek-v3 --optimize_config_path " + profile + " --format json");
  const json doc = parse_document(run.output);
  CHECK(doc["modules"].size() > 100);
  REQUIRE(doc["rules"].size() == 1);
  CHECK(doc["rules"][0]["kwargs"]["notes"].size() == 20000);
  CHECK(run.output.size() < 2'000'000);
}

TEST_CASE("check command: --kv_cache_dtype sets the KV cache's element type, and the checkpoint's dtype is the default") {
  const std::string profile = source_path("optimize_rules/DeepSeek-V2-Lite-Chat.yaml");
  const std::string base = "check --arch deepseek-v2-lite --optimize_config_path " + profile + " --format json";
  const auto kv_bytes = [](const json& doc) {
    std::uint64_t total = 0;
    for (const json& d : doc["devices"]) total += d["kv_cache_bytes"].get<std::uint64_t>();
    return total;
  };
  const json by_default = parse_document(run_switchyard(base).output);  // the preset's torch_dtype: bfloat16
  const json f32 = parse_document(run_switchyard(base + " --kv_cache_dtype f32").output);
  const json bf16 = parse_document(run_switchyard(base + " --kv_cache_dtype bf16").output);
  CHECK(by_default["kv_cache_dtype"] == "bf16");
  CHECK(f32["kv_cache_dtype"] == "f32");
  CHECK(bf16["kv_cache_dtype"] == "bf16");
  // DeepSeek-V2-Lite: 27 layers of 512 + 64 elements a position, 4096 positions.
  CHECK(kv_bytes(bf16) == 27ULL * 576 * 4096 * 2);
  CHECK(kv_bytes(f32) == 2 * kv_bytes(bf16));
  CHECK(kv_bytes(by_default) == kv_bytes(bf16));
  const auto table = run_switchyard("check --arch deepseek-v2-lite --optimize_config_path " + profile +
                                    " --kv_cache_dtype f32 --max_context 1000");
  CHECK(table.exit_code == 0);
  CHECK(table.output.find("KV CACHE (1000 tok, f32)") != std::string::npos);
  // Type names are taken in either case, as llama.cpp's users write them.
  CHECK(run_switchyard("check --arch deepseek-v2-lite --optimize_config_path " + profile + " --kv_cache_dtype BF16").exit_code == 0);
  for (const char* bad : {"f16", "fp32", "''"}) {
    INFO("--kv_cache_dtype " << bad);
    const auto refused = run_switchyard_with_env("", base + " --kv_cache_dtype " + bad, /*with_stderr=*/true);
    CHECK(refused.exit_code == 2);
    CHECK(refused.output.find("is not a KV cache dtype (f32, bf16)") != std::string::npos);
  }
}

TEST_CASE("check names the stored types of a checkpoint's tensors, not the --weight_dtype default") {
  const switchyard::core_testing::TempDir dir;
  // Q4_K_M as llama.cpp's users spell it: make-model, check and bench take type names in either case.
  REQUIRE(run_switchyard("make-model --preset tiny-deepseek-v3 --format GGUF --quant Q4_K_M --out " + (dir / "q4").string()).exit_code == 0);
  REQUIRE(run_switchyard("make-model --preset tiny-deepseek-v3 --dtype f32 --out " + (dir / "f32").string()).exit_code == 0);
  const CommandResult gguf = run_switchyard("check --gguf_path " + (dir / "q4" / "model.gguf").string() + " --cpu-moe");
  INFO(gguf.output);
  CHECK(gguf.exit_code == 0);
  // make-model's q4_k_m on tiny shapes: q5_0 where a row is too short for q4_k's blocks, q8_0, f32.
  CHECK(gguf.output.find("weights q5_0 x") != std::string::npos);
  CHECK(gguf.output.find("f32 x") != std::string::npos);
  CHECK(gguf.output.find("weights bf16") == std::string::npos);
  CHECK(gguf.output.find("K parameters") != std::string::npos);  // not "0.0B"
  const CommandResult f32 = run_switchyard("check --model_path " + (dir / "f32").string() + " --cpu-moe");
  INFO(f32.output);
  CHECK(f32.output.find("parameters, weights f32)") != std::string::npos);
  for (const char* spelled : {"q4_k_m", "Q4_K_M"}) {
    INFO(spelled);
    const CommandResult preset =
        run_switchyard(std::string("check --arch deepseek-v3 --cpu-moe --weight_dtype ") + spelled + " --gpu_memory 1000GiB");
    CHECK(preset.output.find("671.") != std::string::npos);
    CHECK(preset.output.find("B parameters, weights q4_k_m)") != std::string::npos);
  }
  CHECK(run_switchyard("make-model --preset tiny-deepseek-v3 --dtype BF16 --out " + (dir / "bf16").string()).exit_code == 0);
}
