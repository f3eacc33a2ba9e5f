#include "placement/rule_yaml.h"

#include <algorithm>
#include <cctype>

#include "placement/yaml_scalars.h"

namespace switchyard {
namespace {

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A key as written: plain where it is a word (every kwarg ktransformers knows), else quoted.
std::string key_yaml(const std::string& key) {
  const bool word = !key.empty() && (std::isalpha(static_cast<unsigned char>(key[0])) != 0 || key[0] == '_') &&
                    std::all_of(key.begin(), key.end(), [](unsigned char c) { return std::isalnum(c) != 0 || c == '_'; });
  return word ? key : yaml_quote(key);
}

// A kwarg's value: strings quoted for YAML; other values in JSON's spelling, which YAML's flow
// style reads the same (numbers, true/false, null, lists, maps).
std::string value_yaml(const nlohmann::ordered_json& value) {
  if (value.is_string()) return yaml_quote(value.get<std::string>());
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

std::string rule_yaml(const Rule& rule) {
  std::string out;
  if (!rule.origin.empty()) out += "# command line: " + rule.origin + "\n";
  out += "- match:\n";
  if (rule.name_pattern) out += "    name: " + yaml_quote(*rule.name_pattern) + "\n";
  if (rule.class_text) out += "    class: " + yaml_quote(*rule.class_text) + "\n";
  out += "  replace:\n    class: " + yaml_quote(rule.replace_text) + "\n";
  if (!rule.kwargs.empty()) {
    out += "    kwargs:\n";
    for (const auto& entry : rule.kwargs.items()) {
      const nlohmann::ordered_json& value = entry.value();
      if (entry.key() == "transfer_map" && value.is_object() && !value.empty()) {
        out += "      transfer_map:\n";
        for (const auto& layer : value.items())
          out += "        " + (all_digits(layer.key()) ? layer.key() : yaml_quote(layer.key())) + ": " +
                 value_yaml(layer.value()) + "\n";
      } else {
        out += "      " + key_yaml(entry.key()) + ": " + value_yaml(value) + "\n";
      }
    }
  }
  if (!rule.recursive) out += "  recursive: False\n";
  return out;
}

}  // namespace switchyard
