// llama.cpp's layer flags (placement/gpu_layers.h): -ngl, -ts and --main-gpu divide the decoder
// layers as llama.cpp does, compile into rules equal to the YAML that says the same on every
// family, and --fit fills each of several GPUs by its own budget.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "placement/check.h"
#include "placement/gpu_layers.h"
#include "tests/core_test_support.h"
#include "tests/placement/plan_comparison.h"
#include "tests/test_support.h"

namespace sy = switchyard;
using sy::testing::expect_same_plan;
using sy::testing::Family;
using sy::testing::kFamilies;

namespace {

// "cpu x21, cuda:0 x40": the devices of consecutive layers, run-length coded.
std::string runs(const std::vector<sy::Device>& devices) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < devices.size();) {
    std::size_t j = i;
    while (j < devices.size() && devices[j] == devices[i]) ++j;
    parts.push_back(devices[i].str() + " x" + std::to_string(j - i));
    i = j;
  }
  return sy::join(parts, ", ");
}

sy::GpuLayerFlags layer_flags(std::optional<int> ngl, std::vector<double> ts = {}, std::optional<int> main_gpu = {}) {
  sy::GpuLayerFlags f;
  f.n_gpu_layers = ngl;
  f.tensor_split = std::move(ts);
  f.main_gpu = main_gpu;
  return f;
}

sy::CheckResult check_with(const std::string& arch, const sy::QuickRuleFlags& quick, std::optional<int> gpus = {}) {
  sy::CheckOptions options;
  options.model.arch = arch;
  options.quick_rules = quick;
  options.gpus = gpus;
  return sy::run_check(options);
}

std::string experts_rule(const std::string& experts_path, const std::string& layers, const std::string& device) {
  const std::string op = device == "cpu" ? "KExpertsCPU" : "KExpertsMarlin";
  return "- match:\n    name: \"^model\\\\.layers\\\\.(" + layers + ")\\\\." + experts_path +
         "$\"\n  replace:\n    class: ktransformers.operators.experts.KTransformersExperts\n    kwargs:\n"
         "      generate_device: \"" + device + "\"\n      generate_op: \"" + op + "\"\n      prefill_device: \"" + device +
         "\"\n      prefill_op: \"" + op + "\"\n  recursive: False\n";
}

std::string default_rule(const std::string& regex, const std::string& device) {
  return "- match:\n    name: \"" + regex + "\"\n  replace:\n    class: \"default\"\n    kwargs:\n      generate_device: \"" +
         device + "\"\n      prefill_device: \"" + device + "\"\n";
}


std::uint64_t total_on(const sy::CheckResult& r, sy::Device device) {
  for (const sy::DeviceMemory& d : r.memory)
    if (d.device == device) return d.total_bytes();
  return 0;
}

}  // namespace

TEST_CASE("gpu layers: -ngl, -ts and --main-gpu divide the layers as llama.cpp does") {
  const std::vector<std::uint64_t> none;
  // 61 layers (DeepSeek-V3). -ts 3,1 with every layer offloaded: llama.cpp counts 62 (the output
  // too), and layer l goes to GPU 0 while l / 62 < 0.75, so layers 0-46.
  CHECK(runs(sy::assign_layer_devices(61, 2, layer_flags({}, {3, 1}), none)) == "cuda:0 x47, cuda:1 x14");
  CHECK(runs(sy::assign_layer_devices(61, 2, layer_flags(99, {3, 1}), none)) == "cuda:0 x47, cuda:1 x14");
  // -ngl 40: the last 40 layers (21-60) on the GPU, the output not offloaded (40 counted).
  CHECK(runs(sy::assign_layer_devices(61, 1, layer_flags(40), none)) == "cpu x21, cuda:0 x40");
  CHECK(runs(sy::assign_layer_devices(61, 2, layer_flags(40, {1, 1}), none)) == "cpu x21, cuda:0 x20, cuda:1 x20");
  CHECK(runs(sy::assign_layer_devices(61, 1, layer_flags(0), none)) == "cpu x61");
  CHECK(runs(sy::assign_layer_devices(61, 1, layer_flags(61), none)) == "cuda:0 x61");
  CHECK(runs(sy::assign_layer_devices(61, 2, layer_flags({}, {0, 1}), none)) == "cuda:1 x61");
  // Several GPUs without -ts: by budget (80 and 40 GiB: 2:1 of 62, layers 0-41 on GPU 0), else equal.
  CHECK(runs(sy::assign_layer_devices(61, 2, layer_flags({}), {80ULL << 30, 40ULL << 30})) == "cuda:0 x42, cuda:1 x19");
  CHECK(runs(sy::assign_layer_devices(61, 2, layer_flags({}), none)) == "cuda:0 x31, cuda:1 x30");
  CHECK(runs(sy::assign_layer_devices(61, 2, layer_flags({}, {}, 1), none)) == "cuda:1 x61");
  // 4 layers and the output in thirds: positions 0, 0.2, 0.4, 0.6 of 5. llama.cpp gives GPU 2
  // only the output layer; here the output goes with the last layer, so GPU 2 holds nothing.
  CHECK(runs(sy::assign_layer_devices(4, 3, layer_flags({}, {1, 1, 1}), none)) == "cuda:0 x2, cuda:1 x2");
  CHECK(runs(sy::assign_layer_devices(4, 3, layer_flags(4, {1, 1, 1}), none)) == "cuda:0 x2, cuda:1 x1, cuda:2 x1");

  CHECK(sy::parse_tensor_split("3,1") == std::vector<double>{3, 1});
  CHECK(sy::parse_tensor_split("0.5/0.25/0.25") == std::vector<double>{0.5, 0.25, 0.25});
  for (const char* bad : {"", "3,", "a,1", "-1,2", "1,,2", "inf"}) {
    INFO(bad);
    CHECK_THROWS_WITH_AS(sy::parse_tensor_split(bad), doctest::Contains("--tensor-split"), sy::InputError);
  }
  CHECK_THROWS_WITH_AS(sy::assign_layer_devices(61, 2, layer_flags({}, {0, 0}), none), doctest::Contains("sum to 0"),
                       sy::InputError);
  CHECK_THROWS_WITH_AS(sy::assign_layer_devices(61, 1, layer_flags({}, {1, 1}), none), doctest::Contains("2 shares for 1 GPUs"),
                       sy::InputError);
  CHECK_THROWS_WITH_AS(sy::assign_layer_devices(61, 2, layer_flags({}, {}, 2), none), doctest::Contains("GPUs are 0 to 1"),
                       sy::InputError);
  CHECK_THROWS_WITH_AS(sy::assign_layer_devices(61, 2, layer_flags({}, {1, 1}, 0), none), doctest::Contains("give one of them"),
                       sy::InputError);
  CHECK_THROWS_WITH_AS(sy::assign_layer_devices(61, 1, layer_flags(-1), none), doctest::Contains("-ngl -1"), sy::InputError);
  CHECK(layer_flags(40, {3, 1}).text() == "-ngl 40 -ts 3,1");
  CHECK(layer_flags({}, {0.5, 0.25}, {}).text() == "-ts 0.5,0.25");
}

TEST_CASE("gpu layers: -ngl and -ts place whole layers, equal to the YAML that says the same, every family") {
  for (const Family& f : kFamilies) {
    INFO("arch " << f.arch);
    sy::QuickRuleFlags flags;
    flags.layers.n_gpu_layers = 2;  // the last two layers on the GPUs, the others on the CPU
    flags.layers.tensor_split = {1, 1};
    const sy::CheckResult quick = check_with(f.arch, flags);
    CHECK(!quick.diagnostics.has_errors());
    const int layers = quick.tree->num_layers();
    REQUIRE(layers >= 3);
    // -ngl 2 -ts 1,1: 2 layers counted, the next-to-last on cuda:0 and the last on cuda:1.
    for (int l = 0; l < layers; ++l)
      CHECK(quick.plan.layer_device(l) == (l < layers - 2 ? sy::Device::cpu() : sy::Device::cuda(l - (layers - 2))));
    for (const sy::ModulePlacement& p : quick.plan.visited) {
      const sy::Module& m = quick.tree->at(p.module);
      if (m.layer < 0) continue;
      INFO(std::string(m.name));
      CHECK(p.generate_device == quick.plan.layer_device(m.layer));
      CHECK(p.prefill_device == quick.plan.layer_device(m.layer));
    }
    CHECK(sy::testing::placement(quick, "model.embed_tokens").generate_device == sy::Device::cpu());
    CHECK(sy::testing::placement(quick, "lm_head").generate_device == sy::Device::cuda(1));
    CHECK(sy::testing::placement(quick, "model.norm").generate_device == sy::Device::cuda(1));
    CHECK(quick.plan.options.gpus == 2);
    CHECK(quick.rules->rules.front().origin == "-ngl 2 -ts 1,1");

    // The same in YAML, written by hand. The experts rules name only the layers that hold routed
    // experts (a preset's first layers may be dense).
    std::vector<bool> moe(static_cast<std::size_t>(layers), false);
    for (int i = 0; i < static_cast<int>(quick.tree->size()); ++i)
      if (quick.tree->is_routed_experts(i)) moe[static_cast<std::size_t>(quick.tree->at(i).layer)] = true;
    auto numbers = [&](int a, int b, bool experts_only) {
      std::vector<std::string> out;
      for (int l = a; l <= b; ++l)
        if (!experts_only || moe[static_cast<std::size_t>(l)]) out.push_back(std::to_string(l));
      return sy::join(out, "|");
    };
    const std::string gpu0 = std::to_string(layers - 2), gpu1 = std::to_string(layers - 1);
    std::string yaml;
    if (!numbers(0, layers - 3, true).empty()) yaml += experts_rule(f.experts_path, numbers(0, layers - 3, true), "cpu");
    yaml += default_rule("^model\\\\.layers\\\\.(" + numbers(0, layers - 3, false) + ")(\\\\.|$)", "cpu");
    yaml += experts_rule(f.experts_path, gpu0, "cuda:0") + default_rule("^model\\\\.layers\\\\." + gpu0 + "(\\\\.|$)", "cuda:0");
    yaml += experts_rule(f.experts_path, gpu1, "cuda:1") + default_rule("^model\\\\.layers\\\\." + gpu1 + "(\\\\.|$)", "cuda:1");
    yaml += default_rule("^model\\\\.embed_tokens$", "cpu") + default_rule("^(model\\\\.norm|lm_head)$", "cuda:1");
    yaml += "- match:\n    name: \"^model$\"\n  replace:\n    class: \"Model\"\n    kwargs:\n      generate_device: \"cpu\"\n"
            "      prefill_device: \"cpu\"\n      transfer_map:\n        " + gpu0 + ": \"cuda:0\"\n        " + gpu1 + ": \"cuda:1\"\n";
    sy::CheckOptions yaml_options;
    yaml_options.model.arch = f.arch;
    yaml_options.profile = "profile.yaml";
    yaml_options.profile_text = yaml;
    const sy::CheckResult by_yaml = sy::run_check(yaml_options);
    CHECK(!by_yaml.diagnostics.has_errors());
    expect_same_plan(quick, by_yaml);

    // --cpu-moe wins over the layer rules for the experts; the GPU layers' experts hand their
    // output to their layer's GPU.
    flags.cpu_moe = true;
    const sy::CheckResult with_cpu_moe = check_with(f.arch, flags);
    CHECK(!with_cpu_moe.diagnostics.has_errors());
    CHECK(with_cpu_moe.diagnostics.count(sy::Severity::warning) == 0);  // no layer rule left dead
    for (const sy::ModulePlacement& p : with_cpu_moe.plan.visited)
      if (with_cpu_moe.tree->is_routed_experts(p.module)) {
        CHECK(p.generate_device == sy::Device::cpu());
        CHECK(p.out_device == with_cpu_moe.plan.layer_device(with_cpu_moe.tree->at(p.module).layer));
      }
  }
}

TEST_CASE("gpu layers: without a profile several GPUs divide the layers; with one the layer flags are refused") {
  sy::CheckOptions options;
  options.model.arch = "deepseek-v3";
  options.budget.gpu_bytes = {80ULL << 30, 40ULL << 30};
  options.quick_rules.cpu_moe = true;
  const sy::CheckResult two = sy::run_check(options);
  CHECK(!two.diagnostics.has_errors());
  CHECK(two.plan.layer_device(41) == sy::Device::cuda(0));
  CHECK(two.plan.layer_device(42) == sy::Device::cuda(1));
  CHECK(total_on(two, sy::Device::cuda(1)) > 0);

  // --main-gpu: everything on that GPU, the default device too.
  options.budget.gpu_bytes.clear();
  options.gpus = 2;
  options.quick_rules.layers.main_gpu = 1;
  const sy::CheckResult main_gpu = sy::run_check(options);
  CHECK(!main_gpu.diagnostics.has_errors());
  CHECK(main_gpu.plan.options.default_device == sy::Device::cuda(1));
  CHECK(total_on(main_gpu, sy::Device::cuda(0)) == 0);
  options.default_device = sy::Device::cuda(0);
  CHECK_THROWS_WITH_AS(sy::run_check(options), doctest::Contains("disagree"), sy::InputError);

  sy::CheckOptions with_profile;
  with_profile.model.arch = "deepseek-v3";
  with_profile.profile = sy::testing::source_path("optimize_rules/DeepSeek-V3-Chat.yaml");
  with_profile.quick_rules.layers.n_gpu_layers = 10;
  CHECK_THROWS_WITH_AS(sy::run_check(with_profile), doctest::Contains("-ngl 10: the profile places the layers itself"),
                       sy::InputError);
}

TEST_CASE("fit: each of several GPUs is filled by its own budget, and one more layer on any would not fit") {
  sy::CheckOptions o;
  o.model.arch = "deepseek-v3";
  o.model.weight_dtype = "q4_k_m";
  o.quick_rules.layers.tensor_split = {1, 1};
  o.fit.margin_bytes = 1 << 20;
  auto with_layers = [&](const std::vector<int>& cpu_layers) {
    sy::CheckOptions trial = o;
    trial.fit.enabled = false;
    trial.quick_rules.fit_cpu_layers = cpu_layers;
    return sy::run_check(trial);
  };
  // Each GPU's budget between all its layers' experts on the CPU and none: a third of the way
  // on cuda:0, two thirds on cuda:1, so the two choose different counts.
  const sy::CheckResult none = with_layers({});
  std::vector<int> all;
  for (const sy::ModulePlacement& p : none.plan.visited)
    if (none.tree->is_routed_experts(p.module)) all.push_back(none.tree->at(p.module).layer);
  const sy::CheckResult every = with_layers(all);
  std::vector<std::uint64_t> budgets;
  for (int g = 0; g < 2; ++g) {
    const std::uint64_t most = total_on(none, sy::Device::cuda(g)), least = total_on(every, sy::Device::cuda(g));
    REQUIRE(most > least);
    budgets.push_back(least + o.fit.margin_bytes + (most - least) * static_cast<std::uint64_t>(g + 1) / 3);
  }
  o.budget.gpu_bytes = budgets;
  o.fit.enabled = true;
  const sy::CheckResult r = sy::run_check(o);
  REQUIRE(r.fit.has_value());
  CHECK(!r.diagnostics.has_errors());
  CHECK_FALSE(r.fit->first_layers);  // cuda:1's first layers move, not only cuda:0's
  const std::vector<int>& chosen = r.fit->layers;
  CHECK(static_cast<int>(chosen.size()) == r.fit->cpu_layers);
  for (int g = 0; g < 2; ++g) {
    INFO("cuda:" << g);
    const sy::Device gpu = sy::Device::cuda(g);
    CHECK(total_on(r, gpu) + o.fit.margin_bytes <= budgets[static_cast<std::size_t>(g)]);
    // The last of this GPU's layers whose experts moved, back on the GPU: it overflows.
    std::vector<int> fewer = chosen;
    int last = -1;
    for (int l : chosen)
      if (r.plan.layer_device(l) == gpu) last = l;
    REQUIRE(last >= 0);
    fewer.erase(std::find(fewer.begin(), fewer.end(), last));
    CHECK(total_on(with_layers(fewer), gpu) + o.fit.margin_bytes > budgets[static_cast<std::size_t>(g)]);
  }
  // The layers that move are each GPU's first: no GPU keeps a lower layer's experts than one it moved.
  for (const sy::ModulePlacement& p : r.plan.visited) {
    if (!r.tree->is_routed_experts(p.module) || !p.generate_device.is_cuda()) continue;
    const int layer = r.tree->at(p.module).layer;
    for (int l : chosen)
      if (r.plan.layer_device(l) == p.generate_device) CHECK(l < layer);
  }
  CHECK(r.fit->override_tensor.find("ffn_(up|down|gate)_exps=CPU") != std::string::npos);
}

TEST_CASE("gpu layers: the command line's -ngl, -ts, -mg and split --fit -o") {
  using sy::testing::run_switchyard;
  const auto ngl = run_switchyard("check --arch tiny-deepseek-v3 -ngl 2 -ts 1,1");
  CHECK(ngl.exit_code == 0);
  CHECK(ngl.output.find("transfer_map: 2->cuda:0 3->cuda:1") != std::string::npos);
  CHECK(ngl.output.find("(-ngl 2 -ts 1,1)") != std::string::npos);
  const auto equals = run_switchyard("check --arch tiny-deepseek-v3 -ngl=2 --tensor-split=1/1");
  CHECK(equals.exit_code == 0);
  CHECK(equals.output.find("transfer_map: 2->cuda:0 3->cuda:1") != std::string::npos);
  const auto bad_split = sy::testing::run_switchyard_with_env("", "check --arch tiny-deepseek-v3 -ts 1,x", true);
  CHECK(bad_split.exit_code == 2);
  CHECK(bad_split.output.find("--tensor-split '1,x': 'x' is not a share") != std::string::npos);
  const auto bad_gpu = sy::testing::run_switchyard_with_env("", "check --arch tiny-deepseek-v3 --gpus 2 -mg 2", true);
  CHECK(bad_gpu.exit_code == 2);
  CHECK(bad_gpu.output.find("--main-gpu 2: the GPUs are 0 to 1") != std::string::npos);

  // split --fit -o writes the fitted plan as a profile; check of that file alone gives the same memory.
  sy::core_testing::TempDir dir;
  const std::string out = (dir / "fitted.yaml").string();
  const auto split =
      run_switchyard("split --arch deepseek-v3 --weight_dtype q4_k_m --fit --gpu_memory 80GiB,40GiB -o " + out);
  CHECK(split.exit_code == 0);
  CHECK(split.output.find("fit: the routed experts of ") != std::string::npos);
  CHECK(split.output.find("llama.cpp: -ot \"blk\\.(") != std::string::npos);
  CHECK(split.output.find("0 error(s)") != std::string::npos);
  const auto fitted = run_switchyard("check --arch deepseek-v3 --weight_dtype q4_k_m --gpu_memory 80GiB,40GiB --optimize_config_path " + out);
  CHECK(fitted.exit_code == 0);
  const auto flags = run_switchyard("check --arch deepseek-v3 --weight_dtype q4_k_m --gpu_memory 80GiB,40GiB --fit");
  auto device_lines = [](const std::string& text) {
    std::string lines;
    for (const char* device : {"\ncuda:0  ", "\ncuda:1  "}) {
      const std::size_t at = text.find(device);
      if (at != std::string::npos) lines += text.substr(at, text.find('\n', at + 1) - at);
    }
    return lines;
  };
  CHECK(!device_lines(flags.output).empty());
  CHECK(device_lines(fitted.output) == device_lines(flags.output));
}
