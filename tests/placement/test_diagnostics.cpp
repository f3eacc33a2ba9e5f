// Every diagnostic `check` promises, with the line (and column) of the rule or key at fault.
#include <chrono>

#include "core/error.h"
#include "core/units.h"
#include "tests/test_support.h"

using namespace switchyard;
using namespace switchyard::testing;

namespace {

// A complete single-GPU profile for tiny-deepseek-v3 (layers 0-3), for tests that change one part.
const char* kGood = R"(- match:
    name: "^model\\.layers\\..*\\.mlp\\.experts$"
  replace:
    class: ktransformers.operators.experts.KTransformersExperts
    kwargs:
      generate_device: "cpu"
      prefill_device: "cuda:0"
      out_device: "cuda:0"
  recursive: False
- match:
    name: "^model\\.embed_tokens$"
  replace:
    class: "default"
    kwargs:
      generate_device: "cpu"
      prefill_device: "cpu"
)";

}  // namespace

TEST_CASE("diagnostics: the reference profile is clean") {
  const auto result = check_yaml(kGood);
  for (const Diagnostic& d : result.diagnostics.items()) INFO(format_diagnostic(d));
  CHECK(result.diagnostics.items().empty());
}

TEST_CASE("diagnostics: YAML syntax error with its position") {
  const auto result = check_yaml("- match:\n    name: x\n   replace: {}\n");
  const Diagnostic d = only(result, "yaml-syntax");
  CHECK(d.severity == Severity::error);
  CHECK(d.location.file == "test.yaml");
  CHECK(d.location.line == 3);
  CHECK(d.location.column == 4);
  CHECK(only(check_yaml("- match: {name: x}\n  replace: {class: default}\n\t- bad\n"), "yaml-syntax").location.line == 3);
}

TEST_CASE("diagnostics: a regex that does not compile, with its offset") {
  const auto result = check_yaml("- match:\n    name: \"^model\\\\.layers\\\\.(1[0-4]\\\\.\"\n  replace: {class: default}\n");
  const Diagnostic d = only(result, "regex-compile");
  CHECK(d.location.line == 2);
  CHECK(d.location.column > 11);  // points into the pattern, past `name: "`
  CHECK(d.message.find("offset") != std::string::npos);
  CHECK(d.rule == 0);
}

TEST_CASE("diagnostics: rules without match or replace, and empty matches") {
  const auto result = check_yaml(R"(- replace: {class: default}
- match: {name: "lm_head"}
- match: {}
  replace: {class: default}
)");
  CHECK(only(result, "rule-missing-match").location.line == 1);
  CHECK(only(result, "rule-missing-replace").location.line == 2);
  CHECK(only(result, "match-empty").location.line == 3);
}

TEST_CASE("diagnostics: wrong value types") {
  const auto result = check_yaml(R"(- match: {name: "lm_head"}
  replace: {class: default}
  recursive: maybe
- match: {name: ["a", "b"]}
  replace: {class: default}
- match: {name: "^model$"}
  replace:
    class: ktransformers.operators.models.KDeepseekV2Model
    kwargs: {per_layer_prefill_intput_threshold: lots}
)");
  const auto found = with_code(result, "type-mismatch");
  REQUIRE(found.size() == 3);
  CHECK(found[0].location.line == 3);
  CHECK(found[0].message.find("'recursive' must be true or false") != std::string::npos);
  CHECK(found[1].location.line == 4);
  CHECK(found[2].location.line == 9);
}

TEST_CASE("diagnostics: unknown replacement classes, ops and kwargs, with did-you-mean") {
  const auto result = check_yaml(R"(- match: {name: "^model\\.layers\\..*\\.self_attn$"}
  replace:
    class: ktransformers.operators.attention.KDeepseekV2Atention
- match: {name: "^model\\.layers\\..*\\.mlp\\.experts$"}
  replace:
    class: ktransformers.operators.experts.KTransformersExperts
    kwargs:
      generate_op: "KExpertCPU"
      out_devce: "cuda:0"
  recursive: false
- match: {name: "^model\\.layers\\..*\\.self_attn$", class: DeepseekV3Attentio}
  replace: {class: MLA}
)");
  const Diagnostic cls = only(result, "unknown-class");
  CHECK(cls.location.line == 3);
  CHECK(cls.message.find("did you mean 'ktransformers.operators.attention.KDeepseekV2Attention'") != std::string::npos);
  const Diagnostic op = only(result, "unknown-op");
  CHECK(op.location.line == 8);
  CHECK(op.message.find("did you mean 'KExpertsCPU'") != std::string::npos);
  const Diagnostic kwarg = only(result, "unknown-kwarg");
  CHECK(kwarg.location.line == 9);
  CHECK(kwarg.location.column == 7);
  CHECK(kwarg.message.find("did you mean 'out_device'") != std::string::npos);
  const Diagnostic match_class = only(result, "unknown-match-class");
  CHECK(match_class.location.line == 11);
  CHECK(match_class.message.find("DeepseekV3Attention") != std::string::npos);
}

TEST_CASE("diagnostics: unknown keys in a rule") {
  const auto result = check_yaml("- matches: {name: 'lm_head'}\n  replace: {class: default}\n");
  const Diagnostic d = only(result, "unknown-key");
  CHECK(d.location.line == 1);
  CHECK(d.message.find("did you mean 'match'") != std::string::npos);
}

TEST_CASE("diagnostics: malformed and out-of-range devices") {
  CheckSetup setup;
  setup.gpus = 4;
  const auto result = check_yaml(R"(- match: {name: "^lm_head$"}
  replace:
    class: default
    kwargs:
      generate_device: "cuda:9"
      prefill_device: "gpu1"
)", setup);
  const Diagnostic range = only(result, "device-out-of-range");
  CHECK(range.location.line == 5);
  CHECK(range.message.find("cuda:9") != std::string::npos);
  CHECK(range.message.find("4 GPUs") != std::string::npos);
  const Diagnostic bad = only(result, "bad-device");
  CHECK(bad.location.line == 6);
  CHECK(bad.location.column == 23);
}

TEST_CASE("diagnostics: transfer_map layers outside the model") {
  CheckSetup setup;
  setup.gpus = 2;
  const auto result = check_yaml(R"(- match: {name: "^model$"}
  replace:
    class: ktransformers.operators.models.KDeepseekV2Model
    kwargs:
      transfer_map:
        2: "cuda:1"
        7: "cuda:1"
)", setup);
  const Diagnostic d = only(result, "transfer-map-layer-out-of-range");
  CHECK(d.location.line == 7);
  CHECK(d.message.find("layers 0-3") != std::string::npos);
}

TEST_CASE("diagnostics: a layer's modules on another device than the transfer_map says") {
  CheckSetup setup;
  setup.gpus = 2;
  // Attention rules cover layers 0-1 and 2-3, but the transfer_map switches at layer 3.
  const auto result = check_yaml(R"(- match: {name: "^model\\.layers\\.[0-1]\\."}
  replace: {class: default, kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}}
- match: {name: "^model\\.layers\\.[2-3]\\."}
  replace: {class: default, kwargs: {generate_device: "cuda:1", prefill_device: "cuda:1"}}
- match: {name: "^model$"}
  replace:
    class: ktransformers.operators.models.KDeepseekV2Model
    kwargs: {transfer_map: {3: "cuda:1"}}
- match: {name: "^(model\\.norm|lm_head)$"}
  replace: {class: default, kwargs: {generate_device: "cuda:1", prefill_device: "cuda:1"}}
- match: {name: "^model\\.embed_tokens$"}
  replace: {class: default, kwargs: {generate_device: "cpu", prefill_device: "cpu"}}
)", setup);
  const auto found = with_code(result, "layer-device-mismatch");
  REQUIRE(found.size() == 2);  // generate_device and prefill_device of rule #2
  for (const Diagnostic& d : found) {
    CHECK(d.rule == 1);  // Diagnostic::rule is the 0-based index
    CHECK(d.message.find("rule #2 (line 3)") != std::string::npos);
    CHECK(d.location.line == 4);
    CHECK(d.message.find("layer 2") != std::string::npos);
    CHECK(d.message.find("cuda:0") != std::string::npos);
  }
}

TEST_CASE("diagnostics: experts whose out_device or prefill_device differ from their layer's") {
  CheckSetup setup;
  setup.gpus = 2;
  const auto result = check_yaml(R"(- match: {name: "^model\\.layers\\..*\\.mlp\\.experts$"}
  replace:
    class: ktransformers.operators.experts.KTransformersExperts
    kwargs:
      generate_device: "cpu"
      prefill_device: "cuda:1"
      out_device: "cuda:1"
  recursive: false
- match: {name: "^model\\.embed_tokens$"}
  replace: {class: default, kwargs: {generate_device: "cpu", prefill_device: "cpu"}}
)", setup);
  const auto found = with_code(result, "experts-device-mismatch");
  REQUIRE(found.size() == 2);
  CHECK(found[0].location.line == 6);  // prefill_device
  CHECK(found[1].location.line == 7);  // out_device
  CHECK(found[1].message.find("layers 1-3") != std::string::npos);
}

TEST_CASE("diagnostics: layers no device-specific rule covers in a multi-GPU profile") {
  // Rules written for layers 0-2 of a 4-layer model: layer 3 falls to the default device.
  CheckSetup setup;
  setup.gpus = 2;
  const auto result = check_yaml(R"(- match: {name: "^model\\.layers\\.[0-1]\\."}
  replace: {class: default, kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}}
- match: {name: "^model\\.layers\\.2\\."}
  replace: {class: default, kwargs: {generate_device: "cuda:1", prefill_device: "cuda:1"}}
- match: {name: "^model$"}
  replace:
    class: ktransformers.operators.models.KDeepseekV2Model
    kwargs: {transfer_map: {2: "cuda:1"}}
- match: {name: "^(model\\.norm|lm_head|model\\.embed_tokens)$"}
  replace: {class: default, kwargs: {generate_device: "cuda:1", prefill_device: "cuda:1"}}
)", setup);
  const Diagnostic d = only(result, "layer-uncovered");
  CHECK(d.message.find("layer 3 of 4") != std::string::npos);
  CHECK(d.message.find("model.layers.3.") != std::string::npos);
}

TEST_CASE("diagnostics: devices over their memory budget") {
  CheckSetup setup;
  setup.gpu_bytes = {1 << 20};  // 1 MiB: too small for tiny-deepseek-v3's GPU share
  setup.cpu_bytes = 1ULL << 40;
  const auto result = check_yaml(kGood, setup);
  const Diagnostic d = only(result, "over-budget");
  CHECK(d.message.find("cuda:0") != std::string::npos);
  CHECK(d.message.find("1.0 MiB") != std::string::npos);
}

TEST_CASE("diagnostics: rules that match no module are dead") {
  const std::string yaml = std::string(kGood) + R"(- match: {name: "^model\\.layers\\.99\\."}
  replace: {class: default}
- match: {name: "^model\\.layers\\.1\\.mlp\\.experts\\.3\\.gate_proj$"}
  replace: {class: default}
)";
  const auto result = check_yaml(yaml);
  const auto dead = with_code(result, "dead-rule");
  REQUIRE(dead.size() == 2);
  CHECK(dead[0].severity == Severity::warning);
  CHECK(dead[0].location.line == 17);
  CHECK(dead[0].message.find("no module") != std::string::npos);
  CHECK(dead[1].location.line == 19);
  CHECK(dead[1].message.find("recursive: false") != std::string::npos);
  CHECK_FALSE(result.diagnostics.has_errors());
}

TEST_CASE("diagnostics: weights left on the default device in a multi-GPU profile") {
  CheckSetup setup;
  setup.gpus = 2;
  const auto result = check_yaml(R"(- match: {name: "^model\\.layers\\.[0-1]\\."}
  replace: {class: default, kwargs: {generate_device: "cuda:0", prefill_device: "cuda:0"}}
- match: {name: "^model\\.layers\\.[2-3]\\."}
  replace: {class: default, kwargs: {generate_device: "cuda:1", prefill_device: "cuda:1"}}
- match: {name: "^model$"}
  replace:
    class: ktransformers.operators.models.KDeepseekV2Model
    kwargs: {transfer_map: {2: "cuda:1"}}
- match: {name: "^model\\.norm$"}
  replace: {class: default, kwargs: {generate_device: "cuda:1", prefill_device: "cuda:1"}}
)", setup);
  const Diagnostic d = only(result, "default-device-fallback");
  CHECK(d.severity == Severity::warning);
  CHECK(d.message.find("model.embed_tokens") != std::string::npos);
  CHECK(d.message.find("lm_head") != std::string::npos);
}

TEST_CASE("diagnostics: a replacement that cannot stand in for the module's class") {
  // Without `class:` the MoE rule also catches the dense MLP of layer 0.
  const auto result = check_yaml(R"(- match: {name: "^model\\.layers\\..*\\.mlp$"}
  replace: {class: ktransformers.operators.experts.KDeepseekV3MoE}
)");
  const Diagnostic d = only(result, "incompatible-replacement");
  CHECK(d.location.line == 2);
  CHECK(d.message.find("model.layers.0.mlp") != std::string::npos);
}

TEST_CASE("diagnostics: an op that cannot run on the chosen device") {
  const auto result = check_yaml(R"(- match: {name: "^model\\.layers\\..*\\.mlp\\.experts$"}
  replace:
    class: ktransformers.operators.experts.KTransformersExperts
    kwargs: {generate_device: "cuda:0", generate_op: "KExpertsCPU", prefill_device: "cuda:0", out_device: "cuda:0"}
  recursive: false
)");
  const Diagnostic d = only(result, "op-device-mismatch");
  CHECK(d.location.line == 4);
}

TEST_CASE("diagnostics: catastrophic backtracking ends in bounded time") {
  const auto start = std::chrono::steady_clock::now();
  const auto result = check_yaml(R"(- match: {name: "^((\\w|\\.)+)+[^\\w.]"}
  replace: {class: default}
)");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Diagnostic d = only(result, "regex-match-limit");
  CHECK(d.location.line == 1);
  CHECK(d.message.find("backtracking") != std::string::npos);
  CHECK(seconds < 10.0);  // a hang would never get here; the bound is generous for slow CI
}

TEST_CASE("diagnostics: files that are not profiles") {
  CHECK(only(check_yaml(""), "empty-profile").severity == Severity::error);
  CHECK(only(check_yaml("# only a comment\n"), "empty-profile").severity == Severity::error);
  CHECK(only(check_yaml("[]"), "empty-profile").severity == Severity::error);
  CHECK(only(check_yaml("match: {name: x}\nreplace: {class: default}\n"), "not-a-list").location.line == 1);
  CHECK(only(check_yaml("just a sentence"), "not-a-list").severity == Severity::error);
  CHECK(only(check_yaml("- 42\n"), "rule-not-a-mapping").location.line == 1);
  // Binary garbage: any error, no crash.
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 7919 + 13) % 256);
  CHECK(check_yaml(garbage).diagnostics.has_errors());
  // Deep nesting must not overflow the stack.
  CHECK(check_yaml(std::string(100000, '[')).diagnostics.has_errors());
}

TEST_CASE("diagnostics: a missing profile file is an input error") {
  CheckOptions options;
  options.model.arch = "tiny-deepseek-v3";
  options.profile = "/nonexistent/profile.yaml";
  CHECK_THROWS_AS(run_check(options), InputError);
}

TEST_CASE("diagnostics: an out-of-memory error gains the plan's estimate for that device") {
  switchyard::CheckOptions options;
  options.model.arch = "deepseek-v2-lite";
  options.profile = source_path("optimize_rules/DeepSeek-V2-Lite-Chat-gpu.yaml");
  const auto check = switchyard::run_check(options);
  const std::string oom = "out of memory on cuda:0: allocating 1.10 GiB for the routed experts of model.layers.7.mlp.experts";
  const std::string explained = switchyard::explain_out_of_memory(oom, check.memory, 4096);
  INFO(explained);
  CHECK(explained.rfind(oom, 0) == 0);
  CHECK(explained.find("the plan estimates 29.0 GiB for cuda:0") != std::string::npos);
  CHECK(explained.find("--max_context 4096") != std::string::npos);
  // Other devices and other errors are left alone.
  CHECK(switchyard::explain_out_of_memory("out of memory on cuda:01x", check.memory, 4096) ==
        "out of memory on cuda:01x");
  CHECK(switchyard::explain_out_of_memory("a bad tensor", check.memory, 4096) == "a bad tensor");
}
