#pragma once
// Checkpoint: the weights of a safetensors checkpoint (single file or sharded) or of a GGUF model
// (core/gguf.h, by the names core/gguf_model.h maps), memory-mapped, handed out as zero-copy
// tensors by their checkpoint names. Every request states the dtype(s) and shape it expects, and
// a tensor that differs is an error naming the tensor, its file and both shapes.
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "core/model_config.h"
#include "core/safetensors.h"
#include "core/tensor.h"

namespace switchyard {

class GgufFile;

class Checkpoint {
 public:
  // Reads the headers of every shard (validated) and maps the shards. Throws InputError.
  static Checkpoint open(const std::filesystem::path& model_dir);
  // A GGUF model (a file, the first of a split set, or a directory holding one), read for the
  // module tree of `config`. Throws InputError.
  static Checkpoint open_gguf(const std::filesystem::path& path, const ModelConfig& config);

  // The dtype tensor `name` is stored as; InputError (exit 1) naming it when it is missing.
  DType stored_dtype(const std::string& name) const;
  // The tensor as stored, in place in the mapping, or copied into aligned memory when its first
  // element is not aligned to the element size (the format allows any offset). GGUF tensors that
  // llama.cpp's converter transformed are turned back (core/gguf_model.h GgufLocation): a copy.
  // Throws InputError (exit 1) when it is missing, has another shape, or a dtype outside `dtypes`.
  Tensor get(const std::string& name, const std::vector<std::int64_t>& shape, std::span<const DType> dtypes) const;
  Tensor get(const std::string& name, const std::vector<std::int64_t>& shape, std::initializer_list<DType> dtypes) const {
    return get(name, shape, std::span<const DType>(dtypes.begin(), dtypes.size()));
  }
  // The same converted to `dtype` (f32 or bf16) when stored otherwise (a block-quantised or
  // 16-bit tensor, dequantized by the format's reference; a block-scaled FP8 matrix times its
  // `<name>_scale_inv` tiles): a copy then, the stored tensor when it is `dtype` already.
  Tensor get_converted(const std::string& name, const std::vector<std::int64_t>& shape, DType dtype) const;
  // A safetensors checkpoint's tensor directory (empty for a GGUF).
  const CheckpointIndex& index() const { return index_; }
  // The bytes of the files the weights are mapped from.
  std::uint64_t file_bytes() const;
  // Those files' whole bytes, as mapped (what a prefetch reads: core/page_prefetch.h).
  std::vector<std::span<const std::byte>> file_views() const;
  bool is_gguf() const { return gguf_ != nullptr; }

 private:
  Tensor get_gguf(const std::string& name, const std::vector<std::int64_t>& shape) const;
  Tensor fp8_converted(const std::string& name, const Tensor& weight, DType dtype) const;

  CheckpointIndex index_;
  std::shared_ptr<const GgufFile> gguf_;  // a GGUF model's file(s); then index_ is empty
  std::optional<ModelConfig> config_;     // the GGUF model's config, for its names
  std::vector<std::shared_ptr<Storage>> shards_;  // one mapping per shard
  std::unordered_map<std::string, std::size_t> by_name_;  // -> index_.tensors
};

}  // namespace switchyard
