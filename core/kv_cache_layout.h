#pragma once
// The KV cache of one attention layer as run allocates it and check estimates it: one function
// gives both the element type and the bytes of every buffer, so the dry run's estimate equals the
// allocation by construction.
//
// Element type: f32 or bf16. By default the checkpoint's activation dtype (config.json's
// torch_dtype), as transformers keeps its cache: f32 for a float32 checkpoint, bf16 for a bfloat16
// one. A float16 checkpoint gets bf16 too: the same bytes as transformers' f16 cache, and the
// kernels speak f32 and bf16 only; bf16 keeps f32's exponent range, so large key activations cannot
// overflow to inf as they can in f16, at 3 fewer mantissa bits. --kv_cache_dtype overrides it.
// Values are written rounded to bf16 (to nearest, ties to even) and read widened to f32 exactly; the
// attention's arithmetic stays f32.
//
// Buffers, each [max_context, width] elements, row p holding position p:
//   MLA (DeepSeek): the normalised compressed latent [kv_lora_rank], the rotated shared rope key
//                   [qk_rope_head_dim];
//   GQA (Qwen3-MoE, Mixtral): the rotated keys and the values, [num_key_value_heads * head_dim] each.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "core/model_config.h"

namespace switchyard {

// The element type of `config`'s KV cache: `requested` when given, else the activation dtype above.
// `requested` must be f32 or bf16 (parse_kv_cache_dtype); std::invalid_argument otherwise.
DType kv_cache_dtype(const ModelConfig& config, std::optional<DType> requested = std::nullopt);
// "f32" or "bf16", as --kv_cache_dtype takes them; nullopt for anything else.
std::optional<DType> parse_kv_cache_dtype(std::string_view name);

struct KvCacheBuffer {
  const char* what = "";   // "latent", "rope key", "key", "value": for allocation messages
  std::int64_t width = 0;  // elements a position
};

struct KvCacheLayout {
  DType dtype = DType::f32;
  std::int64_t max_context = 0;          // rows of every buffer
  std::array<KvCacheBuffer, 2> buffers;  // MLA: latent, rope key; GQA: key, value

  std::uint64_t element_bytes() const { return dtype == DType::f32 ? 4 : 2; }
  std::uint64_t elements(int buffer) const;  // max_context * width
  std::uint64_t buffer_bytes(int buffer) const;
  std::uint64_t bytes() const;  // every buffer: the layer's whole cache
};

// One attention layer's cache for `max_context` positions (>= 0) in `dtype` (f32 or bf16;
// std::invalid_argument otherwise).
KvCacheLayout kv_cache_layout(const ModelConfig& config, std::int64_t max_context, DType dtype);

}  // namespace switchyard
