#include "core/config_fields.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"

namespace switchyard {

using nlohmann::json;

std::string NumberRange::text() const {
  char out[64];
  std::snprintf(out, sizeof out, "%c%g, %g]", low_inclusive ? '[' : '(', low, high);
  return out;
}

void fail_field(const std::string& source, const std::string& key, const std::string& what) {
  throw InputError(source + ": field '" + key + "' " + what, kExitBadContent);
}

bool ConfigFields::has(const std::string& key) const { return object_.contains(key) && !object_.at(key).is_null(); }

const json& ConfigFields::at(const std::string& key) const { return object_.at(key); }

std::int64_t ConfigFields::integer(const std::string& key, std::int64_t low, std::int64_t high) const {
  if (!has(key)) fail(key, "is missing");
  const json& value = at(key);
  if (!value.is_number_integer()) fail(key, "must be an integer, got " + json_excerpt(value));
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(high))
    fail(key, "is " + json_excerpt(value) + ", outside [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  const std::int64_t v = value.get<std::int64_t>();
  if (v < low || v > high)
    fail(key, "is " + std::to_string(v) + ", outside [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  return v;
}

std::int64_t ConfigFields::integer_or(const std::string& key, std::int64_t fallback, std::int64_t low,
                                      std::int64_t high) const {
  return has(key) ? integer(key, low, high) : fallback;
}

double ConfigFields::number_or(const std::string& key, double fallback, const NumberRange& range) const {
  if (!has(key)) return fallback;
  if (!at(key).is_number()) fail(key, "must be a number, got " + json_excerpt(at(key)));
  const double v = at(key).get<double>();
  if (!range.contains(v)) fail(key, "is " + json_excerpt(at(key)) + ", outside " + range.text());
  return v;
}

bool ConfigFields::boolean_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!at(key).is_boolean()) fail(key, "must be true or false, got " + json_excerpt(at(key)));
  return at(key).get<bool>();
}

std::string ConfigFields::string_or(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!at(key).is_string()) fail(key, "must be a string, got " + json_excerpt(at(key)));
  return at(key).get<std::string>();
}

std::vector<int> ConfigFields::layer_list(const std::string& key, int num_layers) const {
  const json& layers = at(key);
  if (!layers.is_array()) fail(key, "must be a list of layer numbers");
  std::vector<int> out;
  for (const json& layer : layers) {
    if (!layer.is_number_integer()) fail(key, "must hold integers, got " + json_excerpt(layer));
    // JSON keeps non-negative integers unsigned, and they may pass int64's range.
    const bool in_range = layer.is_number_unsigned()
                              ? layer.get<std::uint64_t>() < static_cast<std::uint64_t>(num_layers)
                              : layer.get<std::int64_t>() >= 0 && layer.get<std::int64_t>() < num_layers;
    if (!in_range)
      fail(key, "holds " + json_excerpt(layer) + "; layer numbers are in [0, num_hidden_layers = " +
                    std::to_string(num_layers) + ")");
    out.push_back(static_cast<int>(layer.get<std::int64_t>()));
  }
  return out;
}

}  // namespace switchyard
