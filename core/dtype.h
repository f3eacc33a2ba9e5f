#pragma once
// Element types of weights, as found in safetensors and GGUF files, with their storage cost.
// Block-quantised types (ggml's Q8_0, Q4_K, ...) store `block_elements` weights in `block_bytes`.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace switchyard {

enum class DType : std::uint8_t {
  f64, f32, f16, bf16, f8_e4m3, f8_e5m2, i64, i32, i16, i8, u8, boolean,
  q8_0, q6_k, q5_k, q4_k, q3_k, q2_k,
};

struct DTypeInfo {
  DType dtype;
  const char* name;             // our name: "bf16", "q4_k"
  const char* safetensors_name; // "BF16", or nullptr where safetensors has no such type
  int block_elements;           // 1 for plain types
  int block_bytes;              // element size for plain types
};

const DTypeInfo& dtype_info(DType dtype);
const char* dtype_name(DType dtype);
std::optional<DType> dtype_from_safetensors(std::string_view name);
// Bytes needed to store `elements` weights; a partial block still takes a whole block.
std::uint64_t storage_bytes(DType dtype, std::uint64_t elements);

}  // namespace switchyard
