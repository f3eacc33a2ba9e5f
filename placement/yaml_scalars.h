#pragma once
// YAML 1.1 scalars as PyYAML (which ktransformers uses) reads them (yaml/resolver.py and
// yaml/constructor.py), so that a plain value in a profile means here what it means there: 010 is
// 8, 0x1f is 31, 1:30 is 90, yes and off are booleans, 1e3 is a string (no dot), 1.5 a float.
#include <optional>
#include <string>
#include <string_view>

namespace switchyard {

// A YAML 1.1 integer: optional sign, then decimal, 0-prefixed octal, 0x hex, 0b binary or
// sexagesimal 1:30 (= 90), with underscores after the first digit ignored.
struct YamlInteger {
  long long value = 0;
  bool out_of_range = false;  // beyond 64 bits (PyYAML's integers have no bound); `value` is then 0
  bool octal = false;         // a leading 0 made it octal and changed its value: 010 is 8
};
// nullopt when `text` is not a YAML 1.1 integer.
std::optional<YamlInteger> parse_yaml_integer(std::string_view text);

// True when `text` is a YAML 1.1 float: 1.5, 1., .5, 1.5e+3 (the exponent needs a sign and the
// mantissa a dot), 1:30.5, .inf, -.inf, .nan.
bool is_yaml_float(std::string_view text);
// The value of a float (or of an integer written as one, for !!float), when it is finite: JSON
// has no inf or nan.
std::optional<double> yaml_float_value(std::string_view text);

// yes/no, true/false, on/off: in the three spellings PyYAML resolves implicitly (yes, Yes, YES),
// or in any case, as the !!bool tag takes them.
// `text` as a YAML double-quoted scalar (backslashes and quotes escaped), for writers of profiles.
std::string yaml_quote(const std::string& text);

std::optional<bool> parse_yaml_bool(std::string_view text, bool any_case = false);

}  // namespace switchyard
