#include "core/gguf_model_writer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/gguf_model.h"
#include "core/gguf_writer.h"
#include "core/quant_formats.h"
#include "core/random_weights.h"

namespace switchyard {
namespace {

// One checkpoint tensor's random rows: [rows, columns] from its own stream.
struct Source {
  std::string name;
  WeightInit init;
  std::int64_t rows = 0, columns = 0;
};

// A tensor of the file and the checkpoint tensors it is made of.
struct FileTensor {
  enum class Kind { plain, experts, interleaved_rope_rows, k_b, v_b };
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;  // row-major, outermost first
  Kind kind = Kind::plain;
  std::vector<Source> sources;  // plain, rows: one; experts: one per expert, in order; k_b, v_b: kv_b_proj
};

// Rows [first, first + count) of `source` as f32 (the values of make-model's f32 checkpoint; its
// bf16 checkpoint holds them rounded).
void generate_rows(const Source& source, std::uint64_t seed, std::int64_t first, std::int64_t count, float* out) {
  const std::uint64_t key = tensor_stream_key(seed, source.name);
  generate_weight_bytes(source.init, key, DType::f32, static_cast<std::uint64_t>(first * source.columns),
                        {reinterpret_cast<std::byte*>(out), static_cast<std::size_t>(count * source.columns) * sizeof(float)});
}

// `rows` f32 rows of `columns` stored as `dtype` into `out`.
void encode_rows(DType dtype, const float* in, std::byte* out, std::int64_t rows, std::int64_t columns) {
  if (dtype == DType::f32) std::memcpy(out, in, static_cast<std::size_t>(rows * columns) * sizeof(float));
  else quant::quantize_rows(dtype, in, out, rows, columns);
}

std::uint64_t row_bytes(DType dtype, std::int64_t columns) { return storage_bytes(dtype, static_cast<std::uint64_t>(columns)); }

// Chunks of about 16 MiB of f32 rows: memory stays bounded whatever the tensor's size.
std::int64_t rows_per_chunk(std::int64_t columns) {
  return std::max<std::int64_t>(1, (std::int64_t{4} << 20) / std::max<std::int64_t>(columns, 1));
}

void fill_plain(const Source& source, DType dtype, std::uint64_t seed, std::byte* out) {
  const std::int64_t chunk = rows_per_chunk(source.columns);
  std::vector<float> values(static_cast<std::size_t>(std::min(chunk, source.rows) * source.columns));
  for (std::int64_t first = 0; first < source.rows; first += chunk) {
    const std::int64_t count = std::min(chunk, source.rows - first);
    generate_rows(source, seed, first, count, values.data());
    encode_rows(dtype, values.data(), out + static_cast<std::size_t>(first) * row_bytes(dtype, source.columns), count,
                source.columns);
  }
}

std::vector<float> all_rows(const Source& source, std::uint64_t seed) {
  std::vector<float> values(static_cast<std::size_t>(source.rows * source.columns));
  generate_rows(source, seed, 0, source.rows, values.data());
  return values;
}

void fill(const FileTensor& t, const ModelConfig& c, std::uint64_t seed, std::byte* out) {
  using Kind = FileTensor::Kind;
  switch (t.kind) {
    case Kind::plain: fill_plain(t.sources.front(), t.dtype, seed, out); return;
    case Kind::experts: {
      const Source& first = t.sources.front();
      const std::uint64_t expert_bytes = static_cast<std::uint64_t>(first.rows) * row_bytes(t.dtype, first.columns);
      for (std::size_t e = 0; e < t.sources.size(); ++e) fill_plain(t.sources[e], t.dtype, seed, out + e * expert_bytes);
      return;
    }
    case Kind::interleaved_rope_rows: {
      // The checkpoint's row t * head_dim / 2 + j of a head is the file's row 2 j + t.
      const Source& s = t.sources.front();
      const std::vector<float> rows = all_rows(s, seed);
      std::vector<float> file(rows.size());
      const std::int64_t head_dim = c.head_dim, half = head_dim / 2;
      for (std::int64_t head = 0; head < s.rows / head_dim; ++head)
        for (std::int64_t part = 0; part < 2; ++part)
          for (std::int64_t j = 0; j < half; ++j)
            std::memcpy(&file[static_cast<std::size_t>((head * head_dim + 2 * j + part) * s.columns)],
                        &rows[static_cast<std::size_t>((head * head_dim + part * half + j) * s.columns)],
                        static_cast<std::size_t>(s.columns) * sizeof(float));
      encode_rows(t.dtype, file.data(), out, s.rows, s.columns);
      return;
    }
    case Kind::k_b:
    case Kind::v_b: {
      // kv_b_proj [heads * (nope + v), kv_lora]: each head's nope key rows, transposed, are
      // attn_k_b [heads, kv_lora, nope]; its v value rows are attn_v_b [heads, v, kv_lora].
      const std::vector<float> kv_b = all_rows(t.sources.front(), seed);
      const std::int64_t heads = c.num_attention_heads, nope = c.qk_nope_head_dim, v = c.v_head_dim, lora = c.kv_lora_rank;
      std::vector<float> part;
      if (t.kind == Kind::k_b) {
        part.resize(static_cast<std::size_t>(heads * lora * nope));
        for (std::int64_t h = 0; h < heads; ++h)
          for (std::int64_t j = 0; j < lora; ++j)
            for (std::int64_t i = 0; i < nope; ++i)
              part[static_cast<std::size_t>((h * lora + j) * nope + i)] = kv_b[static_cast<std::size_t>((h * (nope + v) + i) * lora + j)];
        encode_rows(t.dtype, part.data(), out, heads * lora, nope);
      } else {
        part.resize(static_cast<std::size_t>(heads * v * lora));
        for (std::int64_t h = 0; h < heads; ++h)
          std::memcpy(&part[static_cast<std::size_t>(h * v * lora)], &kv_b[static_cast<std::size_t>((h * (nope + v) + nope) * lora)],
                      static_cast<std::size_t>(v * lora) * sizeof(float));
        encode_rows(t.dtype, part.data(), out, heads * v, lora);
      }
      return;
    }
  }
}

// The file's tensors for the tree, in the tree's order (a fused tensor where its first expert is).
std::vector<FileTensor> plan_file(const ModuleTree& tree, std::int64_t head_tokens) {
  const ModelConfig& c = tree.config();
  std::vector<FileTensor> tensors;
  std::unordered_map<std::string, std::size_t> by_name;
  for (const Module& m : tree.modules())
    for (const Parameter& p : m.params) {
      const std::string name = std::string(m.name) + "." + std::string(p.name);
      const auto location = gguf_location(c, name);
      if (!location) throw InputError(name + " has no place in a GGUF file of " + c.model_type);
      const std::int64_t columns = p.shape.rank == 0 ? 1 : p.shape.dims[static_cast<std::size_t>(p.shape.rank - 1)];
      const std::int64_t rows = columns == 0 ? 0 : static_cast<std::int64_t>(p.shape.elements()) / columns;
      const Source source{name, weight_init_for(m, p, head_tokens), rows, columns};
      std::vector<std::int64_t> shape(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
      using Transform = GgufLocation::Transform;
      if (location->expert >= 0) {
        const auto [it, fresh] = by_name.emplace(location->tensor, tensors.size());
        if (fresh) {
          shape.insert(shape.begin(), c.n_routed_experts);
          tensors.push_back({location->tensor, gguf_storage_type(p.dtype, columns), shape, FileTensor::Kind::experts, {}});
          tensors.back().sources.resize(static_cast<std::size_t>(c.n_routed_experts));
        }
        tensors[it->second].sources.at(static_cast<std::size_t>(location->expert)) = source;
      } else if (location->transform == Transform::kv_b_from_split) {
        const int layer = std::stoi(name.substr(std::string("model.layers.").size()));
        const std::int64_t heads = c.num_attention_heads;
        tensors.push_back({gguf_k_b_name(layer), gguf_storage_type(p.dtype, c.qk_nope_head_dim),
                           {heads, c.kv_lora_rank, c.qk_nope_head_dim}, FileTensor::Kind::k_b, {source}});
        tensors.push_back({gguf_v_b_name(layer), gguf_storage_type(p.dtype, c.kv_lora_rank),
                           {heads, c.v_head_dim, c.kv_lora_rank}, FileTensor::Kind::v_b, {source}});
      } else {
        const FileTensor::Kind kind = location->transform == Transform::interleaved_rope_rows
                                          ? FileTensor::Kind::interleaved_rope_rows
                                          : FileTensor::Kind::plain;
        tensors.push_back({location->tensor, gguf_storage_type(p.dtype, columns), shape, kind, {source}});
      }
    }
  return tensors;
}

// Metadata as llama.cpp reads it: integers as u32 (i32 when negative, u64 past 32 bits), floats
// as f32.
void set_metadata(GgufWriter& writer, const nlohmann::json& metadata) {
  for (const auto& [key, value] : metadata.items()) {
    if (value.is_string()) writer.set_string(key, value.get<std::string>());
    else if (value.is_boolean()) writer.set_bool(key, value.get<bool>());
    else if (value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0)) {
      const auto n = value.get<std::uint64_t>();
      if (n <= std::numeric_limits<std::uint32_t>::max()) writer.set_u32(key, static_cast<std::uint32_t>(n));
      else writer.set_u64(key, n);
    } else if (value.is_number_integer()) writer.set_i32(key, static_cast<std::int32_t>(value.get<std::int64_t>()));
    else if (value.is_number_float()) writer.set_f32(key, value.get<float>());
    else throw InputError("GGUF metadata " + key + ": a value of type " + std::string(value.type_name()) + " cannot be written");
  }
}

}  // namespace

GgufModelSummary write_gguf_model(const ModuleTree& tree, std::uint64_t seed, const std::filesystem::path& file,
                                  const std::function<void(GgufWriter&)>& tokenizer_metadata, std::int64_t head_tokens,
                                  const std::function<void(std::uint64_t, std::uint64_t)>& on_progress) {
  const ModelConfig& config = tree.config();
  nlohmann::json metadata = gguf_metadata(config);
  metadata["general.quantization_version"] = 2;  // ggml's block formats as of 2023: those of core/quant_blocks.h
  if (!tokenizer_metadata) metadata["tokenizer.ggml.model"] = "none";  // no vocabulary: llama.cpp runs on token ids
  GgufWriter writer;
  set_metadata(writer, metadata);
  if (tokenizer_metadata) tokenizer_metadata(writer);
  GgufModelSummary summary;
  std::uint64_t done_bytes = 0;  // the fills run in writer.write, after summary.tensor_bytes is whole
  for (FileTensor& t : plan_file(tree, head_tokens)) {
    std::uint64_t elements = 1;
    for (std::int64_t d : t.shape) elements *= static_cast<std::uint64_t>(d);
    const std::uint64_t bytes = storage_bytes(t.dtype, elements);
    summary.tensor_bytes += bytes;
    ++summary.tensors;
    ++summary.tensors_by_type[t.dtype];
    std::string name = t.name;
    const DType dtype = t.dtype;
    std::vector<std::int64_t> shape = t.shape;
    writer.add_tensor(std::move(name), dtype, std::move(shape),
                      [t = std::move(t), &config, seed, bytes, &done_bytes, &summary, &on_progress](std::byte* out) {
                        fill(t, config, seed, out);
                        done_bytes += bytes;
                        if (on_progress) on_progress(done_bytes, summary.tensor_bytes);
                      });
  }
  summary.file_bytes = writer.write(file);
  return summary;
}

}  // namespace switchyard
