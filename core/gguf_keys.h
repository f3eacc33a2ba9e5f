#pragma once
// GgufKeys: one architecture's metadata keys of a GGUF file ("expert_count" for
// "deepseek2.expert_count"), read by a family's GGUF reader (core/model_family.h GgufSpec). Every
// getter names the file and the full key when a key is missing or has the wrong type.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace switchyard {

class GgufKeys {
 public:
  // `keys`: the architecture's keys without the prefix, values as JSON (integers, floats, bools,
  // strings); `source` names the file in messages.
  GgufKeys(const nlohmann::json& keys, std::string architecture, std::string source,
           std::function<bool(std::string_view)> has_tensor = nullptr);

  bool has(std::string_view key) const;
  std::int64_t integer(std::string_view key) const;  // InputError when missing or not an integer
  std::int64_t integer_or(std::string_view key, std::int64_t fallback) const;
  double number(std::string_view key) const;         // any integer or float
  double number_or(std::string_view key, double fallback) const;
  bool flag_or(std::string_view key, bool fallback) const;  // a bool, or an integer 0/1
  std::optional<std::string> string(std::string_view key) const;
  // Whether the file holds a tensor of this name (a family tells optional parts by them: GLM's q/k
  // norms and biases have no key). False when the caller gave no tensors.
  bool has_tensor(std::string_view name) const { return has_tensor_ && has_tensor_(name); }
  const std::string& architecture() const { return architecture_; }
  const std::string& source() const { return source_; }
  // "FILE: deepseek2.expert_count ..." for errors about a key.
  [[noreturn]] void fail(std::string_view key, const std::string& what) const;

 private:
  const nlohmann::json* find(std::string_view key) const;
  const nlohmann::json& keys_;
  std::string architecture_;
  std::string source_;
  std::function<bool(std::string_view)> has_tensor_;
};

}  // namespace switchyard
