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

// The scalar metadata of `file` (full keys -> JSON values); arrays are left out.
nlohmann::json gguf_scalar_metadata(const GgufFile& file);
// The config of the model in `file`. Throws InputError naming the file and the key.
ModelConfig gguf_file_config(const GgufFile& file);
// Takes each tree tensor's dtype from the file; reports a tensor the tree needs and the file lacks,
// one of another shape, and file tensors that belong to no module (warnings; MTP layers past the
// placed ones are skipped silently).
void apply_gguf(ModuleTree& tree, const GgufFile& file, Diagnostics& diagnostics);

}  // namespace switchyard
