#include "core/gguf_description.h"

#include <charconv>
#include <set>
#include <string>

#include "core/error.h"
#include "core/gguf.h"
#include "core/gguf_model.h"
#include "core/text.h"
#include "core/weight_dtypes.h"

namespace switchyard {
namespace {

constexpr std::size_t kMaxReported = 8;  // per kind of finding; the rest are counted

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// "blk.46.nextn.eh_proj.weight" with 46 >= num_hidden_layers: an MTP layer, not placed.
bool is_unplaced_block(std::string_view name, int num_layers) {
  constexpr std::string_view prefix = "blk.";
  if (!starts_with(name, prefix)) return false;
  name.remove_prefix(prefix.size());
  int layer = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  return ec == std::errc() && layer >= num_layers;
}

}  // namespace

nlohmann::json gguf_scalar_metadata(const GgufFile& file) {
  nlohmann::json out = nlohmann::json::object();
  for (const GgufValue& value : file.metadata()) {
    const std::string key(value.key());
    switch (value.type()) {
      // Values JSON cannot hold are kept as their type, so that a reader names the key's type
      // rather than calling it missing (gguf_model.h).
      case GgufValueType::array:
        out[key] = {{"gguf_type", std::string("an array of ") + gguf_value_type_name(value.element_type())}};
        break;
      case GgufValueType::string: out[key] = std::string(*value.as_string()); break;
      case GgufValueType::boolean: out[key] = *value.as_bool(); break;
      case GgufValueType::f32:
      case GgufValueType::f64: out[key] = *value.as_number(); break;
      case GgufValueType::u64:
        if (const auto n = value.as_int()) out[key] = *n;
        else out[key] = {{"gguf_type", "a u64 above 2^63 - 1"}};  // no count or size is that large
        break;
      default: out[key] = *value.as_int(); break;
    }
  }
  return out;
}

ModelConfig gguf_file_config(const GgufFile& file) {
  GgufTensorFacts facts;
  facts.has_tensor = [&file](std::string_view name) { return file.find_tensor(name) != nullptr; };
  if (const GgufTensorInfo* embedding = file.find_tensor("token_embd.weight"); embedding && embedding->shape.size() == 2) {
    facts.embedding_rows = embedding->shape[0];
    facts.embedding_f32 = embedding->dtype == DType::f32;
  }
  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens"); tokens && tokens->type() == GgufValueType::array)
    facts.token_count = static_cast<std::int64_t>(tokens->size());
  facts.has_output = file.find_tensor("output.weight") != nullptr;
  return gguf_model_config(gguf_scalar_metadata(file), facts, file.files().front().string());
}

void apply_gguf(ModuleTree& tree, const GgufFile& file, Diagnostics& diagnostics) {
  const ModelConfig& config = tree.config();
  const SourceLocation where{file.files().front().string(), 0, 0};
  std::set<std::string> used;
  std::size_t missing = 0, mismatched = 0, unsupported = 0;
  // A file tensor `check` refuses, as the loader would: the wrong shape, or a type run does not take.
  const auto refused = [&](const GgufTensorInfo& info, const std::vector<std::int64_t>& wanted, const std::string& origin) {
    if (info.shape != wanted) {
      if (mismatched++ < kMaxReported)
        diagnostics.error("tensor-shape-mismatch", "tensor " + quoted_excerpt(info.name) + " has shape " + shape_text(info.shape) +
                                                       " but the config implies " + shape_text(wanted) + origin,
                          where);
      return true;
    }
    if (!is_runnable_weight_dtype(info.dtype)) {
      if (unsupported++ < kMaxReported)
        diagnostics.error("unsupported-dtype", "tensor " + quoted_excerpt(info.name) + " is stored as " + dtype_name(info.dtype) +
                                                   "; run takes weights of " + runnable_weight_dtypes_text(),
                          where);
      return true;
    }
    return false;
  };
  for (std::size_t m = 0; m < tree.size(); ++m) {
    Module& module = tree.at(static_cast<int>(m));
    for (Parameter& param : module.params) {
      const std::string name = std::string(module.name) + "." + std::string(param.name);
      const auto location = gguf_location(config, name);
      const GgufTensorInfo* info = location ? file.find_tensor(location->tensor) : nullptr;
      const std::vector<std::int64_t> expected(param.shape.dims.begin(), param.shape.dims.begin() + param.shape.rank);
      if (!info && location && location->transform == GgufLocation::Transform::kv_b_from_split) {
        // Split kv_b_proj: the checkpoint reads it dequantized to f32 (core/checkpoint.h).
        const int layer = std::stoi(name.substr(std::string("model.layers.").size()));
        const GgufTensorInfo* k_b = file.find_tensor(gguf_k_b_name(layer));
        const GgufTensorInfo* v_b = file.find_tensor(gguf_v_b_name(layer));
        if (k_b && v_b) {
          used.insert(k_b->name);
          used.insert(v_b->name);
          const bool k_refused = refused(*k_b, gguf_k_b_shape(config), "");
          if (!refused(*v_b, gguf_v_b_shape(config), "") && !k_refused) param.dtype = DType::f32;
          continue;
        }
      }
      if (!info) {
        if (missing++ < kMaxReported)
          diagnostics.error("missing-tensor", "tensor " + quoted_excerpt(location ? location->tensor : name) + " (" + name + ", " +
                                                  param.shape.str() + ") is not in the GGUF file", where);
        continue;
      }
      used.insert(info->name);
      if (refused(*info, gguf_stored_shape(config, *location, expected), gguf_shape_origin(config, *location))) continue;
      param.dtype = info->dtype;
    }
  }
  if (missing > kMaxReported)
    diagnostics.error("missing-tensor", std::to_string(missing - kMaxReported) + " more tensors are missing", where);
  if (mismatched > kMaxReported)
    diagnostics.error("tensor-shape-mismatch", std::to_string(mismatched - kMaxReported) + " more tensors have the wrong shape", where);
  if (unsupported > kMaxReported)
    diagnostics.error("unsupported-dtype", std::to_string(unsupported - kMaxReported) + " more tensors have a type run does not take",
                      where);
  std::size_t unknown = 0;
  for (const GgufTensorInfo& info : file.tensors()) {
    if (used.count(info.name) || is_unplaced_block(info.name, config.num_hidden_layers)) continue;
    if (unknown++ < kMaxReported)
      diagnostics.warning("unknown-tensor", "tensor " + quoted_excerpt(info.name) + " belongs to no module of the " +
                                                config.model_type + " tree; it is ignored", where);
  }
  if (unknown > kMaxReported)
    diagnostics.warning("unknown-tensor", std::to_string(unknown - kMaxReported) + " more tensors belong to no module", where);
}

}  // namespace switchyard
