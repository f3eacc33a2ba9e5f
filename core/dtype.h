#pragma once
// Element types of weights, as found in safetensors and GGUF files, with their storage cost.
// Block-quantised types (ggml's Q8_0, Q4_K, ...) store `block_elements` weights in `block_bytes`.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace switchyard {

enum class DType : std::uint8_t {
  f64, f32, f16, bf16, f8_e4m3, f8_e5m2, i64, i32, i16, i8, u8, boolean,
  q8_0, q6_k, q5_k, q4_k, q3_k, q2_k, q4_0, q4_1, q5_0, q5_1,
  // The IQ types (lattice and non-linear codebooks) and OCP's MXFP4.
  iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m, iq4_nl, iq4_xs, mxfp4,
};

struct DTypeInfo {
  DType dtype;
  const char* name;             // our name: "bf16", "q4_k"
  const char* safetensors_name; // "BF16", or nullptr where safetensors has no such type
  int block_elements;           // 1 for plain types
  int block_bytes;              // element size for plain types
  int ggml_type;                // the type's number in GGUF's tensor infos (ggml_type), -1 where none
};

const DTypeInfo& dtype_info(DType dtype);
// Every DType, in enum order.
std::span<const DTypeInfo> all_dtypes();
const char* dtype_name(DType dtype);
std::optional<DType> dtype_from_safetensors(std::string_view name);
// The DType of a GGUF tensor's ggml_type number; nullopt for a number we do not read (the ternary
// and repacked types, NVFP4, Q8_1 and Q8_K, which only activations use, or no type at all).
std::optional<DType> dtype_from_ggml_type(std::uint32_t ggml_type);
// Whether the type stores blocks of weights with their scales (ggml's Q, K, IQ and MXFP4 types).
inline bool is_block_quantized(DType dtype) { return dtype >= DType::q8_0; }
// Bytes needed to store `elements` weights; a partial block still takes a whole block.
std::uint64_t storage_bytes(DType dtype, std::uint64_t elements);

}  // namespace switchyard
