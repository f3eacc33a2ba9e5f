#pragma once
// RuleSet: a parsed optimize-rule profile. Each rule keeps the file position of every part, so
// every later finding can point at the rule, key or value at fault.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/diagnostics.h"
#include "core/module_class.h"
#include "placement/operator_registry.h"
#include "placement/regex.h"

namespace switchyard {

struct TransferMapEntry {
  int layer = 0;
  Device device;
  SourceLocation location;
};

struct Rule {
  int index = 0;            // 0-based position in the file: indexes RuleSet::rules and per-rule tables
  SourceLocation location;  // the rule's "- " item

  // match
  std::optional<std::string> name_pattern;
  Regex name_regex;  // valid() when name_pattern compiled
  SourceLocation name_location;
  std::optional<std::string> class_text;
  const ModuleClass* match_class = nullptr;
  SourceLocation class_location;
  bool matchable = true;  // false when the match part is broken: the rule takes part in no walk

  // replace
  std::string replace_text = "default";
  const ReplacementClass* replacement = nullptr;  // nullptr only when replace_text is unknown
  SourceLocation replace_location;
  // As written, with YAML 1.1 values as PyYAML reads them (010 is 8, yes is true); aliases expanded.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  std::map<std::string, SourceLocation> kwarg_locations;
  std::optional<Device> generate_device, prefill_device, out_device;
  // Canonical op names; "" when not given; "None" (YAML null or ktransformers' string None) when
  // the phase has no op of its own and runs the other phase's, on that phase's device.
  std::string generate_op, prefill_op;
  std::vector<TransferMapEntry> transfer_map;  // sorted by layer
  bool has_transfer_map = false;

  bool recursive = true;

  // Where a rule that no profile file holds came from: "-ot #2", "--cpu-moe" (a command line's
  // quick rules, placement/quick_rules.h); empty for a profile's rules.
  std::string origin;

  // What users see: rules are numbered from 1 in every message and report ("rule #1 (line 6)"),
  // in the order they are tried: a command line's quick rules first, then the profile's.
  int number() const { return index + 1; }
  // "rule #3 (line 12)", or "rule #1 (command line: -ot #1)".
  std::string label() const;
  // "line 12", or "-ot #1": where the rule is written, for tables.
  std::string where() const;
  const OperatorInfo& op() const { return replacement ? *replacement->op : default_operator(); }
  SourceLocation kwarg_location(std::string_view kwarg) const;
};

struct RuleSet {
  std::filesystem::path file;
  std::vector<Rule> rules;
  // The profile is written for a model family or a device Switchyard does not run. The parse
  // said so once for each (profile-family-unsupported, unsupported-device), and the plan is not
  // validated: its findings would be about another model or another machine.
  bool for_unsupported_target = false;
  // Every device any rule names, for "is this a multi-GPU profile" and --gpus defaults.
  std::vector<Device> devices_named() const;
  int gpus_named() const;  // highest cuda ordinal named + 1; 0 when none
};

// Parses profile text, any bytes at all: problems go to `diagnostics` with `file_name` and
// positions, never as exceptions, in time and memory linear in the text (the YAML limits are in
// yaml_reader.h). A profile that is not a list of rules yields an empty RuleSet and an error; after
// kMaxProfileProblems problems parsing stops and the rules read so far are returned.
// `first_index`: the index (and number - 1) of the first rule, when other rules come before the
// file's in the set (the command line's quick rules).
RuleSet parse_rules(std::string_view text, const std::string& file_name, Diagnostics& diagnostics, int first_index = 0);
// Reads and parses a regular file of at most kMaxProfileBytes; throws InputError (exit 2) when it
// is missing, not a regular file (a FIFO, a device, a directory), larger, or unreadable.
RuleSet load_rules(const std::filesystem::path& file, Diagnostics& diagnostics, int first_index = 0);

}  // namespace switchyard
