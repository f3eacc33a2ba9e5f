#pragma once
// ConfigFields: typed, range-checked reads of one JSON object of a config.json (the top level, or
// rope_parameters inside it), each failure an InputError (exit 1) that names the file and the
// field. The model families read their own fields with it (core/models/<family>.cpp).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace switchyard {

// Limits far above any real model, so that a hostile config.json cannot make us build a huge tree.
constexpr std::int64_t kMaxWidth = 1 << 22;
constexpr std::int64_t kMaxVocab = 1 << 24;
constexpr int kMaxLayers = 1024;
constexpr int kMaxExperts = 4096;
// Routed experts over all MoE layers: 15 k for DeepSeek-V3, 23 k for Kimi-K2's 61 x 384. The
// module tree holds four modules an expert; past this it would take seconds and gigabytes to
// build before anything else is checked.
constexpr std::int64_t kMaxLayerExperts = 1 << 18;
// The RoPE kernels (CPU and CUDA) rotate at most this many dimensions of a head.
constexpr int kMaxRopeDim = 1024;

// A closed or half-open interval of a floating-point field; its text is part of the error.
struct NumberRange {
  double low;
  double high;
  bool low_inclusive;
  bool contains(double v) const { return std::isfinite(v) && (low_inclusive ? v >= low : v > low) && v <= high; }
  std::string text() const;  // "[1e-30, 1]", "(0, 1000]"
};

// Throws InputError(kExitBadContent): "SOURCE: field 'KEY' WHAT".
[[noreturn]] void fail_field(const std::string& source, const std::string& key, const std::string& what);

class ConfigFields {
 public:
  // `object` must outlive this; `source` names it in messages ("config.json", "config.json: rope_parameters").
  ConfigFields(const nlohmann::json& object, std::string source) : object_(object), source_(std::move(source)) {}

  const std::string& source() const { return source_; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { fail_field(source_, key, what); }
  // Present and not null.
  bool has(const std::string& key) const;
  const nlohmann::json& at(const std::string& key) const;

  // An integer in [low, high]; missing is an error.
  std::int64_t integer(const std::string& key, std::int64_t low, std::int64_t high) const;
  std::int64_t integer_or(const std::string& key, std::int64_t fallback, std::int64_t low, std::int64_t high) const;
  // A JSON number (integer or not) in `range`, or `fallback` when the field is absent or null.
  double number_or(const std::string& key, double fallback, const NumberRange& range) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;
  // A list of layer numbers, each in [0, num_layers) (Qwen3-MoE's mlp_only_layers).
  std::vector<int> layer_list(const std::string& key, int num_layers) const;

 private:
  const nlohmann::json& object_;
  std::string source_;
};

}  // namespace switchyard
