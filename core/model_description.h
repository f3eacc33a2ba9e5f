#pragma once
// The model a command works on, without its weights: from a built-in preset (--arch) with
// dtypes from a weight scheme (--weight_dtype), from a checkpoint directory (--model_path), whose
// config.json gives the tree and whose safetensors headers give each tensor's dtype, or from a
// GGUF file (--gguf_path), whose metadata gives the config unless --model_path's config.json is
// given beside it (ktransformers' pairing), and whose tensor infos give the dtypes.
#include <filesystem>
#include <string>
#include <vector>

#include "core/diagnostics.h"
#include "core/gguf.h"
#include "core/module_tree.h"

namespace switchyard {

struct ModelSpec {
  std::string arch;                     // preset name, or empty
  std::filesystem::path model_path;     // checkpoint directory (or, with gguf_path, its config.json's), or empty
  std::filesystem::path gguf_path;      // GGUF file, first split or directory holding one, or empty
  std::string weight_dtype = "bf16";    // scheme for tensors a checkpoint does not describe
  // Metadata values read in place of the GGUF's (--override-kv); only with gguf_path.
  std::vector<GgufOverride> gguf_overrides;
};

// gguf_path's file with spec.gguf_overrides in place (GgufFile::with_overrides).
GgufFile open_model_gguf(const ModelSpec& spec);

// Throws InputError for unusable input (no such preset, unreadable config.json, hostile header).
// Tensors that disagree with config.json are reported in `diagnostics` with the tensor's name.
ModuleTree describe_model(const ModelSpec& spec, Diagnostics& diagnostics);

// The config of the model `spec` describes (preset, config.json or GGUF metadata).
ModelConfig model_config_of(const ModelSpec& spec);
// The weights of `spec`'s model (a checkpoint directory or a GGUF), for `config`. Throws InputError
// when `spec` names no weights (a preset alone).
class Checkpoint open_model_weights(const ModelSpec& spec, const ModelConfig& config);

// Checks the checkpoint's tensors against the tree and takes their dtypes (and extra tensors
// such as FP8 block scales) into it.
void apply_checkpoint(ModuleTree& tree, const struct CheckpointIndex& checkpoint, Diagnostics& diagnostics);

}  // namespace switchyard
