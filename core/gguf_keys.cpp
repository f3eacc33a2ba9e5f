#include "core/gguf_keys.h"

#include <cmath>

#include "core/error.h"
#include "core/text.h"

namespace switchyard {

std::string gguf_value_text(const nlohmann::json& value) {
  if (value.is_object()) return value.value("gguf_type", std::string("a value of no known type"));
  if (value.is_string()) return "a string (" + quoted_excerpt(value.get_ref<const std::string&>()) + ")";
  if (value.is_boolean()) return std::string("a bool (") + (value.get<bool>() ? "true" : "false") + ")";
  if (value.is_number_integer()) return "an integer (" + value.dump() + ")";
  if (value.is_number()) return "a float (" + value.dump() + ")";
  return "a " + std::string(value.type_name());
}

GgufKeys::GgufKeys(const nlohmann::json& keys, std::string architecture, std::string source,
                   std::function<bool(std::string_view)> has_tensor)
    : keys_(keys), architecture_(std::move(architecture)), source_(std::move(source)), has_tensor_(std::move(has_tensor)) {}

const nlohmann::json* GgufKeys::find(std::string_view key) const {
  const auto it = keys_.find(std::string(key));
  return it == keys_.end() ? nullptr : &*it;
}

bool GgufKeys::has(std::string_view key) const { return find(key) != nullptr; }

void GgufKeys::fail(std::string_view key, const std::string& what) const {
  // The architecture is one a family names (gguf_model_config checks it first), the key ours.
  throw InputError(source_ + ": GGUF key " + architecture_ + "." + std::string(key) + " " + what, kExitBadContent);
}

void GgufKeys::wrong_type(std::string_view key, const nlohmann::json& value, const char* expected) const {
  fail(key, "is " + gguf_value_text(value) + ", but " + expected + " is expected");
}

std::int64_t GgufKeys::integer(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (!value) fail(key, "is missing; llama.cpp's converter writes it for this architecture");
  if (!value->is_number_integer()) wrong_type(key, *value, "an integer");
  return value->get<std::int64_t>();
}

std::int64_t GgufKeys::integer(std::string_view key, std::int64_t low, std::int64_t high) const {
  const std::int64_t n = integer(key);
  if (n < low || n > high)
    fail(key, "is " + std::to_string(n) + "; it must be from " + std::to_string(low) + " to " + std::to_string(high));
  return n;
}

std::int64_t GgufKeys::integer_or(std::string_view key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

std::int64_t GgufKeys::integer_or(std::string_view key, std::int64_t fallback, std::int64_t low, std::int64_t high) const {
  return has(key) ? integer(key, low, high) : fallback;
}

std::int64_t GgufKeys::choice_or(std::string_view key, std::int64_t fallback, std::initializer_list<GgufKeyChoice> valid) const {
  if (!has(key)) return fallback;
  const std::int64_t n = integer(key);
  std::string listed;
  for (const GgufKeyChoice& c : valid) {
    if (c.value == n) return n;
    listed += (listed.empty() ? "" : ", ") + std::to_string(c.value) + " (" + c.meaning + ")";
  }
  fail(key, "is " + std::to_string(n) + ", not a value Switchyard runs; valid: " + listed);
}

double GgufKeys::number(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (!value) fail(key, "is missing; llama.cpp's converter writes it for this architecture");
  if (!value->is_number()) wrong_type(key, *value, "a number");
  const double number = value->get<double>();
  if (!std::isfinite(number)) fail(key, "is not finite");
  return number;
}

double GgufKeys::number_or(std::string_view key, double fallback) const { return has(key) ? number(key) : fallback; }

bool GgufKeys::flag_or(std::string_view key, bool fallback) const {
  const nlohmann::json* value = find(key);
  if (!value) return fallback;
  if (value->is_boolean()) return value->get<bool>();
  if (value->is_number_integer() && (value->get<std::int64_t>() == 0 || value->get<std::int64_t>() == 1))
    return value->get<std::int64_t>() == 1;
  wrong_type(key, *value, "a bool");
}

std::optional<std::string> GgufKeys::string(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_string()) wrong_type(key, *value, "a string");
  return value->get<std::string>();
}

}  // namespace switchyard
