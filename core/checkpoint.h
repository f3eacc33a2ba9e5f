#pragma once
// Checkpoint: the weights of a safetensors checkpoint (single file or sharded), memory-mapped,
// handed out as zero-copy tensors. Every request states the dtype(s) and shape it expects, and a
// tensor that differs is an error naming the tensor, its file and both shapes.
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "core/safetensors.h"
#include "core/tensor.h"

namespace switchyard {

class Checkpoint {
 public:
  // Reads the headers of every shard (validated) and maps the shards. Throws InputError.
  static Checkpoint open(const std::filesystem::path& model_dir);

  bool has(const std::string& name) const { return by_name_.count(name) > 0; }
  // The tensor as stored, in place in the mapping, or copied into aligned memory when its first
  // element is not aligned to the element size (the format allows any offset). Throws InputError
  // (exit 1) when it is missing, has another shape, or a dtype outside `dtypes`.
  Tensor get(const std::string& name, const std::vector<std::int64_t>& shape, std::initializer_list<DType> dtypes) const;
  const CheckpointIndex& index() const { return index_; }

 private:
  CheckpointIndex index_;
  std::vector<std::shared_ptr<Storage>> shards_;  // one mapping per shard
  std::unordered_map<std::string, std::size_t> by_name_;  // -> index_.tensors
};

}  // namespace switchyard
