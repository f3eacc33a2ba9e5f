// The KV cache's layout and element type (core/kv_cache_layout.h): buffers and bytes per family,
// the default element type from the checkpoint's torch_dtype, and --kv_cache_dtype's names.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <stdexcept>

#include "core/arch_presets.h"
#include "core/kv_cache_layout.h"
#include "tests/test_seed.h"

namespace sy = switchyard;

TEST_CASE("core: the KV cache layout of MLA and GQA layers, f32 and bf16") {
  std::mt19937 random(sy::testing::test_seed());
  const std::int64_t max_context = std::uniform_int_distribution<std::int64_t>(1, 1 << 20)(random);
  INFO("max_context " << max_context);
  for (const sy::DType dtype : {sy::DType::f32, sy::DType::bf16}) {
    const std::uint64_t element = dtype == sy::DType::f32 ? 4 : 2;
    for (const char* name : {"deepseek-v3", "deepseek-v2-lite", "tiny-deepseek-v2", "tiny-deepseek-v3"}) {
      INFO(name << ", " << sy::dtype_name(dtype));
      const sy::ModelConfig c = sy::preset_model_config(name);  // the latent, then the shared rope key
      const sy::KvCacheLayout l = sy::kv_cache_layout(c, max_context, dtype);
      CHECK(l.dtype == dtype);
      CHECK(l.buffers[0].width == c.kv_lora_rank);
      CHECK(l.buffers[1].width == c.qk_rope_head_dim);
      CHECK(l.buffer_bytes(0) == static_cast<std::uint64_t>(max_context * c.kv_lora_rank) * element);
      CHECK(l.bytes() == static_cast<std::uint64_t>(max_context * (c.kv_lora_rank + c.qk_rope_head_dim)) * element);
    }
    for (const char* name : {"qwen3-30b-a3b", "mixtral-8x7b", "tiny-qwen3-moe", "tiny-mixtral"}) {
      INFO(name << ", " << sy::dtype_name(dtype));
      const sy::ModelConfig c = sy::preset_model_config(name);  // keys, then values, per KV head
      const sy::KvCacheLayout l = sy::kv_cache_layout(c, max_context, dtype);
      const std::int64_t width = std::int64_t{c.num_key_value_heads} * c.head_dim;
      CHECK(l.buffers[0].width == width);
      CHECK(l.buffers[1].width == width);
      CHECK(l.bytes() == 2 * static_cast<std::uint64_t>(max_context * width) * element);
    }
  }
  // 2^32 tokens of DeepSeek-V3's 576 elements in f32: past 2^32 bytes, no overflow.
  const sy::KvCacheLayout big = sy::kv_cache_layout(sy::preset_model_config("deepseek-v3"), std::int64_t{1} << 32, sy::DType::f32);
  CHECK(big.bytes() == (std::uint64_t{1} << 32) * 576 * 4);
  CHECK_THROWS_AS(sy::kv_cache_layout(sy::preset_model_config("tiny-mixtral"), 8, sy::DType::f16), std::invalid_argument);
  CHECK_THROWS_AS(sy::kv_cache_layout(sy::preset_model_config("tiny-mixtral"), -1, sy::DType::f32), std::invalid_argument);
}

TEST_CASE("core: the KV cache takes the checkpoint's activation dtype unless --kv_cache_dtype says otherwise") {
  sy::ModelConfig c = sy::preset_model_config("tiny-qwen3-moe");
  c.torch_dtype = "float32";
  CHECK(sy::kv_cache_dtype(c) == sy::DType::f32);
  CHECK(sy::kv_cache_dtype(c, sy::DType::bf16) == sy::DType::bf16);
  for (const char* sixteen_bits : {"bfloat16", "float16"}) {
    INFO(sixteen_bits);
    c.torch_dtype = sixteen_bits;
    CHECK(sy::kv_cache_dtype(c) == sy::DType::bf16);
    CHECK(sy::kv_cache_dtype(c, sy::DType::f32) == sy::DType::f32);
  }
  CHECK_THROWS_AS(sy::kv_cache_dtype(c, sy::DType::f16), std::invalid_argument);
  CHECK(sy::parse_kv_cache_dtype("f32") == sy::DType::f32);
  CHECK(sy::parse_kv_cache_dtype("bf16") == sy::DType::bf16);
  CHECK(sy::parse_kv_cache_dtype("BF16") == sy::DType::bf16);  // either case
  for (const char* other : {"", "fp32", "f16", "float32", "q8_0"}) CHECK_FALSE(sy::parse_kv_cache_dtype(other));
}
