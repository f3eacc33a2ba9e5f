#include "core/model_description.h"

#include <charconv>

#include "core/arch_presets.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/gguf.h"
#include "core/gguf_description.h"
#include "core/safetensors.h"
#include "core/text.h"

namespace switchyard {
namespace {

// "model.layers.61.xxx" with 61 >= num_hidden_layers: DeepSeek-V3's MTP layer, not placed.
bool is_unplaced_layer(std::string_view tensor, int num_layers) {
  constexpr std::string_view prefix = "model.layers.";
  if (!starts_with(tensor, prefix)) return false;
  tensor.remove_prefix(prefix.size());
  int layer = 0;
  const auto [end, ec] = std::from_chars(tensor.data(), tensor.data() + tensor.size(), layer);
  return ec == std::errc() && layer >= num_layers;
}

SourceLocation location_of(const CheckpointIndex& checkpoint, const CheckpointTensor& t) {
  return SourceLocation{checkpoint.shards[t.shard].file.string(), 0, 0};
}

constexpr std::size_t kMaxReported = 8;  // per kind of finding; the rest are counted

}  // namespace

void apply_checkpoint(ModuleTree& tree, const CheckpointIndex& checkpoint, Diagnostics& diagnostics) {
  std::vector<std::vector<bool>> seen(tree.size());
  for (std::size_t m = 0; m < tree.size(); ++m) seen[m].assign(tree.at(static_cast<int>(m)).params.size(), false);
  std::size_t unknown = 0, mismatched = 0;
  for (const CheckpointTensor& ct : checkpoint.tensors) {
    const SafetensorsTensor& t = ct.tensor;
    const auto dot = t.name.rfind('.');
    const int module = dot == std::string::npos ? -1 : tree.find(std::string_view(t.name).substr(0, dot));
    if (module < 0) {
      if (is_unplaced_layer(t.name, tree.num_layers())) continue;
      if (unknown++ < kMaxReported)
        diagnostics.warning("unknown-tensor", "tensor '" + t.name + "' belongs to no module of the " +
                                                  tree.config().model_type + " tree; it is ignored",
                            location_of(checkpoint, ct));
      continue;
    }
    Module& owner = tree.at(module);
    const std::string local = t.name.substr(dot + 1);
    Shape shape;
    shape.rank = static_cast<int>(std::min<std::size_t>(t.shape.size(), 4));
    for (int i = 0; i < shape.rank; ++i) shape.dims[static_cast<std::size_t>(i)] = t.shape[static_cast<std::size_t>(i)];
    std::size_t p = 0;
    while (p < owner.params.size() && owner.params[p].name != local) ++p;
    if (p == owner.params.size()) {
      // A tensor the config does not predict (FP8 weight_scale_inv, a bias): keep it with the module.
      const TensorKind kind = local == "weight_scale_inv" ? TensorKind::block_scale
                              : owner.params.empty()      ? TensorKind::attention
                                                          : owner.params.front().kind;
      tree.add_param(module, local, shape, t.dtype, kind);
      seen[static_cast<std::size_t>(module)].push_back(true);
      continue;
    }
    Parameter& param = owner.params[p];
    seen[static_cast<std::size_t>(module)][p] = true;
    if (t.shape.size() > 4 || !(param.shape == shape)) {
      if (mismatched++ < kMaxReported)
        diagnostics.error("tensor-shape-mismatch", "tensor '" + t.name + "' has shape " + shape.str() +
                                                       " but config.json implies " + param.shape.str(),
                          location_of(checkpoint, ct));
      continue;
    }
    param.dtype = t.dtype;
  }
  std::size_t missing = 0;
  std::string first_missing;
  for (std::size_t m = 0; m < tree.size(); ++m)
    for (std::size_t p = 0; p < seen[m].size(); ++p)
      if (!seen[m][p]) {
        const Module& module = tree.at(static_cast<int>(m));
        if (missing++ < kMaxReported)
          diagnostics.error("missing-tensor", "tensor '" + std::string(module.name) + "." + std::string(module.params[p].name) + "' (" +
                                                  module.params[p].shape.str() + ") is not in the checkpoint");
      }
  if (missing > kMaxReported)
    diagnostics.error("missing-tensor", std::to_string(missing - kMaxReported) + " more tensors are missing");
  if (mismatched > kMaxReported)
    diagnostics.error("tensor-shape-mismatch", std::to_string(mismatched - kMaxReported) + " more tensors have the wrong shape");
  if (unknown > kMaxReported)
    diagnostics.warning("unknown-tensor", std::to_string(unknown - kMaxReported) + " more tensors belong to no module");
}

namespace {

void require_directory(const std::filesystem::path& path) {
  std::error_code ec;  // a link loop or an unreadable parent is an error to report, not to throw
  const bool directory = std::filesystem::is_directory(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw InputError(path.string() + ": cannot read the model directory (" + ec.message() + ")");
  if (!directory)
    throw InputError(path.string() + (ec ? ": no such directory" : ": not a directory") +
                     " (--model_path takes a checkpoint directory)");
}

const WeightScheme& scheme_of(const ModelSpec& spec) {
  const WeightScheme* scheme = find_weight_scheme(spec.weight_dtype);
  if (!scheme) {
    const auto names = weight_scheme_names();
    throw InputError("unknown --weight_dtype '" + spec.weight_dtype + "'" + did_you_mean(spec.weight_dtype, names) +
                     "; known: " + join(names, ", "));
  }
  return *scheme;
}

ModelConfig config_of(const ModelSpec& spec, const GgufFile* gguf) {
  if (!spec.model_path.empty()) {
    require_directory(spec.model_path);
    return load_model_config(spec.model_path / "config.json");
  }
  if (gguf) return gguf_file_config(*gguf);
  if (spec.arch.empty()) throw InputError("give --arch PRESET, --model_path DIR or --gguf_path FILE");
  return preset_model_config(spec.arch);
}

}  // namespace

GgufFile open_model_gguf(const ModelSpec& spec) {
  if (spec.gguf_path.empty()) {
    if (!spec.gguf_overrides.empty())
      throw InputError("--override-kv " + spec.gguf_overrides.front().key +
                           ": the model is not a GGUF file, so there is no metadata to override; give --gguf_path",
                       kExitUsageOrIo);
    throw std::logic_error("open_model_gguf: no GGUF path");
  }
  return GgufFile::open(spec.gguf_path).with_overrides(spec.gguf_overrides);
}

ModelConfig model_config_of(const ModelSpec& spec) {
  if (!spec.gguf_path.empty() && spec.model_path.empty()) {
    const GgufFile file = open_model_gguf(spec);
    return config_of(spec, &file);
  }
  return config_of(spec, nullptr);
}

Checkpoint open_model_weights(const ModelSpec& spec, const ModelConfig& config) {
  if (!spec.gguf_path.empty()) return Checkpoint::open_gguf(spec.gguf_path, config);
  if (spec.model_path.empty()) throw InputError("no weights: give --model_path DIR or --gguf_path FILE");
  return Checkpoint::open(spec.model_path);
}

ModuleTree describe_model(const ModelSpec& spec, Diagnostics& diagnostics) {
  const WeightScheme& scheme = scheme_of(spec);
  if (!spec.gguf_path.empty()) {
    const GgufFile file = open_model_gguf(spec);
    ModuleTree tree = build_module_tree(config_of(spec, &file), scheme);
    apply_gguf(tree, file, diagnostics);
    return tree;
  }
  if (!spec.model_path.empty()) {
    ModuleTree tree = build_module_tree(config_of(spec, nullptr), scheme);
    apply_checkpoint(tree, read_checkpoint_index(spec.model_path), diagnostics);
    return tree;
  }
  return build_module_tree(config_of(spec, nullptr), scheme);
}

}  // namespace switchyard
