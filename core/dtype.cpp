#include "core/dtype.h"

#include <array>

namespace switchyard {
namespace {

// Sizes of ggml's block formats: a 256-weight super-block for the k-quants, 32 weights for the
// others; the numbers are ggml_type's (ggml.h), as GGUF's tensor infos store them.
constexpr std::array<DTypeInfo, 32> kDTypes = {{
    {DType::f64, "f64", "F64", 1, 8, 28},
    {DType::f32, "f32", "F32", 1, 4, 0},
    {DType::f16, "f16", "F16", 1, 2, 1},
    {DType::bf16, "bf16", "BF16", 1, 2, 30},
    {DType::f8_e4m3, "f8_e4m3", "F8_E4M3", 1, 1, -1},
    {DType::f8_e5m2, "f8_e5m2", "F8_E5M2", 1, 1, -1},
    {DType::i64, "i64", "I64", 1, 8, 27},
    {DType::i32, "i32", "I32", 1, 4, 26},
    {DType::i16, "i16", "I16", 1, 2, 25},
    {DType::i8, "i8", "I8", 1, 1, 24},
    {DType::u8, "u8", "U8", 1, 1, -1},
    {DType::boolean, "bool", "BOOL", 1, 1, -1},
    {DType::q8_0, "q8_0", nullptr, 32, 34, 8},
    {DType::q6_k, "q6_k", nullptr, 256, 210, 14},
    {DType::q5_k, "q5_k", nullptr, 256, 176, 13},
    {DType::q4_k, "q4_k", nullptr, 256, 144, 12},
    {DType::q3_k, "q3_k", nullptr, 256, 110, 11},
    {DType::q2_k, "q2_k", nullptr, 256, 84, 10},
    {DType::q4_0, "q4_0", nullptr, 32, 18, 2},
    {DType::q4_1, "q4_1", nullptr, 32, 20, 3},
    {DType::q5_0, "q5_0", nullptr, 32, 22, 6},
    {DType::q5_1, "q5_1", nullptr, 32, 24, 7},
    {DType::iq2_xxs, "iq2_xxs", nullptr, 256, 66, 16},
    {DType::iq2_xs, "iq2_xs", nullptr, 256, 74, 17},
    {DType::iq2_s, "iq2_s", nullptr, 256, 82, 22},
    {DType::iq3_xxs, "iq3_xxs", nullptr, 256, 98, 18},
    {DType::iq3_s, "iq3_s", nullptr, 256, 110, 21},
    {DType::iq1_s, "iq1_s", nullptr, 256, 50, 19},
    {DType::iq1_m, "iq1_m", nullptr, 256, 56, 29},
    {DType::iq4_nl, "iq4_nl", nullptr, 32, 18, 20},
    {DType::iq4_xs, "iq4_xs", nullptr, 256, 136, 23},
    {DType::mxfp4, "mxfp4", nullptr, 32, 17, 39},
}};
static_assert([] {
  for (std::size_t i = 0; i < kDTypes.size(); ++i)
    if (static_cast<std::size_t>(kDTypes[i].dtype) != i) return false;
  return true;
}(), "kDTypes is indexed by DType");

}  // namespace

const DTypeInfo& dtype_info(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)]; }
std::span<const DTypeInfo> all_dtypes() { return kDTypes; }
const char* dtype_name(DType dtype) { return dtype_info(dtype).name; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const DTypeInfo& info : kDTypes)
    if (info.safetensors_name && name == info.safetensors_name) return info.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_ggml_type(std::uint32_t ggml_type) {
  for (const DTypeInfo& info : kDTypes)
    if (info.ggml_type >= 0 && static_cast<std::uint32_t>(info.ggml_type) == ggml_type) return info.dtype;
  return std::nullopt;
}

std::uint64_t storage_bytes(DType dtype, std::uint64_t elements) {
  const DTypeInfo& info = dtype_info(dtype);
  const std::uint64_t blocks = (elements + info.block_elements - 1) / info.block_elements;
  return blocks * static_cast<std::uint64_t>(info.block_bytes);
}

}  // namespace switchyard
