// llama.cpp's placement flags (placement/quick_rules.h): -ot, --cpu-moe and --n-cpu-moe compiled
// into rules before the profile's, on every family, against the YAML rules that say the same.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "placement/check.h"
#include "placement/report.h"
#include "tests/placement/plan_comparison.h"
#include "tests/test_support.h"

namespace sy = switchyard;
using sy::testing::expect_same_plan;
using sy::testing::Family;
using sy::testing::kFamilies;

namespace {

sy::CheckResult check_with(const std::string& arch, const sy::QuickRuleFlags& quick, const std::string& profile = "") {
  sy::CheckOptions options;
  options.model.arch = arch;
  options.quick_rules = quick;
  if (!profile.empty()) {
    options.profile = "profile.yaml";
    options.profile_text = profile;
  }
  return sy::run_check(options);
}

// The YAML rule that puts `layers` routed experts (a regex alternative, "\\d+" for all) on the CPU.
std::string experts_on_cpu(const std::string& experts_path, const std::string& layers) {
  return "- match:\n    name: \"^model\\\\.layers\\\\.(?:" + layers + ")\\\\." + experts_path +
         "$\"\n  replace:\n    class: ktransformers.operators.experts.KTransformersExperts\n    kwargs:\n"
         "      generate_device: \"cpu\"\n      generate_op: \"KExpertsCPU\"\n      prefill_device: \"cpu\"\n"
         "      prefill_op: \"KExpertsCPU\"\n  recursive: False\n";
}



std::vector<int> moe_layers(const sy::ModuleTree& tree) {
  std::vector<int> layers;
  for (int i = 0; i < static_cast<int>(tree.size()); ++i)
    if (tree.is_routed_experts(i)) layers.push_back(tree.at(i).layer);
  return layers;
}

}  // namespace

TEST_CASE("quick rules: --cpu-moe, --n-cpu-moe and -ot on GGUF and module names equal the YAML rules, every family") {
  for (const Family& f : kFamilies) {
    INFO("arch " << f.arch);
    const sy::CheckResult base = check_with(f.arch, {});
    REQUIRE(!base.diagnostics.has_errors());
    const std::vector<int> layers = moe_layers(*base.tree);
    REQUIRE(layers.size() >= 2);
    std::string all, first_two = std::to_string(layers[0]) + "|" + std::to_string(layers[1]);
    for (int l : layers) all += (all.empty() ? "" : "|") + std::to_string(l);

    sy::QuickRuleFlags cpu_moe;
    cpu_moe.cpu_moe = true;
    const sy::CheckResult quick = check_with(f.arch, cpu_moe);
    CHECK(!quick.diagnostics.has_errors());
    REQUIRE(quick.rules->rules.size() == 1);
    CHECK(quick.rules->rules[0].origin == "--cpu-moe");
    CHECK(quick.rules->rules[0].label() == "rule #1 (command line: --cpu-moe)");
    // The YAML rule in a profile (the same devices and defaults: one GPU, cuda:0).
    sy::CheckOptions yaml_options;
    yaml_options.model.arch = f.arch;
    yaml_options.gpus = 1;
    yaml_options.profile = "profile.yaml";
    yaml_options.profile_text = experts_on_cpu(f.experts_path, all);
    const sy::CheckResult yaml = sy::run_check(yaml_options);
    CHECK(!yaml.diagnostics.has_errors());
    expect_same_plan(quick, yaml);
    for (const sy::ModulePlacement& p : quick.plan.visited)
      if (quick.tree->is_routed_experts(p.module)) {
        CHECK(p.generate_device == sy::Device::cpu());
        CHECK(p.prefill_device == sy::Device::cpu());
        CHECK(p.out_device == sy::Device::cuda(0));  // the layer's device
      }

    // The first two MoE layers: --n-cpu-moe 2, llama.cpp's GGUF names, and our module names.
    yaml_options.profile_text = experts_on_cpu(f.experts_path, first_two);
    const sy::CheckResult yaml_two = sy::run_check(yaml_options);
    sy::QuickRuleFlags n_cpu_moe;
    n_cpu_moe.n_cpu_moe = 2;
    expect_same_plan(check_with(f.arch, n_cpu_moe), yaml_two);
    sy::QuickRuleFlags gguf_names;
    gguf_names.override_tensor = {"blk\\.(" + first_two + ")\\.ffn_(up|gate|down)_exps=CPU"};
    const sy::CheckResult by_gguf = check_with(f.arch, gguf_names);
    CHECK(by_gguf.rules->rules.size() == 1);
    expect_same_plan(by_gguf, yaml_two);
    sy::QuickRuleFlags module_names;
    module_names.override_tensor = {"layers\\.(" + first_two + ")\\..*experts\\.0\\.=cpu"};
    expect_same_plan(check_with(f.arch, module_names), yaml_two);
  }
}

TEST_CASE("quick rules: -ot moves other weights by their GGUF names, pairs and flags in order, first match wins") {
  sy::QuickRuleFlags flags;
  // The embedding to the CPU and every expert to cuda:0, then --cpu-moe, which the earlier pair
  // overrides everywhere: check calls it dead.
  flags.override_tensor = {"token_embd=CPU,exps=CUDA0"};
  flags.cpu_moe = true;
  const sy::CheckResult r = check_with("tiny-deepseek-v3", flags);
  CHECK(!r.diagnostics.has_errors());
  REQUIRE(r.rules->rules.size() == 3);
  CHECK(r.rules->rules[0].origin == "-ot #1");
  CHECK(r.rules->rules[1].origin == "-ot #2");
  CHECK(r.rules->rules[2].origin == "--cpu-moe");
  CHECK(sy::testing::placement(r, "model.embed_tokens").generate_device == sy::Device::cpu());
  CHECK(sy::testing::placement(r, "model.layers.2.self_attn.o_proj").generate_device == sy::Device::cuda(0));
  for (const sy::ModulePlacement& p : r.plan.visited)
    if (r.tree->is_routed_experts(p.module)) {
      CHECK(p.rule == 1);
      CHECK(p.generate_device == sy::Device::cuda(0));
      CHECK(p.generate_op == "KExpertsMarlin");  // a GGUF's blocks stay blocks on the GPU
    }
  CHECK(r.plan.rule_wins[2] == 0);
  const sy::Diagnostic dead = sy::testing::only(r, "dead-rule");
  CHECK(dead.message.find("rule #3 (command line: --cpu-moe) never applies") != std::string::npos);

  // A weight the engine cannot run away from its layer is the validator's error, as for a profile.
  sy::QuickRuleFlags o_proj;
  o_proj.override_tensor = {"blk\\.1\\.attn_output=CPU"};
  const sy::CheckResult bad = check_with("tiny-deepseek-v3", o_proj);
  const auto mismatches = sy::testing::with_code(bad, "layer-device-mismatch");
  REQUIRE(!mismatches.empty());
  CHECK(mismatches.front().location.file == "command line");
  CHECK(mismatches.front().message.find("rule #1 (command line: -ot #1)") != std::string::npos);
  CHECK(mismatches.front().message.find("model.layers.1.self_attn.o_proj") != std::string::npos);
}

TEST_CASE("quick rules: before a profile they win, and check says which profile rule they override, and where") {
  std::ifstream file(sy::testing::source_path("optimize_rules/DeepSeek-V2-Lite-Chat-gpu.yaml"));
  const std::string profile((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  REQUIRE(!profile.empty());
  // As written, and with 100 narrow rules after it that match nothing: a profile that large is
  // searched through its rule index, which must find the same overridden rule.
  std::string large = profile;
  for (int i = 0; i < 100; ++i)
    large += "\n- match:\n    name: \"^model\\\\.layers\\\\.1\\\\.no_such_module_" + std::to_string(i) +
             "$\"\n  replace:\n    class: \"default\"\n    kwargs:\n      generate_device: \"cpu\"\n";
  for (const std::string& text : {profile, large}) {
    sy::QuickRuleFlags flags;
    flags.n_cpu_moe = 3;
    const sy::CheckResult r = check_with("deepseek-v2-lite", flags, text);
    INFO("profile rules: " << r.rules->rules.size() - 1);
    CHECK(!r.diagnostics.has_errors());
    CHECK(r.rules->rules.front().origin == "--n-cpu-moe 3");
    CHECK(r.rules->rules[1].number() == 2);  // the profile's first rule follows the quick one
    int warnings = 0;
    for (const sy::Diagnostic& d : r.diagnostics.items())
      if (d.code == "quick-rule-overrides-profile") {
        ++warnings;
        CHECK(d.location.file == "profile.yaml");
        CHECK(d.location.line > 0);
        CHECK(d.message.find("rule #1 (command line: --n-cpu-moe 3)") != std::string::npos);
        CHECK(d.message.find("model.layers.1.mlp.experts and 2 more modules") != std::string::npos);
      }
    CHECK(warnings == 1);
    CHECK(sy::testing::placement(r, "model.layers.3.mlp.experts").generate_device == sy::Device::cpu());
    CHECK(sy::testing::placement(r, "model.layers.4.mlp.experts").generate_device == sy::Device::cuda(0));
    const std::string table = sy::format_check_table(r, {});
    CHECK(table.find("after 1 quick rule from the command line (--n-cpu-moe 3)") != std::string::npos);
    CHECK(table.find("#1 --n-cpu-moe 3") != std::string::npos);
  }
}

TEST_CASE("quick rules: bad values name the flag; a pattern that selects nothing is a warning") {
  auto error_of = [](const sy::QuickRuleFlags& flags) -> std::string {
    try {
      check_with("tiny-deepseek-v3", flags);
    } catch (const sy::InputError& e) {
      return e.what();
    }
    return "no error";
  };
  sy::QuickRuleFlags f;
  f.override_tensor = {"exps"};
  CHECK(error_of(f).find("-ot 'exps': expected REGEX=DEVICE") != std::string::npos);
  f.override_tensor = {"exps=GPU"};
  CHECK(error_of(f).find("'GPU' is not a device") != std::string::npos);
  f.override_tensor = {"blk\\.(1=CPU"};
  CHECK(error_of(f).find("the regex does not compile") != std::string::npos);
  f.override_tensor.clear();
  f.n_cpu_moe = 4;  // tiny-deepseek-v3: layers 1-3 are MoE
  CHECK(error_of(f).find("--n-cpu-moe 4: this model has 3 MoE layers") != std::string::npos);

  sy::QuickRuleFlags nothing;
  nothing.override_tensor = {"no_such_tensor=CPU"};
  const sy::CheckResult r = check_with("tiny-deepseek-v3", nothing);
  CHECK(r.rules->rules.empty());
  bool warned = false;
  for (const sy::Diagnostic& d : r.diagnostics.items()) warned = warned || d.code == "quick-rule-matches-nothing";
  CHECK(warned);
}

TEST_CASE("quick rules: the command line takes llama.cpp's spelling, -ot included, with or without a profile") {
  const auto r = sy::testing::run_switchyard("check --arch tiny-deepseek-v3 -ot 'blk\\.(2|3)\\.ffn_.*_exps=CPU' --cpu-moe");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("profile: none; 2 quick rules from the command line (-ot #1, --cpu-moe), 1 GPU") != std::string::npos);
  CHECK(r.output.find("#1 -ot #1") != std::string::npos);
  const auto bad = sy::testing::run_switchyard_with_env("", "check --arch tiny-deepseek-v3 -ot 'exps=GPU7'", true);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("-ot 'exps=GPU7'") != std::string::npos);
  const auto none = sy::testing::run_switchyard_with_env("", "check --arch tiny-deepseek-v3", true);
  CHECK(none.exit_code == 2);
  CHECK(none.output.find("give a profile (--optimize_config_path FILE) or llama.cpp's placement flags") != std::string::npos);
}

TEST_CASE("quick rules: built as typed rules, and their profile text (split's) reads back to the same rules") {
  // Every kind of quick rule at once: -ot pairs to both devices, --n-cpu-moe, a fit's moves both
  // ways and the layer flags over two GPUs (which add the decoder stack's transfer_map).
  for (const Family& f : kFamilies) {
    INFO("arch " << f.arch);
    const sy::CheckResult base = check_with(f.arch, {});
    const std::vector<int> layers = moe_layers(*base.tree);
    REQUIRE(layers.size() >= 2);
    sy::QuickRuleFlags flags;
    flags.override_tensor = {"blk\\." + std::to_string(layers[0]) + "\\.ffn_.*_exps=CPU,token_embd=CUDA1"};
    flags.n_cpu_moe = 1;
    // A layer is in one of the fit's lists only (the CPU's rule comes first and would win).
    if (layers.size() > 2) flags.fit_cpu_layers = {layers[1]};
    flags.fit_gpu_layers = {{layers.back(), sy::Device::cuda(1)}};
    flags.layers.n_gpu_layers = 99;
    sy::CheckOptions options;
    options.model.arch = f.arch;
    options.quick_rules = flags;
    options.gpus = 2;
    const sy::CheckResult r = sy::run_check(options);
    for (const sy::Diagnostic& d : r.diagnostics.items()) INFO(sy::format_diagnostic(d));
    REQUIRE_FALSE(r.diagnostics.has_errors());
    const std::vector<sy::Rule>& typed = r.rules->rules;
    REQUIRE(typed.size() >= 6);
    sy::Diagnostics parsed_diagnostics;
    const sy::RuleSet parsed = sy::parse_rules(r.quick_rules_yaml, "split.yaml", parsed_diagnostics);
    for (const sy::Diagnostic& d : parsed_diagnostics.items()) INFO(sy::format_diagnostic(d));
    CHECK_FALSE(parsed_diagnostics.has_errors());
    REQUIRE(parsed.rules.size() == typed.size());
    bool transfer_map_seen = false;
    for (std::size_t i = 0; i < typed.size(); ++i) {
      const sy::Rule& a = typed[i];
      const sy::Rule& b = parsed.rules[i];
      INFO("rule " << i << " (" << a.origin << ")");
      CHECK_FALSE(a.origin.empty());
      CHECK(a.index == static_cast<int>(i));
      CHECK(a.name_pattern == b.name_pattern);
      CHECK(a.replace_text == b.replace_text);
      CHECK(a.replacement == b.replacement);
      CHECK(a.kwargs == b.kwargs);
      CHECK(a.generate_device == b.generate_device);
      CHECK(a.prefill_device == b.prefill_device);
      CHECK(a.generate_op == b.generate_op);
      CHECK(a.prefill_op == b.prefill_op);
      CHECK(a.recursive == b.recursive);
      CHECK(a.has_transfer_map == b.has_transfer_map);
      REQUIRE(a.transfer_map.size() == b.transfer_map.size());
      for (std::size_t t = 0; t < a.transfer_map.size(); ++t) {
        CHECK(a.transfer_map[t].layer == b.transfer_map[t].layer);
        CHECK(a.transfer_map[t].device == b.transfer_map[t].device);
      }
      transfer_map_seen |= a.has_transfer_map;
    }
    CHECK(transfer_map_seen);
    // The fit's rule to cuda:1 took the last MoE layer's experts there.
    int found = 0;
    for (const sy::ModulePlacement& p : r.plan.visited)
      if (r.tree->is_routed_experts(p.module) && r.tree->at(p.module).layer == layers.back()) {
        ++found;
        CHECK(p.generate_device == sy::Device::cuda(1));
      }
    CHECK(found == 1);
  }
}
