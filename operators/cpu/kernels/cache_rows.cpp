#include "operators/cpu/kernels/cache_rows.h"

#include <cstring>

#include "operators/cpu/kernels/half.h"

namespace switchyard::cpu {

CacheRows::CacheRows(const KvCacheLayout& layout, int buffer)
    : dtype_(layout.dtype), width_(layout.buffers.at(static_cast<std::size_t>(buffer)).width) {
  // The allocation is layout.buffer_bytes(buffer), in elements of the layout's type.
  const std::size_t elements = static_cast<std::size_t>(layout.buffer_bytes(buffer) / layout.element_bytes());
  if (dtype_ == DType::f32) f32_.assign(elements, 0.0f);
  else bf16_.assign(elements, 0);
}

void CacheRows::write(std::int64_t first, std::int64_t count, const float* source, std::int64_t source_stride) {
  for (std::int64_t t = 0; t < count; ++t) {
    const float* from = source + t * source_stride;
    const auto row = static_cast<std::size_t>((first + t) * width_);
    if (dtype_ == DType::f32) {
      std::memcpy(f32_.data() + row, from, sizeof(float) * static_cast<std::size_t>(width_));
    } else {
      std::uint16_t* to = bf16_.data() + row;
      for (std::int64_t i = 0; i < width_; ++i) to[i] = f32_to_bf16(from[i]);
    }
  }
}

}  // namespace switchyard::cpu
