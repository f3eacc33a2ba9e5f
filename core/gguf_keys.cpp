#include "core/gguf_keys.h"

#include <cmath>

#include "core/error.h"

namespace switchyard {

GgufKeys::GgufKeys(const nlohmann::json& keys, std::string architecture, std::string source,
                   std::function<bool(std::string_view)> has_tensor)
    : keys_(keys), architecture_(std::move(architecture)), source_(std::move(source)), has_tensor_(std::move(has_tensor)) {}

const nlohmann::json* GgufKeys::find(std::string_view key) const {
  const auto it = keys_.find(std::string(key));
  return it == keys_.end() ? nullptr : &*it;
}

bool GgufKeys::has(std::string_view key) const { return find(key) != nullptr; }

void GgufKeys::fail(std::string_view key, const std::string& what) const {
  throw InputError(source_ + ": GGUF key " + architecture_ + "." + std::string(key) + " " + what);
}

std::int64_t GgufKeys::integer(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (!value) fail(key, "is missing; llama.cpp's converter writes it for this architecture");
  if (!value->is_number_integer()) fail(key, "is " + std::string(value->type_name()) + ", not an integer");
  return value->get<std::int64_t>();
}

std::int64_t GgufKeys::integer_or(std::string_view key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

double GgufKeys::number(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (!value) fail(key, "is missing; llama.cpp's converter writes it for this architecture");
  if (!value->is_number()) fail(key, "is " + std::string(value->type_name()) + ", not a number");
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
  fail(key, "is " + value->dump() + ", not a bool");
}

std::optional<std::string> GgufKeys::string(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_string()) fail(key, "is " + std::string(value->type_name()) + ", not a string");
  return value->get<std::string>();
}

}  // namespace switchyard
