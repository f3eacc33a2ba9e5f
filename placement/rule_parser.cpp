// Reads ktransformers optimize-rule YAML into a RuleSet. What a rule means is decided elsewhere
// (placement_plan.cpp); here every key and value is checked for shape and type, with its position.
#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "core/text.h"
#include "placement/rule_set.h"

namespace switchyard {
namespace {

using ordered_json = nlohmann::ordered_json;

class RuleParser {
 public:
  RuleParser(std::string file, Diagnostics& diagnostics) : file_(std::move(file)), diagnostics_(diagnostics) {}

  RuleSet parse(std::string_view text);

 private:
  SourceLocation at(const YAML::Node& node, const SourceLocation& fallback = {}) const {
    const YAML::Mark mark = node.Mark();
    if (mark.line < 0) return fallback.file.empty() ? SourceLocation{file_, 0, 0} : fallback;
    return SourceLocation{file_, mark.line + 1, mark.column + 1};
  }
  void error(std::string code, std::string message, SourceLocation location, int rule) {
    diagnostics_.error(std::move(code), std::move(message), std::move(location), rule);
  }

  void parse_rule(const YAML::Node& item, Rule& rule);
  void parse_match(const YAML::Node& match, const YAML::Node& key, Rule& rule);
  void parse_replace(const YAML::Node& replace, const YAML::Node& key, Rule& rule);
  void parse_kwargs(const YAML::Node& kwargs, Rule& rule);
  void check_kwarg(const std::string& name, const YAML::Node& value, Rule& rule);
  std::optional<Device> device_value(const std::string& key, const YAML::Node& value, Rule& rule);
  void parse_transfer_map(const YAML::Node& value, Rule& rule);
  bool check_keys(const YAML::Node& map, std::initializer_list<const char*> allowed, const char* where, Rule& rule);

  std::string file_;
  Diagnostics& diagnostics_;
};

std::string node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "'";
    case YAML::NodeType::Null: return "nothing";
    default: return "an undefined value";
  }
}

bool is_quoted(const YAML::Node& node) { return node.Tag() == "!"; }

// YAML 1.1 booleans, as PyYAML (which ktransformers uses) reads them.
std::optional<bool> yaml_bool(const YAML::Node& node) {
  if (!node.IsScalar() || is_quoted(node)) return std::nullopt;
  static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const std::set<std::string> no = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  if (yes.count(node.Scalar())) return true;
  if (no.count(node.Scalar())) return false;
  return std::nullopt;
}

std::optional<long long> yaml_int(const YAML::Node& node) {
  if (!node.IsScalar() || is_quoted(node)) return std::nullopt;
  const std::string& s = node.Scalar();
  long long value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

// The kwargs as written, for reports: numbers and booleans keep their YAML type.
ordered_json to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      ordered_json object = ordered_json::object();
      for (const auto& kv : node) object[kv.first.IsScalar() ? kv.first.Scalar() : "?"] = to_json(kv.second);
      return object;
    }
    case YAML::NodeType::Sequence: {
      ordered_json array = ordered_json::array();
      for (const auto& item : node) array.push_back(to_json(item));
      return array;
    }
    case YAML::NodeType::Scalar: {
      if (is_quoted(node)) return node.Scalar();
      if (const auto i = yaml_int(node)) return *i;
      if (const auto b = yaml_bool(node)) return *b;
      const std::string& s = node.Scalar();
      if (s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
      double d = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
      if (ec == std::errc() && end == s.data() + s.size()) return d;
      return s;
    }
    default: return nullptr;
  }
}

}  // namespace

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

bool RuleParser::check_keys(const YAML::Node& map, std::initializer_list<const char*> allowed, const char* where,
                            Rule& rule) {
  const std::vector<std::string> names(allowed.begin(), allowed.end());
  bool ok = true;
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    if (std::find(names.begin(), names.end(), key) != names.end()) continue;
    error("unknown-key",
          "unknown key '" + key + "' in " + where + did_you_mean(key, names) + "; allowed: " + join(names, ", "),
          at(kv.first), rule.index);
    ok = false;
  }
  return ok;
}

RuleSet RuleParser::parse(std::string_view text) {
  RuleSet set;
  set.file = file_;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    diagnostics_.error("yaml-syntax", "YAML syntax error: " + e.msg,
                       SourceLocation{file_, e.mark.line + 1, e.mark.column + 1});
    return set;
  } catch (const YAML::Exception& e) {
    diagnostics_.error("yaml-syntax", std::string("cannot read YAML: ") + e.what(), SourceLocation{file_, 0, 0});
    return set;
  }
  if (!root || root.IsNull()) {
    diagnostics_.error("empty-profile", "the profile is empty; it must be a YAML list of rules ('- match: ...')",
                       SourceLocation{file_, 0, 0});
    return set;
  }
  if (!root.IsSequence()) {
    diagnostics_.error("not-a-list",
                       "a profile is a YAML list of rules ('- match: ...'), but this file holds " + node_kind(root),
                       at(root));
    return set;
  }
  if (root.size() == 0)
    diagnostics_.error("empty-profile", "the profile is an empty list; add rules ('- match: ...')", at(root));
  int index = 0;
  for (const YAML::Node& item : root) {
    Rule& rule = set.rules.emplace_back();
    rule.index = index++;
    rule.location = at(item, at(root));
    parse_rule(item, rule);
  }
  return set;
}

void RuleParser::parse_rule(const YAML::Node& item, Rule& rule) {
  if (!item.IsMap()) {
    error("rule-not-a-mapping", "rule #" + std::to_string(rule.index) + " must be a mapping with 'match' and 'replace', got " +
                                    node_kind(item),
          rule.location, rule.index);
    rule.matchable = false;
    return;
  }
  check_keys(item, {"match", "replace", "recursive"}, "a rule", rule);
  YAML::Node match_key, replace_key;
  for (const auto& kv : item) {
    if (!kv.first.IsScalar()) continue;
    if (kv.first.Scalar() == "match") match_key = kv.first;
    if (kv.first.Scalar() == "replace") replace_key = kv.first;
  }
  if (item["match"]) parse_match(item["match"], match_key, rule);
  else {
    error("rule-missing-match", "rule #" + std::to_string(rule.index) + " has no 'match'", rule.location, rule.index);
    rule.matchable = false;
  }
  if (item["replace"]) parse_replace(item["replace"], replace_key, rule);
  else error("rule-missing-replace", "rule #" + std::to_string(rule.index) + " has no 'replace'", rule.location, rule.index);

  if (const YAML::Node recursive = item["recursive"]) {
    if (const auto value = yaml_bool(recursive)) rule.recursive = *value;
    else error("type-mismatch", "'recursive' must be true or false, got " + node_kind(recursive), at(recursive, rule.location),
               rule.index);
  }
}

void RuleParser::parse_match(const YAML::Node& match, const YAML::Node& key, Rule& rule) {
  const SourceLocation where = at(match, at(key, rule.location));
  if (!match.IsMap()) {
    error("type-mismatch", "'match' must be a mapping with 'name' and/or 'class', got " + node_kind(match), where, rule.index);
    rule.matchable = false;
    return;
  }
  check_keys(match, {"name", "class"}, "'match'", rule);
  const YAML::Node name = match["name"];
  const YAML::Node cls = match["class"];
  if (!name && !cls) {
    error("match-empty", "'match' needs 'name' (a regex) or 'class' (a module class), or both", at(key, where), rule.index);
    rule.matchable = false;
  }
  if (name) {
    rule.name_location = at(name, where);
    if (!name.IsScalar()) {
      error("type-mismatch", "'match.name' must be a regex string, got " + node_kind(name), rule.name_location, rule.index);
      rule.matchable = false;
    } else {
      rule.name_pattern = name.Scalar();
      Regex::CompileError compile_error;
      if (!Regex::compile(*rule.name_pattern, rule.name_regex, compile_error)) {
        SourceLocation location = rule.name_location;
        // Point at the offending character when the pattern sits on one line, unquoted or quoted.
        if (location.column > 0) location.column += static_cast<int>(compile_error.offset) + (is_quoted(name) ? 1 : 0);
        error("regex-compile",
              "regex '" + *rule.name_pattern + "' does not compile at offset " + std::to_string(compile_error.offset) +
                  ": " + compile_error.message,
              location, rule.index);
        rule.matchable = false;
      }
    }
  }
  if (cls) {
    rule.class_location = at(cls, where);
    if (!cls.IsScalar()) {
      error("type-mismatch", "'match.class' must be a class name, got " + node_kind(cls), rule.class_location, rule.index);
      rule.matchable = false;
    } else {
      rule.class_text = cls.Scalar();
      rule.match_class = find_module_class(*rule.class_text);
      if (!rule.match_class) {
        error("unknown-match-class",
              "unknown module class '" + *rule.class_text + "'" + did_you_mean(*rule.class_text, module_class_spellings()),
              rule.class_location, rule.index);
        rule.matchable = false;
      }
    }
  }
}

void RuleParser::parse_replace(const YAML::Node& replace, const YAML::Node& key, Rule& rule) {
  rule.replace_location = at(replace, at(key, rule.location));
  if (!replace.IsMap()) {
    error("type-mismatch", "'replace' must be a mapping with 'class' and optional 'kwargs', got " + node_kind(replace),
          rule.replace_location, rule.index);
    rule.replacement = find_replacement_class("default");
    return;
  }
  check_keys(replace, {"class", "kwargs"}, "'replace'", rule);
  rule.replacement = find_replacement_class("default");
  if (const YAML::Node cls = replace["class"]) {
    rule.replace_location = at(cls, rule.replace_location);
    if (!cls.IsScalar()) {
      error("type-mismatch", "'replace.class' must be an operator name, got " + node_kind(cls), rule.replace_location,
            rule.index);
    } else {
      rule.replace_text = cls.Scalar();
      rule.replacement = find_replacement_class(rule.replace_text);
      if (!rule.replacement)
        error("unknown-class",
              "unknown replacement class '" + rule.replace_text + "'" +
                  did_you_mean(rule.replace_text, replacement_class_spellings()),
              rule.replace_location, rule.index);
    }
  }
  if (const YAML::Node kwargs = replace["kwargs"]) parse_kwargs(kwargs, rule);
}

void RuleParser::parse_kwargs(const YAML::Node& kwargs, Rule& rule) {
  if (kwargs.IsNull()) return;
  if (!kwargs.IsMap()) {
    error("type-mismatch", "'kwargs' must be a mapping, got " + node_kind(kwargs), at(kwargs, rule.replace_location),
          rule.index);
    return;
  }
  rule.kwargs = to_json(kwargs);
  for (const auto& kv : kwargs) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    rule.kwarg_locations[name] = at(kv.first, rule.replace_location);
    check_kwarg(name, kv.second, rule);
  }
}

std::optional<Device> RuleParser::device_value(const std::string& key, const YAML::Node& value, Rule& rule) {
  const SourceLocation where = at(value, rule.kwarg_location(key));
  if (value.IsScalar()) {
    if (const auto device = parse_device(value.Scalar())) return device;
  }
  error("bad-device", "'" + key + "' is " + node_kind(value) + ", which is not a device; write cpu or cuda:N", where,
        rule.index);
  return std::nullopt;
}

void RuleParser::check_kwarg(const std::string& name, const YAML::Node& value, Rule& rule) {
  if (!rule.replacement) return;  // unknown class: its kwargs cannot be judged
  const OperatorInfo& op = *rule.replacement->op;
  const SourceLocation key_location = rule.kwarg_location(name);
  const KwargSpec* spec = op.find_kwarg(name);
  if (!spec) {
    error("unknown-kwarg",
          "operator " + op.name + " (" + rule.replace_text + ") takes no kwarg '" + name + "'" +
              did_you_mean(name, op.kwarg_names()) + "; it takes: " + join(op.kwarg_names(), ", "),
          key_location, rule.index);
    return;
  }
  const SourceLocation where = at(value, key_location);
  switch (spec->type) {
    case KwargType::device: {
      const auto device = device_value(name, value, rule);
      if (name == "generate_device") rule.generate_device = device;
      else if (name == "prefill_device") rule.prefill_device = device;
      else if (name == "out_device") rule.out_device = device;
      break;
    }
    case KwargType::op: {
      if (value.IsNull() || (value.IsScalar() && !is_quoted(value) && value.Scalar() == "~")) {
        (name == "generate_op" ? rule.generate_op : rule.prefill_op) = "None";
        break;
      }
      const OpInfo* found = value.IsScalar() ? op.find_op(value.Scalar()) : nullptr;
      if (!found) {
        const std::string text = value.IsScalar() ? value.Scalar() : node_kind(value);
        error("unknown-op",
              "'" + name + "' of " + op.name + " is '" + text + "', which is not an op of it" +
                  did_you_mean(text, op.op_spellings()) + "; ops: " + join(op.op_spellings(), ", "),
              where, rule.index);
        break;
      }
      (name == "generate_op" ? rule.generate_op : rule.prefill_op) = found->name;
      break;
    }
    case KwargType::integer:
      if (!yaml_int(value)) error("type-mismatch", "'" + name + "' must be an integer, got " + node_kind(value), where, rule.index);
      break;
    case KwargType::boolean:
      if (!yaml_bool(value)) error("type-mismatch", "'" + name + "' must be true or false, got " + node_kind(value), where, rule.index);
      break;
    case KwargType::string:
      if (!value.IsScalar()) error("type-mismatch", "'" + name + "' must be a string, got " + node_kind(value), where, rule.index);
      break;
    case KwargType::choice:
      if (!value.IsScalar() || std::find(spec->choices.begin(), spec->choices.end(), value.Scalar()) == spec->choices.end())
        error("bad-kwarg-value",
              "'" + name + "' is " + node_kind(value) +
                  (value.IsScalar() ? did_you_mean(value.Scalar(), spec->choices) : std::string()) +
                  "; expected one of: " + join(spec->choices, ", "),
              where, rule.index);
      break;
    case KwargType::transfer_map: parse_transfer_map(value, rule); break;
  }
}

void RuleParser::parse_transfer_map(const YAML::Node& value, Rule& rule) {
  rule.has_transfer_map = true;
  if (value.IsNull()) return;
  if (!value.IsMap()) {
    error("type-mismatch", "'transfer_map' must map layer numbers to devices (15: \"cuda:1\"), got " + node_kind(value),
          at(value, rule.kwarg_location("transfer_map")), rule.index);
    return;
  }
  for (const auto& kv : value) {
    const SourceLocation where = at(kv.first, rule.kwarg_location("transfer_map"));
    const auto layer = yaml_int(kv.first);
    if (!layer || *layer < 0 || *layer > 1'000'000) {
      error("type-mismatch", "transfer_map key " + node_kind(kv.first) + " must be a layer number", where, rule.index);
      continue;
    }
    if (std::any_of(rule.transfer_map.begin(), rule.transfer_map.end(),
                    [&](const TransferMapEntry& e) { return e.layer == *layer; })) {
      error("transfer-map-duplicate", "transfer_map names layer " + std::to_string(*layer) + " twice", where, rule.index);
      continue;
    }
    const auto device = device_value("transfer_map[" + std::to_string(*layer) + "]", kv.second, rule);
    if (device) rule.transfer_map.push_back(TransferMapEntry{static_cast<int>(*layer), *device, where});
  }
  std::sort(rule.transfer_map.begin(), rule.transfer_map.end(),
            [](const TransferMapEntry& a, const TransferMapEntry& b) { return a.layer < b.layer; });
}

RuleSet parse_rules(std::string_view text, const std::string& file_name, Diagnostics& diagnostics) {
  return RuleParser(file_name, diagnostics).parse(text);
}

RuleSet load_rules(const std::filesystem::path& file, Diagnostics& diagnostics) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw InputError(file.string() + ": is a directory, not a profile");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file.string() + ": cannot open the profile (does it exist?)");
  std::stringstream text;
  text << in.rdbuf();
  return parse_rules(text.str(), file.string(), diagnostics);
}

}  // namespace switchyard
