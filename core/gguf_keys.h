#pragma once
// GgufKeys: one architecture's metadata keys of a GGUF file ("expert_count" for
// "deepseek2.expert_count"), read by a family's GGUF reader (core/model_family.h GgufSpec). Every
// getter names the file and the full key when a key is missing, has the wrong type (saying the
// type it has and the one expected), or a value outside its range (saying the value and the range).
// All are InputError with exit 1: the file's content is wrong.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace switchyard {

// One valid value of an enum-like integer key and what it means: {2, "sigmoid"}.
struct GgufKeyChoice {
  std::int64_t value;
  const char* meaning;
};

class GgufKeys {
 public:
  // `keys`: the architecture's keys without the prefix, values as gguf_model.h's metadata JSON
  // (integers, floats, bools, strings; an object {"gguf_type": ...} for a value JSON cannot hold);
  // `source` names the file in messages.
  GgufKeys(const nlohmann::json& keys, std::string architecture, std::string source,
           std::function<bool(std::string_view)> has_tensor = nullptr);

  bool has(std::string_view key) const;
  std::int64_t integer(std::string_view key) const;  // InputError when missing or not an integer
  // The same, and in [low, high].
  std::int64_t integer(std::string_view key, std::int64_t low, std::int64_t high) const;
  std::int64_t integer_or(std::string_view key, std::int64_t fallback) const;
  std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t low, std::int64_t high) const;
  // An enum-like integer key: one of `valid` (the message lists them all), or `fallback` when absent.
  std::int64_t choice_or(std::string_view key, std::int64_t fallback, std::initializer_list<GgufKeyChoice> valid) const;
  double number(std::string_view key) const;         // any integer or float
  double number_or(std::string_view key, double fallback) const;
  bool flag_or(std::string_view key, bool fallback) const;  // a bool, or an integer 0/1
  std::optional<std::string> string(std::string_view key) const;
  // Whether the file holds a tensor of this name (a family tells optional parts by them: GLM's q/k
  // norms and biases have no key). False when the caller gave no tensors.
  bool has_tensor(std::string_view name) const { return has_tensor_ && has_tensor_(name); }
  const std::string& architecture() const { return architecture_; }
  const std::string& source() const { return source_; }
  // "FILE: GGUF key deepseek2.expert_count WHAT" for errors about a key (exit 1).
  [[noreturn]] void fail(std::string_view key, const std::string& what) const;

 private:
  const nlohmann::json* find(std::string_view key) const;
  [[noreturn]] void wrong_type(std::string_view key, const nlohmann::json& value, const char* expected) const;
  const nlohmann::json& keys_;
  std::string architecture_;
  std::string source_;
  std::function<bool(std::string_view)> has_tensor_;
};

// What a metadata value is, for a message: "an integer (-1)", "a string ('abc')", "an array of u32".
std::string gguf_value_text(const nlohmann::json& value);

}  // namespace switchyard
