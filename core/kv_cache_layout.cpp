#include "core/kv_cache_layout.h"

#include <stdexcept>
#include <string>

#include "core/text.h"

namespace switchyard {
namespace {

void require_cache_dtype(DType dtype, const char* where) {
  if (dtype != DType::f32 && dtype != DType::bf16)
    throw std::invalid_argument(std::string(where) + ": a KV cache holds f32 or bf16, not " + dtype_name(dtype));
}

}  // namespace

DType kv_cache_dtype(const ModelConfig& config, std::optional<DType> requested) {
  if (requested) {
    require_cache_dtype(*requested, "kv_cache_dtype");
    return *requested;
  }
  // torch_dtype names the activations' dtype; anything but float32 (bfloat16, float16, or the
  // bfloat16 that FP8 checkpoints such as DeepSeek-V3 declare) computes in 16 bits.
  return config.torch_dtype == "float32" ? DType::f32 : DType::bf16;
}

std::optional<DType> parse_kv_cache_dtype(std::string_view name) {
  const std::string lower = to_lower(name);
  if (lower == "f32") return DType::f32;
  if (lower == "bf16") return DType::bf16;
  return std::nullopt;
}

std::uint64_t KvCacheLayout::elements(int buffer) const {
  return static_cast<std::uint64_t>(max_context) * static_cast<std::uint64_t>(buffers.at(static_cast<std::size_t>(buffer)).width);
}

std::uint64_t KvCacheLayout::buffer_bytes(int buffer) const { return elements(buffer) * element_bytes(); }

std::uint64_t KvCacheLayout::bytes() const { return buffer_bytes(0) + buffer_bytes(1); }

KvCacheLayout kv_cache_layout(const ModelConfig& config, std::int64_t max_context, DType dtype) {
  require_cache_dtype(dtype, "kv_cache_layout");
  if (max_context < 0) throw std::invalid_argument("kv_cache_layout: max_context " + std::to_string(max_context) + " < 0");
  KvCacheLayout layout;
  layout.dtype = dtype;
  layout.max_context = max_context;
  if (config.attention() == AttentionKind::mla) {
    layout.buffers = {KvCacheBuffer{"latent", config.kv_lora_rank}, KvCacheBuffer{"rope key", config.qk_rope_head_dim}};
  } else {
    const std::int64_t width = std::int64_t{config.num_key_value_heads} * config.head_dim;
    layout.buffers = {KvCacheBuffer{"key", width}, KvCacheBuffer{"value", width}};
  }
  return layout;
}

}  // namespace switchyard
