#include "core/checkpoint.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "core/error.h"
#include "core/gguf.h"
#include "core/gguf_model.h"
#include "core/half_float.h"
#include "core/quant_formats.h"
#include "core/random_weights.h"
#include "core/text.h"
#include "core/weight_dtypes.h"

namespace switchyard {
namespace {

struct MappedStorage final : Storage {
  MappedFile file;
};

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string dtype_list(std::span<const DType> dtypes) {
  std::string wanted;
  for (DType d : dtypes) wanted += (wanted.empty() ? "" : " or ") + std::string(dtype_name(d));
  return wanted;
}

bool contains(std::span<const DType> dtypes, DType dtype) {
  for (DType d : dtypes)
    if (d == dtype) return true;
  return false;
}

// Rows [0, rows) of `t` ([rows, columns] in any dtype) decoded to f32.
std::vector<float> to_f32(const Tensor& t) {
  const std::int64_t columns = t.rank() == 0 ? 1 : t.dim(-1);
  const std::int64_t rows = columns == 0 ? 0 : t.numel() / columns;
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  quant::dequantize_rows(t.dtype(), t.data(), out.data(), rows, columns);
  return out;
}

// `values` as a host tensor of `dtype` (f32, or bf16 rounded to nearest even).
Tensor from_f32(const std::vector<float>& values, std::vector<std::int64_t> shape, DType dtype) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  if (dtype == DType::f32) {
    std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  } else {
    auto* bits = t.data_as<std::uint16_t>();
    for (std::size_t i = 0; i < values.size(); ++i) bits[i] = bf16_bits_from_f32(values[i]);
  }
  return t;
}

// llama.cpp's converter reorders the rows of each head of q_proj and k_proj for its interleaved
// RoPE: the checkpoint's row t * head_dim / 2 + j (t in {0, 1}) becomes row 2 j + t. Undone here,
// whole rows at a time, so any dtype (a row is whole blocks).
Tensor undo_interleaved_rope_rows(const Tensor& t, int head_dim, const std::string& where) {
  const std::int64_t rows = t.dim(0);
  if (head_dim <= 0 || head_dim % 2 != 0 || rows % head_dim != 0)
    throw InputError(where + ": " + std::to_string(rows) + " rows are not whole heads of " + std::to_string(head_dim),
                     kExitBadContent);
  Tensor out = Tensor::empty(t.dtype(), t.shape());
  const std::size_t row_bytes = t.bytes() / static_cast<std::size_t>(rows);
  const auto* from = static_cast<const std::byte*>(t.data());
  auto* to = static_cast<std::byte*>(out.data());
  const std::int64_t half = head_dim / 2;
  for (std::int64_t head = 0; head < rows / head_dim; ++head)
    for (std::int64_t part = 0; part < 2; ++part)
      for (std::int64_t j = 0; j < half; ++j) {
        const std::int64_t checkpoint_row = head * head_dim + part * half + j;
        const std::int64_t file_row = head * head_dim + 2 * j + part;
        std::memcpy(to + static_cast<std::size_t>(checkpoint_row) * row_bytes,
                    from + static_cast<std::size_t>(file_row) * row_bytes, row_bytes);
      }
  return out;
}

}  // namespace

Checkpoint Checkpoint::open_gguf(const std::filesystem::path& path, const ModelConfig& config) {
  Checkpoint c;
  c.gguf_ = std::make_shared<const GgufFile>(GgufFile::open(path));
  c.config_ = config;
  return c;
}

std::uint64_t Checkpoint::file_bytes() const {
  if (gguf_) return gguf_->total_file_bytes();
  std::uint64_t bytes = 0;
  for (const SafetensorsHeader& shard : index_.shards) bytes += shard.file_bytes;
  return bytes;
}

std::vector<std::span<const std::byte>> Checkpoint::file_views() const {
  if (gguf_) return gguf_->file_views();
  std::vector<std::span<const std::byte>> views;
  for (const auto& shard : shards_) views.emplace_back(static_cast<const std::byte*>(shard->data), shard->bytes);
  return views;
}

DType Checkpoint::stored_dtype(const std::string& name) const {
  if (gguf_) {
    const auto location = gguf_location(*config_, name);
    if (location) {
      if (const GgufTensorInfo* info = gguf_->find_tensor(location->tensor)) return info->dtype;
      // kv_b_proj split in two: dequantized and joined, so f32 like any converted tensor.
      if (location->transform == GgufLocation::Transform::kv_b_from_split) return DType::f32;
    }
    throw InputError("tensor '" + name + "' is not in " + gguf_->files().front().string(), kExitBadContent);
  }
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) throw InputError("tensor '" + name + "' is not in the checkpoint", kExitBadContent);
  return index_.tensors[it->second].tensor.dtype;
}

// The GGUF tensor for checkpoint tensor `name` with `shape`, as stored (dtype unchecked).
Tensor Checkpoint::get_gguf(const std::string& name, const std::vector<std::int64_t>& shape) const {
  const std::string file = gguf_->files().front().string();
  const auto location = gguf_location(*config_, name);
  if (!location) throw InputError("tensor '" + name + "' has no place in a GGUF file (" + file + ")", kExitBadContent);
  const GgufTensorInfo* info = gguf_->find_tensor(location->tensor);
  const std::string where = "tensor " + quoted_excerpt(location->tensor) + " (" + name + ") in " + file;
  if (!info && location->transform == GgufLocation::Transform::kv_b_from_split) {
    // kv_b_proj [heads * (nope + v), kv_lora] from attn_k_b [heads, kv_lora, nope] (transposed per
    // head) and attn_v_b [heads, v, kv_lora].
    const ModelConfig& c = *config_;
    const int layer = std::stoi(name.substr(std::string("model.layers.").size()));
    const std::int64_t heads = c.num_attention_heads, nope = c.qk_nope_head_dim, v = c.v_head_dim, lora = c.kv_lora_rank;
    const std::string k_name = gguf_k_b_name(layer), v_name = gguf_v_b_name(layer);
    const GgufTensorInfo* k_info = gguf_->find_tensor(k_name);
    const GgufTensorInfo* v_info = gguf_->find_tensor(v_name);
    if (!k_info || !v_info)
      throw InputError("tensor '" + name + "' is not in " + file + ": neither " + location->tensor + " nor " +
                           (k_info ? v_name : k_name) + " is there",
                       kExitBadContent);
    const std::vector<std::int64_t> k_shape = gguf_k_b_shape(c), v_shape = gguf_v_b_shape(c);
    if (k_info->shape != k_shape || v_info->shape != v_shape)
      throw InputError(k_name + " and " + v_name + " in " + file + " have shapes " + shape_text(k_info->shape) + " and " +
                           shape_text(v_info->shape) + " but the model expects " + shape_text(k_shape) + " and " +
                           shape_text(v_shape),
                       kExitBadContent);
    const std::vector<float> k_b = to_f32(gguf_->tensor(*k_info)), v_b = to_f32(gguf_->tensor(*v_info));
    std::vector<float> kv_b(static_cast<std::size_t>(heads * (nope + v) * lora));
    for (std::int64_t h = 0; h < heads; ++h) {
      float* rows = kv_b.data() + h * (nope + v) * lora;
      for (std::int64_t i = 0; i < nope; ++i)
        for (std::int64_t j = 0; j < lora; ++j) rows[i * lora + j] = k_b[static_cast<std::size_t>((h * lora + j) * nope + i)];
      std::memcpy(rows + nope * lora, v_b.data() + h * v * lora, static_cast<std::size_t>(v * lora) * sizeof(float));
    }
    const std::vector<std::int64_t> kv_shape{heads * (nope + v), lora};
    if (kv_shape != shape)
      throw InputError(where + " has shape " + shape_text(kv_shape) + " but the model expects " + shape_text(shape),
                       kExitBadContent);
    return from_f32(kv_b, kv_shape, DType::f32);
  }
  if (!info) throw InputError(where + ": not in the file", kExitBadContent);
  const std::vector<std::int64_t> stored_shape = gguf_stored_shape(*config_, *location, shape);
  if (info->shape != stored_shape)
    throw InputError(where + " has shape " + shape_text(info->shape) + " but the model expects " + shape_text(stored_shape) +
                         gguf_shape_origin(*config_, *location),
                     kExitBadContent);
  Tensor t = gguf_->tensor(*info);
  if (location->expert >= 0) {
    if (location->expert >= t.dim(0))
      throw std::invalid_argument(where + " holds no expert " + std::to_string(location->expert));
    t = t.rows(location->expert, 1).reshaped({t.dim(1), t.dim(2)});
  }
  if (location->transform == GgufLocation::Transform::interleaved_rope_rows)
    t = undo_interleaved_rope_rows(t, config_->head_dim, where);
  return t;
}

Checkpoint Checkpoint::open(const std::filesystem::path& model_dir) {
  Checkpoint c;
  c.index_ = read_checkpoint_index(model_dir);
  for (const SafetensorsHeader& shard : c.index_.shards) {
    auto storage = std::make_shared<MappedStorage>();
    storage->file = MappedFile::open(shard.file);
    if (storage->file.size() != shard.file_bytes)
      throw InputError(shard.file.string() + ": changed size while being opened");
    storage->data = const_cast<std::byte*>(storage->file.data());
    storage->bytes = storage->file.size();
    storage->device = Device::cpu();
    storage->read_only_pages = true;  // a read-only mapping of the whole file
    c.shards_.push_back(std::move(storage));
  }
  for (std::size_t i = 0; i < c.index_.tensors.size(); ++i) c.by_name_.emplace(c.index_.tensors[i].tensor.name, i);
  return c;
}

Tensor Checkpoint::get(const std::string& name, const std::vector<std::int64_t>& shape,
                       std::span<const DType> dtypes) const {
  if (gguf_) {
    Tensor t = get_gguf(name, shape);
    if (!contains(dtypes, t.dtype()))
      throw InputError("tensor '" + name + "' in " + gguf_->files().front().string() + " is " + dtype_name(t.dtype()) +
                           " but this operator takes " + dtype_list(dtypes),
                       kExitBadContent);
    return t;
  }
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) throw InputError("tensor '" + name + "' is not in the checkpoint", kExitBadContent);
  const CheckpointTensor& ct = index_.tensors[it->second];
  const SafetensorsHeader& shard = index_.shards[ct.shard];
  const std::string where = "tensor '" + name + "' in " + shard.file.string();
  if (ct.tensor.shape != shape)
    throw InputError(where + " has shape " + shape_text(ct.tensor.shape) + " but the model expects " + shape_text(shape),
                     kExitBadContent);
  if (!contains(dtypes, ct.tensor.dtype))
    throw InputError(where + " is " + dtype_name(ct.tensor.dtype) + " but this operator takes " + dtype_list(dtypes),
                     kExitBadContent);
  const std::size_t offset = shard.data_offset + ct.tensor.begin;
  // The format aligns nothing: a header length that is not a multiple of 8, or an odd-sized tensor
  // before this one, can start its elements at any byte. Kernels read elements through typed
  // pointers, so such a tensor gets an aligned copy of its own; the files common writers produce
  // (headers padded to 8 bytes) stay zero-copy.
  const auto element_bytes = static_cast<std::size_t>(dtype_info(ct.tensor.dtype).block_bytes);
  const Storage& mapped = *shards_[ct.shard];
  if ((reinterpret_cast<std::uintptr_t>(mapped.data) + offset) % element_bytes == 0)
    return Tensor(ct.tensor.dtype, ct.tensor.shape, shards_[ct.shard], offset);
  const std::size_t bytes = ct.tensor.end - ct.tensor.begin;
  std::shared_ptr<Storage> copy = allocate_host(bytes);
  if (bytes > 0) std::memcpy(copy->data, mapped.data + offset, bytes);
  return Tensor(ct.tensor.dtype, ct.tensor.shape, std::move(copy));
}

}  // namespace switchyard

namespace switchyard {

namespace {

// An FP8 E4M3 ("fn": no infinities; S.1111.111 is NaN) byte as a float, exactly.
float e4m3_to_float(std::uint8_t byte) {
  const int exponent = (byte >> 3) & 15, mantissa = byte & 7;
  float magnitude;
  if (exponent == 15 && mantissa == 7) magnitude = std::numeric_limits<float>::quiet_NaN();
  else if (exponent == 0) magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m / 8 * 2^-6
  else magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return byte & 0x80 ? -magnitude : magnitude;
}

}  // namespace

// A block-scaled FP8 matrix (DeepSeek-V3's and Kimi-K2's release format): weight [rows, columns]
// in E4M3 with `<name>_scale_inv` [ceil(rows / 128), ceil(columns / 128)] (f32 or bf16), one
// factor per 128 x 128 tile: value = fp8 * scale_inv.
Tensor Checkpoint::fp8_converted(const std::string& name, const Tensor& weight, DType dtype) const {
  if (weight.rank() != 2)
    throw InputError("FP8 tensor '" + name + "' has " + std::to_string(weight.rank()) +
                         " dimensions; block-scaled FP8 is read for matrices", kExitBadContent);
  const std::string scale_name = name + "_scale_inv";
  if (by_name_.find(scale_name) == by_name_.end())
    throw InputError("FP8 tensor '" + name + "' has no '" + scale_name +
                         "': only block-scaled FP8 (quantization_config.quant_method fp8 with weight_block_size "
                         "[128, 128]) is read",
                     kExitBadContent);
  constexpr std::int64_t kTile = 128;
  const std::int64_t rows = weight.dim(0), columns = weight.dim(1);
  const std::int64_t tile_rows = (rows + kTile - 1) / kTile, tile_columns = (columns + kTile - 1) / kTile;
  const Tensor scale_tensor = get(scale_name, {tile_rows, tile_columns}, {DType::f32, DType::bf16});
  std::vector<float> scales(static_cast<std::size_t>(tile_rows * tile_columns));
  widen_to_f32(scale_tensor.dtype(), scale_tensor.data(), scales.size(), scales.data());
  float table[256];
  for (int b = 0; b < 256; ++b) table[b] = e4m3_to_float(static_cast<std::uint8_t>(b));
  Tensor out = Tensor::empty(dtype, weight.shape());
  const auto* bytes = weight.data_as<std::uint8_t>();
#pragma omp parallel for schedule(static) if (rows * columns >= (std::int64_t{1} << 20))
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* tile_scales = scales.data() + (r / kTile) * tile_columns;
    const std::uint8_t* row = bytes + r * columns;
    for (std::int64_t c = 0; c < columns; ++c) {
      const float value = table[row[c]] * tile_scales[c / kTile];
      if (dtype == DType::f32) out.data_as<float>()[r * columns + c] = value;
      else out.data_as<std::uint16_t>()[r * columns + c] = bf16_bits_from_f32(value);
    }
  }
  return out;
}

Tensor Checkpoint::get_converted(const std::string& name, const std::vector<std::int64_t>& shape, DType dtype) const {
  if (dtype != DType::f32 && dtype != DType::bf16)
    throw std::invalid_argument("Checkpoint::get_converted: to f32 or bf16 only");
  const DType stored = stored_dtype(name);
  if (stored == dtype) return get(name, shape, {dtype});
  if (stored == DType::f8_e4m3 && !gguf_) return fp8_converted(name, get(name, shape, {stored}), dtype);
  if (!is_runnable_weight_dtype(stored))
    throw InputError("tensor '" + name + "' is " + dtype_name(stored) + ", which cannot be converted to " + dtype_name(dtype),
                     kExitBadContent);
  const Tensor t = gguf_ ? get_gguf(name, shape) : get(name, shape, {stored});
  // Decoded a row at a time in parallel, straight into the result: no f32 copy of the whole matrix.
  const std::int64_t columns = t.rank() == 0 ? 1 : t.dim(-1);
  const std::int64_t rows = columns == 0 ? 0 : t.numel() / columns;
  Tensor out = Tensor::empty(dtype, t.shape());
  if (dtype == DType::f32) quant::dequantize_rows(stored, t.data(), out.data_as<float>(), rows, columns);
  else quant::dequantize_rows_to_bf16(stored, t.data(), out.data_as<std::uint16_t>(), rows, columns);
  return out;
}

}  // namespace switchyard
