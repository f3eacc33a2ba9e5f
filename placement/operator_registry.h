#pragma once
// The operator registry: every replacement class a rule's `replace.class` may name, under our
// short native names and ktransformers' Python paths, with the kwargs each one accepts (and
// whether Switchyard honours each), the module classes it can replace and the ops (generate_op /
// prefill_op) it can run. Placement validates profiles against this; the engine builds operators
// from it.
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/module_class.h"
#include "placement/implementation.h"

namespace switchyard {

enum class KwargType { device, op, integer, boolean, string, transfer_map, choice };
const char* kwarg_type_name(KwargType type);

struct KwargSpec {
  std::string name;
  KwargType type;
  std::string help;
  std::vector<std::string> choices = {};  // KwargType::choice
  // KwargType::integer: the values accepted, both ends included.
  long long min_value = std::numeric_limits<long long>::min();
  long long max_value = std::numeric_limits<long long>::max();
  // Whether Switchyard does what the kwarg asks. One it does not is still accepted, so that
  // ktransformers' files load, and check warns where it is written (kwarg-no-effect), once per
  // rule, with `no_effect`: why it changes nothing here and what to use instead.
  bool honoured = true;
  std::string no_effect = {};
  // For a kwarg not honoured: whether `value` (as the rule's kwargs hold it) asks for what
  // Switchyard does anyway when the operator prefills on `prefill_device`
  // (per_layer_prefill_intput_threshold: 0); such a value is not reported. Null: every value is.
  bool (*asks_what_switchyard_does)(const nlohmann::ordered_json& value, const Device& prefill_device) = nullptr;
};

// What an op (or an operator without ops) runs on each kind of device; Implementation::none
// where it cannot run there.
struct DeviceImplementations {
  Implementation on_cpu = Implementation::none;
  Implementation on_gpu = Implementation::none;
  Implementation on(const Device& device) const { return device.is_cpu() ? on_cpu : on_gpu; }
};

struct OpInfo {
  std::string name;                  // canonical (ktransformers') name: "KExpertsCPU"
  std::vector<std::string> aliases;  // our short names: "cpu"
  DeviceImplementations runs;
};

enum class OperatorKind { default_op, linear, experts, moe, gate, attention, rotary, model, rms_norm, mlp };

struct OperatorInfo {
  std::string name;  // native name: "Experts"
  OperatorKind kind = OperatorKind::default_op;
  std::string description;
  std::vector<KwargSpec> kwargs;
  std::vector<OpInfo> ops;  // values of generate_op / prefill_op; empty when the operator has none
  std::string default_generate_op;
  std::string default_prefill_op;
  // Devices when a rule does not give them: nullopt means the default device (--default_device).
  std::optional<Device> default_generate_device;
  // True when the operator itself hands its output to `out_device`, so it may run on another
  // device than its layer (CPU experts). Other operators must sit on their layer's device.
  bool has_out_device = false;
  // What runs the operator when it has no ops (MoE, MLA, ...); with ops, each OpInfo says.
  DeviceImplementations runs;

  const KwargSpec* find_kwarg(std::string_view kwarg) const;
  const OpInfo* find_op(std::string_view op) const;
  std::vector<std::string> kwarg_names() const;
  std::vector<std::string> op_spellings() const;
};

// A spelling a rule may use for a replacement class, and the module classes it may replace.
struct ReplacementClass {
  std::string spelling;                 // "ktransformers.operators.experts.KDeepseekV3MoE" or "MoE"
  const OperatorInfo* op = nullptr;
  std::vector<std::string> replaces;    // native module class names; empty: any module
  std::vector<const ModuleClass*> replaced_classes;  // the same, looked up once

  // isinstance(module of class `cls`, one of `replaces`); true when `replaces` is empty.
  bool can_replace(const ModuleClass& cls) const;
};

const ReplacementClass* find_replacement_class(std::string_view spelling);
const std::vector<std::string>& replacement_class_spellings();
const OperatorInfo& default_operator();
const std::vector<OperatorInfo>& operators();
const OperatorInfo* find_operator(std::string_view native_name);
// The operator that runs a module of class `cls` placed with the `default` class: the first whose
// native spelling replaces `cls` (by isinstance); nullptr for containers (layers, lists, the model).
const OperatorInfo* native_operator(const ModuleClass& cls);

}  // namespace switchyard
