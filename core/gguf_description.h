#pragma once
// The model a GGUF file holds, without reading its weights: the config its metadata describes
// (core/gguf_model.h) and, for a module tree, each tensor's stored type, checked against the
// tree's shapes (the GGUF counterpart of apply_checkpoint for safetensors headers).
#include <nlohmann/json.hpp>

#include "core/diagnostics.h"
#include "core/model_config.h"
#include "core/module_tree.h"

namespace switchyard {

class GgufFile;

// The metadata of `file` as gguf_model.h takes it (full keys -> JSON values; arrays as their type).
nlohmann::json gguf_scalar_metadata(const GgufFile& file);
// The config of the model in `file`. Throws InputError naming the file and the key.
ModelConfig gguf_file_config(const GgufFile& file);
// Takes each tree tensor's dtype from the file; reports a tensor the tree needs and the file lacks,
// one of another shape than the config implies (gguf_stored_shape: a fused experts tensor holds
// exactly n_routed_experts), one of a type run does not take (is_runnable_weight_dtype), and file
// tensors that belong to no module (warnings; MTP layers past the placed ones are skipped silently).
void apply_gguf(ModuleTree& tree, const GgufFile& file, Diagnostics& diagnostics);

}  // namespace switchyard
