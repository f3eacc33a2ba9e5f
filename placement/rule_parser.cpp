// Reads ktransformers optimize-rule YAML into a RuleSet. What a rule means is decided elsewhere
// (placement_plan.cpp); here every key and value is checked for shape and type, with its position.
// The YAML itself is read by YamlDocument (yaml_reader.h), which bounds depth, size and aliases and
// gives values PyYAML's meaning; everything here walks its tree in time linear in its size.

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/input_file.h"
#include "core/text.h"
#include "placement/foreign_targets.h"
#include "placement/rule_set.h"
#include "placement/yaml_reader.h"

namespace switchyard {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kPyYaml = "PyYAML, which ktransformers uses,";

class RuleParser {
 public:
  RuleParser(std::string file, Diagnostics& diagnostics, int first_index)
      : file_(std::move(file)), diagnostics_(diagnostics), first_index_(first_index) {}

  RuleSet parse(std::string_view text);

 private:
  SourceLocation at(const YamlNode& node, const SourceLocation& fallback = {}) const {
    if (node.line <= 0) return fallback.file.empty() ? SourceLocation{file_, 0, 0} : fallback;
    return SourceLocation{file_, node.line, node.column};
  }
  // Problems past kMaxProfileProblems are counted, and parsing stops at the next rule or kwarg.
  void error(std::string code, std::string message, SourceLocation location, int rule) {
    if (++problems_ <= kMaxProfileProblems)
      diagnostics_.error(std::move(code), std::move(message), std::move(location), rule);
  }
  void warning(std::string code, std::string message, SourceLocation location, int rule) {
    if (++problems_ <= kMaxProfileProblems)
      diagnostics_.warning(std::move(code), std::move(message), std::move(location), rule);
  }
  // True once kMaxProfileProblems are reported: the caller has more to read and stops.
  bool give_up() {
    if (problems_ < kMaxProfileProblems) return false;
    gave_up_ = true;
    return true;
  }

  void parse_rule(const YamlNode& item, Rule& rule);
  void parse_match(const YamlNode& match, const YamlNode& key, Rule& rule);
  void parse_replace(const YamlNode& replace, const YamlNode& key, Rule& rule);
  void parse_kwargs(const YamlNode& kwargs, Rule& rule);
  void check_kwarg(const std::string& name, const YamlNode& value, Rule& rule);
  void check_integer(const std::string& name, const KwargSpec& spec, const YamlNode& value, Rule& rule);
  std::optional<Device> device_value(const std::string& key, const YamlNode& value, Rule& rule);
  void parse_transfer_map(const YamlNode& value, Rule& rule);
  void check_keys(const YamlNode& map, std::initializer_list<const char*> allowed, const char* where, Rule& rule);

  // A family or device Switchyard does not run, named by the profile: where first, and how often.
  struct ForeignUse {
    std::string what;         // the family's model_type, or the device kind
    std::string description;  // "Qwen2-MoE (Qwen2-57B-A14B)", "an Ascend NPU (torch_npu)"
    std::string first_text;
    SourceLocation first;
    int first_rule = 0;
    int last_rule = -1;
    int rules = 0;   // distinct rules naming it
    int places = 0;  // values naming it
  };
  void note_foreign(std::vector<ForeignUse>& uses, const std::string& what, const std::string& description,
                    const std::string& text, const SourceLocation& where, const Rule& rule);
  void report_foreign(RuleSet& set);

  std::string file_;
  Diagnostics& diagnostics_;
  int first_index_ = 0;
  std::size_t problems_ = 0;
  bool gave_up_ = false;
  std::vector<ForeignUse> families_, devices_;
};

std::string node_kind(const YamlNode& node) {
  switch (node.kind) {
    case YamlKind::mapping: return "a mapping";
    case YamlKind::sequence: return "a list";
    case YamlKind::null: return "nothing";
    default: return quoted_excerpt(node.text);
  }
}

// A key as a name: its text, whatever YAML type it resolved to (a kwarg named 1 is "1").
const std::string& key_name(const YamlNode& key) { return key.text; }

// " (did you mean 'x'?)" for user text of any length, in time linear in it: a candidate whose
// length differs from the word's by more than closest_match accepts cannot be the suggestion
// (the edit distance is at least that difference), so it is not compared at all.
std::string suggestion(std::string_view word, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::vector<std::string> near;
  for (const std::string& candidate : candidates) {
    const std::size_t difference =
        candidate.size() > word.size() ? candidate.size() - word.size() : word.size() - candidate.size();
    if (difference <= limit) near.push_back(candidate);
  }
  return near.empty() ? std::string() : did_you_mean(word, near);
}

// The kwargs as written, for reports: numbers and booleans keep their YAML type. Linear in the
// nodes: the tree's mappings have unique keys, and object members are appended, not looked up
// (ordered_json's operator[] searches the members, which made a 200,000-key mapping quadratic).
ordered_json to_json(const YamlNode& node) {
  switch (node.kind) {
    case YamlKind::mapping: {
      ordered_json object = ordered_json::object();
      auto& members = static_cast<ordered_json::object_t::Container&>(object.get_ref<ordered_json::object_t&>());
      members.reserve(node.size());
      // Keys of different YAML types can share a text (1 and "1"): the later one wins, in place.
      std::unordered_map<std::string_view, std::size_t> index;
      for (std::size_t pair = 0; pair < node.size(); ++pair) {
        const std::string& key = key_name(node.key(pair));
        const auto [found, inserted] = index.try_emplace(key, members.size());
        if (inserted) members.emplace_back(key, to_json(node.value(pair)));
        else members[found->second].second = to_json(node.value(pair));
      }
      return object;
    }
    case YamlKind::sequence: {
      ordered_json array = ordered_json::array();
      for (const YamlNode* item : node.children) array.push_back(to_json(*item));
      return array;
    }
    case YamlKind::integer: {
      const YamlInteger value = *yaml_integer(node);
      if (value.out_of_range) return node.text;
      return value.value;
    }
    case YamlKind::boolean: return *yaml_boolean(node);
    case YamlKind::floating: {
      if (const auto value = yaml_float_value(node.text)) return *value;
      return node.text;  // inf and nan: JSON has no number for them
    }
    case YamlKind::string: return node.text;
    case YamlKind::null: return nullptr;
  }
  return nullptr;
}

// The reason a value that looks like a number is not one here, or "".
std::string why_not_an_integer(const YamlNode& value) {
  if (value.kind == YamlKind::string && value.quoted && parse_yaml_integer(value.text))
    return " (it is quoted, so a string; write it without quotes)";
  return "";
}

std::string range_text(const KwargSpec& spec) {
  constexpr long long kLowest = std::numeric_limits<long long>::min();
  constexpr long long kHighest = std::numeric_limits<long long>::max();
  if (spec.min_value != kLowest && spec.max_value != kHighest)
    return "from " + std::to_string(spec.min_value) + " to " + std::to_string(spec.max_value);
  if (spec.min_value != kLowest) return "at least " + std::to_string(spec.min_value);
  if (spec.max_value != kHighest) return "at most " + std::to_string(spec.max_value);
  return "a 64-bit integer";
}

// Says how PyYAML read a leading-zero integer: "is octal in YAML 1.1: ... reads it as 8; write 8,
// or 10 without the leading zero if that was meant".
std::string octal_note(const std::string& text, long long value) {
  std::string digits;
  for (const char c : text)
    if (c != '_' && c != '+') digits += c;
  const bool negative = !digits.empty() && digits[0] == '-';
  const std::size_t first = digits.find_first_not_of("-0");
  const std::string decimal = (negative ? "-" : "") + (first == std::string::npos ? std::string("0") : digits.substr(first));
  return "is octal in YAML 1.1: " + std::string(kPyYaml) + " reads it as " + std::to_string(value) + "; write " +
         std::to_string(value) + ", or " + decimal + " without the leading zero if that was meant";
}

}  // namespace

std::string Rule::where() const {
  return origin.empty() ? "line " + std::to_string(location.line) : origin;
}

std::string Rule::label() const {
  return "rule #" + std::to_string(number()) + " (" + (origin.empty() ? where() : "command line: " + origin) + ")";
}

SourceLocation Rule::kwarg_location(std::string_view kwarg) const {
  const auto it = kwarg_locations.find(std::string(kwarg));
  return it == kwarg_locations.end() ? replace_location : it->second;
}

std::vector<Device> RuleSet::devices_named() const {
  std::set<Device> devices;
  for (const Rule& rule : rules) {
    for (const auto& d : {rule.generate_device, rule.prefill_device, rule.out_device})
      if (d) devices.insert(*d);
    for (const TransferMapEntry& e : rule.transfer_map) devices.insert(e.device);
  }
  return {devices.begin(), devices.end()};
}

int RuleSet::gpus_named() const {
  int gpus = 0;
  for (const Device& d : devices_named())
    if (d.is_cuda()) gpus = std::max(gpus, d.index + 1);
  return gpus;
}

void RuleParser::check_keys(const YamlNode& map, std::initializer_list<const char*> allowed, const char* where,
                            Rule& rule) {
  const std::vector<std::string> names(allowed.begin(), allowed.end());
  for (std::size_t pair = 0; pair < map.size() && !give_up(); ++pair) {
    const std::string& key = key_name(map.key(pair));
    if (std::find(names.begin(), names.end(), key) != names.end()) continue;
    error("unknown-key",
          "unknown key " + quoted_excerpt(key) + " in " + where + suggestion(key, names) + "; allowed: " + join(names, ", "),
          at(map.key(pair)), rule.index);
  }
}

RuleSet RuleParser::parse(std::string_view text) {
  RuleSet set;
  set.file = file_;
  const YamlDocument document(text, file_, diagnostics_);
  if (!document.readable()) return set;
  const YamlNode* root = document.root();
  if (!root || root->is_null()) {
    diagnostics_.error("empty-profile", "the profile is empty; it must be a YAML list of rules ('- match: ...')",
                       SourceLocation{file_, 0, 0});
    return set;
  }
  if (!root->is_sequence()) {
    diagnostics_.error("not-a-list",
                       "a profile is a YAML list of rules ('- match: ...'), but this file holds " + node_kind(*root),
                       at(*root));
    return set;
  }
  if (root->size() == 0)
    diagnostics_.error("empty-profile", "the profile is an empty list; add rules ('- match: ...')", at(*root));
  set.rules.reserve(root->size());
  for (const YamlNode* item : root->children) {
    if (give_up()) break;
    Rule& rule = set.rules.emplace_back();
    rule.index = first_index_ + static_cast<int>(set.rules.size() - 1);
    rule.location = at(*item, at(*root));
    parse_rule(*item, rule);
  }
  report_foreign(set);
  if (gave_up_)
    diagnostics_.error("too-many-problems",
                       "stopped after " + std::to_string(kMaxProfileProblems) + " problems, in rule #" +
                           std::to_string(set.rules.back().number()) + " of " + std::to_string(root->size()) +
                           "; fix those first",
                       SourceLocation{file_, 0, 0});
  return set;
}

void RuleParser::parse_rule(const YamlNode& item, Rule& rule) {
  if (!item.is_map()) {
    error("rule-not-a-mapping", "rule #" + std::to_string(rule.number()) + " must be a mapping with 'match' and 'replace', got " +
                                    node_kind(item),
          rule.location, rule.index);
    rule.matchable = false;
    return;
  }
  check_keys(item, {"match", "replace", "recursive"}, "a rule", rule);
  if (const auto match = item.find("match")) parse_match(item.value(*match), item.key(*match), rule);
  else {
    error("rule-missing-match", "rule #" + std::to_string(rule.number()) + " has no 'match'", rule.location, rule.index);
    rule.matchable = false;
  }
  if (const auto replace = item.find("replace")) parse_replace(item.value(*replace), item.key(*replace), rule);
  else error("rule-missing-replace", "rule #" + std::to_string(rule.number()) + " has no 'replace'", rule.location, rule.index);

  if (const auto recursive = item.find("recursive")) {
    const YamlNode& value = item.value(*recursive);
    if (const auto flag = yaml_boolean(value)) rule.recursive = *flag;
    else error("type-mismatch", "'recursive' must be true or false, got " + node_kind(value), at(value, rule.location),
               rule.index);
  }
}

void RuleParser::parse_match(const YamlNode& match, const YamlNode& key, Rule& rule) {
  const SourceLocation where = at(match, at(key, rule.location));
  if (!match.is_map()) {
    error("type-mismatch", "'match' must be a mapping with 'name' and/or 'class', got " + node_kind(match), where, rule.index);
    rule.matchable = false;
    return;
  }
  check_keys(match, {"name", "class"}, "'match'", rule);
  const auto name = match.find("name");
  const auto cls = match.find("class");
  if (!name && !cls) {
    error("match-empty", "'match' needs 'name' (a regex) or 'class' (a module class), or both", at(key, where), rule.index);
    rule.matchable = false;
  }
  if (name) {
    const YamlNode& value = match.value(*name);
    rule.name_location = at(value, where);
    if (!value.is_scalar()) {
      error("type-mismatch", "'match.name' must be a regex string, got " + node_kind(value), rule.name_location, rule.index);
      rule.matchable = false;
    } else {
      rule.name_pattern = value.text;
      Regex::CompileError compile_error;
      if (!Regex::compile(*rule.name_pattern, rule.name_regex, compile_error)) {
        SourceLocation location = rule.name_location;
        // Point at the offending character when the pattern sits on one line, unquoted or quoted.
        if (location.column > 0 && compile_error.offset <= value.text.size())
          location.column += static_cast<int>(compile_error.offset) + (value.quoted ? 1 : 0);
        error("regex-compile",
              "regex " + quoted_excerpt(*rule.name_pattern) + " does not compile at offset " +
                  std::to_string(compile_error.offset) + ": " + compile_error.message,
              location, rule.index);
        rule.matchable = false;
      }
    }
  }
  if (cls) {
    const YamlNode& value = match.value(*cls);
    rule.class_location = at(value, where);
    if (!value.is_scalar()) {
      error("type-mismatch", "'match.class' must be a class name, got " + node_kind(value), rule.class_location, rule.index);
      rule.matchable = false;
    } else {
      rule.class_text = value.text;
      rule.match_class = find_module_class(*rule.class_text);
      if (!rule.match_class) {
        if (const ForeignFamily* family = foreign_family_of_module_class(*rule.class_text))
          note_foreign(families_, family->model_type, family->models, *rule.class_text, rule.class_location, rule);
        else
          error("unknown-match-class",
                "unknown module class " + quoted_excerpt(*rule.class_text) +
                    suggestion(*rule.class_text, module_class_spellings()),
                rule.class_location, rule.index);
        rule.matchable = false;
      }
    }
  }
}

void RuleParser::parse_replace(const YamlNode& replace, const YamlNode& key, Rule& rule) {
  rule.replace_location = at(replace, at(key, rule.location));
  if (!replace.is_map()) {
    error("type-mismatch", "'replace' must be a mapping with 'class' and optional 'kwargs', got " + node_kind(replace),
          rule.replace_location, rule.index);
    rule.replacement = find_replacement_class("default");
    return;
  }
  check_keys(replace, {"class", "kwargs"}, "'replace'", rule);
  rule.replacement = find_replacement_class("default");
  if (const auto cls = replace.find("class")) {
    const YamlNode& value = replace.value(*cls);
    rule.replace_location = at(value, rule.replace_location);
    if (!value.is_scalar()) {
      error("type-mismatch", "'replace.class' must be an operator name, got " + node_kind(value), rule.replace_location,
            rule.index);
    } else {
      rule.replace_text = value.text;
      rule.replacement = find_replacement_class(rule.replace_text);
      if (const ForeignFamily* family = rule.replacement ? nullptr : foreign_family_of_replacement(rule.replace_text)) {
        // Written for a family we do not run: the rule places nothing and its kwargs are not judged.
        note_foreign(families_, family->model_type, family->models, rule.replace_text, rule.replace_location, rule);
        rule.matchable = false;
      } else if (!rule.replacement) {
        error("unknown-class",
              "unknown replacement class " + quoted_excerpt(rule.replace_text) +
                  suggestion(rule.replace_text, replacement_class_spellings()),
              rule.replace_location, rule.index);
      }
    }
  }
  if (const auto kwargs = replace.find("kwargs")) parse_kwargs(replace.value(*kwargs), rule);
  if (rule.generate_op == "None" && rule.prefill_op == "None")
    error("no-op",
          "generate_op and prefill_op are both None, so " + rule.op().name +
              " would run in neither phase; give one of them an op (" + join(rule.op().op_spellings(), ", ") + ")",
          rule.kwarg_location("prefill_op"), rule.index);
}

void RuleParser::parse_kwargs(const YamlNode& kwargs, Rule& rule) {
  if (kwargs.is_null()) return;
  if (!kwargs.is_map()) {
    error("type-mismatch", "'kwargs' must be a mapping, got " + node_kind(kwargs), at(kwargs, rule.replace_location),
          rule.index);
    return;
  }
  rule.kwargs = to_json(kwargs);
  for (std::size_t pair = 0; pair < kwargs.size() && !give_up(); ++pair) {
    const std::string& name = key_name(kwargs.key(pair));
    rule.kwarg_locations[name] = at(kwargs.key(pair), rule.replace_location);
    check_kwarg(name, kwargs.value(pair), rule);
  }
}

std::optional<Device> RuleParser::device_value(const std::string& key, const YamlNode& value, Rule& rule) {
  const SourceLocation where = at(value, rule.kwarg_location(key));
  if (value.is_scalar()) {
    if (const auto device = parse_device(value.text)) return device;
    if (const std::string kind = foreign_device_kind(value.text); !kind.empty()) {
      note_foreign(devices_, kind, foreign_device_description(value.text), value.text, where, rule);
      return std::nullopt;
    }
  }
  error("bad-device", "'" + key + "' is " + node_kind(value) + ", which is not a device; write cpu or cuda:N", where,
        rule.index);
  return std::nullopt;
}

void RuleParser::check_kwarg(const std::string& name, const YamlNode& value, Rule& rule) {
  if (!rule.replacement) return;  // unknown class: its kwargs cannot be judged
  const OperatorInfo& op = *rule.replacement->op;
  const SourceLocation key_location = rule.kwarg_location(name);
  const KwargSpec* spec = op.find_kwarg(name);
  if (!spec) {
    error("unknown-kwarg",
          "operator " + op.name + " (" + rule.replace_text + ") takes no kwarg " + quoted_excerpt(name) +
              suggestion(name, op.kwarg_names()) + "; it takes: " + join(op.kwarg_names(), ", "),
          key_location, rule.index);
    return;
  }
  const SourceLocation where = at(value, key_location);
  switch (spec->type) {
    case KwargType::device: {
      const auto device = device_value(name, value, rule);
      if (name == "generate_device") rule.generate_device = device;
      else if (name == "prefill_device") rule.prefill_device = device;
      // Only an operator that hands its output over acts on out_device (KwargSpec::honoured).
      else if (name == "out_device" && op.has_out_device) rule.out_device = device;
      break;
    }
    case KwargType::op: {
      // ktransformers writes None (a string to YAML) where it means no op, as YAML's null does.
      if (value.is_null() || (value.kind == YamlKind::string && value.text == "None")) {
        (name == "generate_op" ? rule.generate_op : rule.prefill_op) = "None";
        break;
      }
      const OpInfo* found = value.is_scalar() ? op.find_op(value.text) : nullptr;
      if (!found) {
        error("unknown-op",
              "'" + name + "' of " + op.name + " is " + node_kind(value) + ", which is not an op of it" +
                  (value.is_scalar() ? suggestion(value.text, op.op_spellings()) : std::string()) +
                  "; ops: " + join(op.op_spellings(), ", "),
              where, rule.index);
        break;
      }
      (name == "generate_op" ? rule.generate_op : rule.prefill_op) = found->name;
      break;
    }
    case KwargType::integer: check_integer(name, *spec, value, rule); break;
    case KwargType::boolean:
      if (!yaml_boolean(value))
        error("type-mismatch", "'" + name + "' must be true or false, got " + node_kind(value), where, rule.index);
      break;
    case KwargType::string:
      if (!value.is_scalar())
        error("type-mismatch", "'" + name + "' must be a string, got " + node_kind(value), where, rule.index);
      break;
    case KwargType::choice:
      if (!value.is_scalar() || std::find(spec->choices.begin(), spec->choices.end(), value.text) == spec->choices.end())
        error("bad-kwarg-value",
              "'" + name + "' is " + node_kind(value) +
                  (value.is_scalar() ? suggestion(value.text, spec->choices) : std::string()) +
                  "; expected one of: " + join(spec->choices, ", "),
              where, rule.index);
      break;
    case KwargType::transfer_map: parse_transfer_map(value, rule); break;
  }
}

void RuleParser::check_integer(const std::string& name, const KwargSpec& spec, const YamlNode& value, Rule& rule) {
  const SourceLocation where = at(value, rule.kwarg_location(name));
  const auto integer = yaml_integer(value);
  if (!integer) {
    error("type-mismatch", "'" + name + "' must be an integer, got " + node_kind(value) + why_not_an_integer(value), where,
          rule.index);
    return;
  }
  if (integer->out_of_range || integer->value < spec.min_value || integer->value > spec.max_value) {
    error("kwarg-out-of-range",
          "'" + name + "' is " + quoted_excerpt(value.text) + ", out of range: it must be " + range_text(spec) + " (" +
              spec.help + ")",
          where, rule.index);
    return;
  }
  if (integer->octal)
    warning("octal-integer",
            "'" + name + "' value " + quoted_excerpt(value.text) + " " + octal_note(value.text, integer->value), where,
            rule.index);
}

void RuleParser::parse_transfer_map(const YamlNode& value, Rule& rule) {
  rule.has_transfer_map = true;
  if (value.is_null()) return;
  if (!value.is_map()) {
    error("type-mismatch", "'transfer_map' must map layer numbers to devices (15: \"cuda:1\"), got " + node_kind(value),
          at(value, rule.kwarg_location("transfer_map")), rule.index);
    return;
  }
  constexpr long long kMaxLayer = 1'000'000;
  std::unordered_map<long long, SourceLocation> seen;  // layer -> its first key
  for (std::size_t pair = 0; pair < value.size() && !give_up(); ++pair) {
    const YamlNode& key = value.key(pair);
    const SourceLocation where = at(key, rule.kwarg_location("transfer_map"));
    const auto layer = yaml_integer(key);
    if (!layer || layer->out_of_range || layer->value < 0 || layer->value > kMaxLayer) {
      error("type-mismatch",
            "transfer_map key " + node_kind(key) + " must be a layer number (0 to " + std::to_string(kMaxLayer) + ")" +
                why_not_an_integer(key),
            where, rule.index);
      continue;
    }
    const auto [first, inserted] = seen.try_emplace(layer->value, where);
    if (!inserted) {
      error("transfer-map-duplicate",
            "transfer_map names layer " + std::to_string(layer->value) + " twice (first at line " +
                std::to_string(first->second.line) + ")",
            where, rule.index);
      continue;
    }
    if (layer->octal)
      warning("octal-integer", "transfer_map key " + quoted_excerpt(key.text) + " " + octal_note(key.text, layer->value),
              where, rule.index);
    const auto device = device_value("transfer_map[" + std::to_string(layer->value) + "]", value.value(pair), rule);
    if (device) rule.transfer_map.push_back(TransferMapEntry{static_cast<int>(layer->value), *device, where});
  }
  std::sort(rule.transfer_map.begin(), rule.transfer_map.end(),
            [](const TransferMapEntry& a, const TransferMapEntry& b) { return a.layer < b.layer; });
}

void RuleParser::note_foreign(std::vector<ForeignUse>& uses, const std::string& what, const std::string& description,
                              const std::string& text, const SourceLocation& where, const Rule& rule) {
  auto use = std::find_if(uses.begin(), uses.end(), [&](const ForeignUse& u) { return u.what == what; });
  if (use == uses.end()) use = uses.insert(uses.end(), ForeignUse{what, description, text, where, rule.index, -1, 0, 0});
  ++use->places;
  if (use->last_rule != rule.index) ++use->rules;
  use->last_rule = rule.index;
}

// One error per family and per device kind, at its first mention; the rules that name them place
// nothing, and the plan is not validated.
void RuleParser::report_foreign(RuleSet& set) {
  for (const ForeignUse& use : families_)
    diagnostics_.error("profile-family-unsupported",
                       "this profile is written for " + use.description + ", model_type " + use.what +
                           ", which Switchyard does not run yet: rule #" + std::to_string(use.first_rule + 1) +
                           " names " + quoted_excerpt(use.first_text) +
                           (use.rules == 2 ? ", and 1 more rule names its classes" : "") +
                           (use.rules > 2 ? ", and " + std::to_string(use.rules - 1) + " more rules name its classes" : "") +
                           ". Switchyard runs " + join(families_switchyard_runs(), ", ") +
                           "; use a profile written for one of those",
                       use.first, use.first_rule);
  for (const ForeignUse& use : devices_)
    diagnostics_.error("unsupported-device",
                       quoted_excerpt(use.first_text) + " is " + use.description +
                           ", which Switchyard does not run: it runs on cpu and cuda:N" +
                           (use.places > 1 ? " (this profile names " + use.what + " devices in " +
                                                 std::to_string(use.places) + " places; this is the first)"
                                           : "") +
                           ". Use a profile written for CUDA GPUs or the CPU",
                       use.first, use.first_rule);
  set.for_unsupported_target = !families_.empty() || !devices_.empty();
}

RuleSet parse_rules(std::string_view text, const std::string& file_name, Diagnostics& diagnostics, int first_index) {
  return RuleParser(file_name, diagnostics, first_index).parse(text);
}

RuleSet load_rules(const std::filesystem::path& file, Diagnostics& diagnostics, int first_index) {
  // Only a regular file, at most kMaxProfileBytes: a FIFO, a device (/dev/zero), a directory or a
  // read error is an InputError that says so, never a hang or an "empty profile".
  const std::string text = read_input_file(file, "profile", kMaxProfileBytes);
  return parse_rules(text, file.string(), diagnostics, first_index);
}

}  // namespace switchyard
