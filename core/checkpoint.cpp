#include "core/checkpoint.h"

#include "core/error.h"

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

}  // namespace

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
                       std::initializer_list<DType> dtypes) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) throw InputError("tensor '" + name + "' is not in the checkpoint");
  const CheckpointTensor& ct = index_.tensors[it->second];
  const SafetensorsHeader& shard = index_.shards[ct.shard];
  const std::string where = "tensor '" + name + "' in " + shard.file.string();
  if (ct.tensor.shape != shape)
    throw InputError(where + " has shape " + shape_text(ct.tensor.shape) + " but the model expects " + shape_text(shape));
  bool dtype_ok = false;
  std::string wanted;
  for (DType d : dtypes) {
    dtype_ok |= d == ct.tensor.dtype;
    wanted += (wanted.empty() ? "" : " or ") + std::string(dtype_name(d));
  }
  if (!dtype_ok)
    throw InputError(where + " is " + dtype_name(ct.tensor.dtype) + " but this operator takes " + wanted);
  return Tensor(ct.tensor.dtype, ct.tensor.shape, shards_[ct.shard], shard.data_offset + ct.tensor.begin);
}

}  // namespace switchyard
