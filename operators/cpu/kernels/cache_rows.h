#pragma once
// One buffer of a layer's KV cache in host memory: [rows, width] elements of f32 or bf16, sized
// by core/kv_cache_layout.h (what check estimates). Rows are written from f32, rounded to nearest
// even for bf16 (cpu::f32_to_bf16), and read by the attention kernels (causal_attention.h), which
// widen them exactly.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/kv_cache_layout.h"

namespace switchyard::cpu {

class CacheRows {
 public:
  CacheRows() = default;
  // Buffer `buffer` of `layout`, zeroed.
  CacheRows(const KvCacheLayout& layout, int buffer);

  // Rows [first, first + count) from source, row t at source + t * source_stride (f32). The rows
  // must lie inside the buffer (the operator checks the context first).
  void write(std::int64_t first, std::int64_t count, const float* source, std::int64_t source_stride);
  const void* data() const { return dtype_ == DType::f32 ? static_cast<const void*>(f32_.data()) : bf16_.data(); }
  DType dtype() const { return dtype_; }
  std::int64_t width() const { return width_; }
  // Bytes held: the allocation itself, which check's estimate must equal.
  std::size_t bytes() const { return f32_.size() * sizeof(float) + bf16_.size() * sizeof(std::uint16_t); }

 private:
  DType dtype_ = DType::f32;
  std::int64_t width_ = 0;
  std::vector<float> f32_;           // [rows, width] for an f32 cache
  std::vector<std::uint16_t> bf16_;  // [rows, width] bf16 bits for a bf16 cache
};

}  // namespace switchyard::cpu
