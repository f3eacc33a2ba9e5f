#pragma once
// What ktransformers' profiles target that Switchyard does not run: model families (known by the
// Python modules of their classes and the names of their replacement classes) and devices (npu,
// xpu, ...). A profile written for one gets one located error that names it (rule_parser.cpp),
// not an unknown class or device per rule.
#include <string>
#include <string_view>
#include <vector>

namespace switchyard {

struct ForeignFamily {
  std::string model_type;  // config.json's model_type: "qwen2_moe"
  std::string models;      // "Qwen2-MoE (Qwen2-57B-A14B)"
};

// The family a `match.class` spelling belongs to ("ktransformers.models.modeling_qwen2_moe.X"),
// or nullptr: for classes of families Switchyard runs, and for names it does not know at all.
const ForeignFamily* foreign_family_of_module_class(std::string_view spelling);
// The family a `replace.class` spelling is written for ("...experts.KSmallthinkerExperts"), or
// nullptr, as above.
const ForeignFamily* foreign_family_of_replacement(std::string_view spelling);

// The model types Switchyard runs, one per family, in the order of its --arch presets.
const std::vector<std::string>& families_switchyard_runs();

// What a device string that is not cpu or cuda:N names, when it is a torch device ktransformers
// runs on ("npu:0": "an Ascend NPU (torch_npu)"); "" for anything else.
std::string foreign_device_description(std::string_view device);
// The device kind of such a string, lower case ("npu" for "NPU:1").
std::string foreign_device_kind(std::string_view device);

}  // namespace switchyard
