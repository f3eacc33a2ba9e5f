#pragma once
// GGUF files as models of our families, by llama.cpp's conventions: the config that a file's
// metadata describes, the metadata a config is written with, and where each tensor of the module
// tree (its checkpoint name, "model.layers.3.mlp.experts.7.up_proj.weight") lives in the file
// ("blk.3.ffn_up_exps.weight", expert 7). Rules written against checkpoint names therefore work
// unchanged on a GGUF. The family-specific keys are the families' (core/model_family.h GgufSpec);
// the shared ones and the tensor names are here.
//
// Metadata is handled as JSON (full key -> value: integers, floats, bools, strings), so that this
// file does not depend on the container's reader. A value JSON cannot hold (an array, which no
// hyper-parameter is; a u64 past INT64_MAX) is an object {"gguf_type": "an array of u32"}: a key
// holding one is reported with its type, not as missing.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/model_config.h"

namespace switchyard {

struct GgufLocation {
  enum class Transform {
    none,
    // llama.cpp's converter reordered this q_proj/k_proj's rows for interleaved RoPE
    // (GgufSpec::interleaved_rope_rows): undo it per head.
    interleaved_rope_rows,
    // kv_b_proj [heads * (qk_nope + v_head), kv_lora]: in older files blk.N.attn_kv_b; newer ones
    // (llama.cpp's MLA) store it split, blk.N.attn_k_b [heads, kv_lora, qk_nope] (each head's key
    // rows transposed) and blk.N.attn_v_b [heads, v_head, kv_lora].
    kv_b_from_split,
  };
  std::string tensor;  // the GGUF tensor's name
  int expert = -1;     // >= 0: slice [expert] of a fused [n_experts, rows, columns] tensor
  Transform transform = Transform::none;
};

// Where tensor `name` of `config`'s module tree lives; nullopt for a name outside the mapping.
std::optional<GgufLocation> gguf_location(const ModelConfig& config, std::string_view name);
// The names of the split form of kv_b_proj (GgufLocation::kv_b_from_split) of `layer`.
std::string gguf_k_b_name(int layer);
std::string gguf_v_b_name(int layer);
// The shape the file's tensor at `location` must have for a checkpoint tensor of `shape`: the same,
// or [n_routed_experts, rows, columns] for an expert's slice of a fused tensor (every expert of the
// layer, no more, no fewer). `check` and the loader both hold a file's tensors to it.
std::vector<std::int64_t> gguf_stored_shape(const ModelConfig& config, const GgufLocation& location,
                                            const std::vector<std::int64_t>& shape);
// The shapes of kv_b_proj's split form: attn_k_b [heads, kv_lora_rank, qk_nope_head_dim] and
// attn_v_b [heads, v_head_dim, kv_lora_rank].
std::vector<std::int64_t> gguf_k_b_shape(const ModelConfig& config);
std::vector<std::int64_t> gguf_v_b_shape(const ModelConfig& config);
// What in the config sets the shape gguf_stored_shape gives, for messages: " (16 experts:
// deepseek2.expert_count)" for a fused experts tensor, "" otherwise.
std::string gguf_shape_origin(const ModelConfig& config, const GgufLocation& location);

// What a file tells beside its metadata: the rows of token_embd (the vocabulary when the metadata
// has no vocab_size or token list) and whether it has an output.weight (llama.cpp ties the head to
// the embedding without one, which Switchyard does not run).
struct GgufTensorFacts {
  std::function<bool(std::string_view)> has_tensor;  // by GGUF name
  std::optional<std::int64_t> embedding_rows;
  bool embedding_f32 = false;  // an f32 token_embd: an f32 model (the KV cache's default follows it)
  std::optional<std::int64_t> token_count;  // the length of tokenizer.ggml.tokens
  bool has_output = true;
};

// The model config of a file with this metadata (full keys). Throws InputError naming `source` and
// the key: an architecture we do not run (naming those we do), a missing or mistyped key, then
// anything parse_model_config refuses.
ModelConfig gguf_model_config(const nlohmann::json& metadata, const GgufTensorFacts& facts, const std::string& source);

// The metadata (full keys) llama.cpp reads for `config`: general.architecture and general.name, and
// the architecture's hyper-parameters. Throws InputError when the family has no GGUF form.
nlohmann::json gguf_metadata(const ModelConfig& config);

// The type a tensor of rows of `row_elements` weights is stored as when `wanted` is asked for:
// `wanted` when a row is whole blocks of it; else a 32-weight type of about the same bits (as
// llama.cpp's quantizer falls back: Q2_K..Q4_K -> Q4_0 or Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL); else f32.
DType gguf_storage_type(DType wanted, std::int64_t row_elements);

}  // namespace switchyard
