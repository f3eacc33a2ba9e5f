#pragma once
// A GGUF file of a module tree with make-model's random weights, in llama.cpp's names, layout and
// metadata (core/gguf_model.h), so that llama.cpp loads it too. Each tensor's values are those of
// the safetensors checkpoint of the same seed (core/random_weights.h), stored as the tree says
// (its weight scheme: f32, bf16, f16, or ggml's block types through core/quant_formats.h's
// quantiser); a row that is not whole blocks of its type takes gguf_storage_type's fallback.
// llama.cpp's converter's transformations are applied as it applies them: the routed experts of a
// layer fused into one [n_experts, rows, columns] tensor per projection, Mixtral's q/k rows
// reordered for interleaved RoPE, DeepSeek's kv_b_proj split into attn_k_b and attn_v_b.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>

#include "core/dtype.h"
#include "core/module_tree.h"

namespace switchyard {

class GgufWriter;

struct GgufModelSummary {
  std::uint64_t tensors = 0;
  std::uint64_t tensor_bytes = 0;
  std::uint64_t file_bytes = 0;
  std::map<DType, std::uint64_t> tensors_by_type;  // how many tensors each stored type got
};

// Writes `file` atomically (core/atomic_file.h). Throws InputError naming the file when it cannot
// be written, and when the tree's family has no GGUF form. `tokenizer_metadata` sets the
// tokenizer's keys (text/gguf_vocabulary.h); without it the file says tokenizer.ggml.model "none"
// and llama.cpp runs it on token ids. `head_tokens`: MakeModelOptions::head_tokens.
// `on_progress` (if set) hears the tensor bytes generated so far and in all after each tensor.
GgufModelSummary write_gguf_model(const ModuleTree& tree, std::uint64_t seed, const std::filesystem::path& file,
                                  const std::function<void(GgufWriter&)>& tokenizer_metadata = {},
                                  std::int64_t head_tokens = 0,
                                  const std::function<void(std::uint64_t, std::uint64_t)>& on_progress = {});

}  // namespace switchyard
