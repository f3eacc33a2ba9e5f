#include "core/checkpoint.h"

#include <cstring>

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
  if (it == by_name_.end()) throw InputError("tensor '" + name + "' is not in the checkpoint", kExitBadContent);
  const CheckpointTensor& ct = index_.tensors[it->second];
  const SafetensorsHeader& shard = index_.shards[ct.shard];
  const std::string where = "tensor '" + name + "' in " + shard.file.string();
  if (ct.tensor.shape != shape)
    throw InputError(where + " has shape " + shape_text(ct.tensor.shape) + " but the model expects " + shape_text(shape),
                     kExitBadContent);
  bool dtype_ok = false;
  std::string wanted;
  for (DType d : dtypes) {
    dtype_ok |= d == ct.tensor.dtype;
    wanted += (wanted.empty() ? "" : " or ") + std::string(dtype_name(d));
  }
  if (!dtype_ok)
    throw InputError(where + " is " + dtype_name(ct.tensor.dtype) + " but this operator takes " + wanted,
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
