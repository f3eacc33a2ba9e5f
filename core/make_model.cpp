#include "core/make_model.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/arch_presets.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/gguf_model_writer.h"
#include "core/input_file.h"
#include "core/module_tree.h"
#include "core/random_weights.h"
#include "core/quant_formats.h"
#include "core/safetensors_writer.h"
#include "core/text.h"

namespace switchyard {
namespace {

namespace fs = std::filesystem;

// Generated and written per chunk, so memory stays at this size whatever the tensor's.
constexpr std::uint64_t kChunkBytes = 16ULL << 20;

struct PlannedTensor {
  SafetensorsEntry entry;
  WeightInit init;
};
using Shard = std::vector<PlannedTensor>;

const WeightScheme& scheme_for(const MakeModelOptions& o) {
  if (o.format == "gguf") {
    const WeightScheme* scheme = find_weight_scheme(o.dtype);
    if (!scheme || scheme->fp8_block_scales)
      throw InputError("--dtype '" + o.dtype + "' is not a GGUF weight type; give one of " +
                       join(gguf_weight_scheme_names(), ", "));
    const DType experts = scheme->dtype_for(TensorKind::expert_down, 0, 1);
    std::string ggml_name = dtype_name(experts);  // llama-quantize's spelling: IQ2_XXS
    for (char& c : ggml_name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!quant::has_encoder(experts))
      throw InputError("--dtype '" + o.dtype + "': make-model does not write " + dtype_name(experts) +
                       " (its lattice search is llama.cpp's: llama-quantize --imatrix FILE model.gguf OUT " +
                       ggml_name + " on a make-model --dtype bf16 file); run and check read it");
    return *scheme;
  }
  if (o.format != "safetensors") throw InputError("--format '" + o.format + "' is not one of safetensors, gguf");
  if (o.dtype != "bf16" && o.dtype != "f32" && o.dtype != "fp8")
    throw InputError("--dtype '" + o.dtype + "' is not supported for safetensors; make-model writes bf16, f32 or fp8 "
                     "(ggml's block types: --format gguf)");
  return *find_weight_scheme(o.dtype);
}

ModelConfig preset_config(const MakeModelOptions& o) {
  if (!find_arch_preset(o.preset)) {
    std::vector<std::string> names;
    for (const ArchPreset& p : arch_presets()) names.push_back(p.name);
    throw InputError("unknown --preset '" + o.preset + "'" + did_you_mean(o.preset, names) + "; presets: " + join(names, ", "));
  }
  ModelConfig config = preset_model_config(o.preset);
  if (o.layers) {
    if (*o.layers < 1 || *o.layers > 1024)
      throw InputError("--layers " + std::to_string(*o.layers) + " is outside [1, 1024]");
    config.num_hidden_layers = *o.layers;
    validate_model_config(config);  // the rules that depend on the layer count
  }
  if (o.vocab_size) {
    if (*o.vocab_size < 2 || *o.vocab_size > (std::int64_t{1} << 24))
      throw InputError("a vocabulary of " + std::to_string(*o.vocab_size) + " tokens is outside [2, 2^24]");
    config.vocab_size = *o.vocab_size;
    validate_model_config(config);
  }
  if (o.head_tokens < 0 || o.head_tokens > config.vocab_size)
    throw InputError("--head_tokens " + std::to_string(o.head_tokens) + " is outside [0, the vocabulary's " +
                     std::to_string(config.vocab_size) + "]");
  if (o.head_tokens > 0 && config.tie_word_embeddings)
    throw InputError("--head_tokens scales lm_head's rows, and " + o.preset + " ties lm_head to the embedding");
  config.torch_dtype = o.dtype == "f32" ? "float32" : "bfloat16";
  if (o.format == "gguf") config.num_nextn_predict_layers = 0;  // no MTP layers in the file
  return config;
}

// The files a checkpoint of make-model's consists of, and the temporaries AtomicFile writes them
// to (".<name>.tmp-<pid>-<n>"), which a killed run leaves behind.
bool is_checkpoint_file(const std::string& name) {
  static const std::regex checkpoint(R"((config\.json|model\.gguf|model\.safetensors|model\.safetensors\.index\.json|)"
                                     R"(model-\d{5}-of-\d{5}\.safetensors))");
  static const std::regex temporary(R"(\.(.+)\.tmp-\d+-\d+)");
  std::smatch parts;
  if (std::regex_match(name, parts, temporary)) return std::regex_match(parts[1].str(), checkpoint);
  return std::regex_match(name, checkpoint);
}

// The folder inside out_dir that a run writes its files into before they replace the old ones
// (".make-model-staging-<pid>"); a killed run leaves it behind.
std::string staging_name() { return ".make-model-staging-" + std::to_string(::getpid()); }
bool is_staging_folder(const std::string& name) {
  static const std::regex staging(R"(\.make-model-staging-\d+)");
  return std::regex_match(name, staging);
}

// The output directory, held for the whole run: an exclusive flock(2) on the directory itself (no
// lock file to leave behind), which the kernel drops when the process ends, however it ends.
// The new checkpoint is written whole into a staging folder inside it (the same file system, so
// moving a file out is a rename), and only then replaces the old one: a failed or killed run
// leaves the old checkpoint as it was.
class OutputDirectory {
 public:
  // Creates `dir` when it is missing and locks it. Another run's lock is an InputError, and so
  // is a non-empty directory without `force`. Temporaries and staging folders a killed run left
  // are removed; the old checkpoint's own files stay until commit().
  OutputDirectory(const fs::path& dir, bool force) : dir_(dir) {
    if (dir.empty()) throw InputError("--out is empty; give the directory to write the checkpoint into");
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      throw InputError(dir.string() + ": exists and is not a directory");
    created_ = fs::create_directories(dir, ec);
    if (ec) throw InputError(dir.string() + ": cannot create directory (" + ec.message() + ")");
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open the directory (" + std::string(std::strerror(errno)) + ")");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK)
        fail("another make-model is writing a checkpoint into this directory; wait for it to end or give another --out");
      fail("cannot lock the directory against other make-model runs (" + std::string(std::strerror(errno)) + ")");
    }
    // Only now, under the lock: a run that finished a moment ago has left a full directory.
    const bool empty = fs::is_empty(dir, ec);
    if (ec) fail("cannot list the directory (" + ec.message() + ")");
    if (!empty && !force) fail("directory is not empty; pass --force to overwrite the checkpoint in it");
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      const bool leftover = (entry.is_directory() && is_staging_folder(name)) ||
                            (entry.is_regular_file() && is_checkpoint_file(name) && name.front() == '.');
      if (leftover && fs::remove_all(entry.path(), ec) == static_cast<std::uintmax_t>(-1))
        fail("cannot remove " + name + ", which an earlier run left (" + ec.message() + ")");
    }
    staging_ = dir / staging_name();
    if (!fs::create_directory(staging_, ec) || ec)
      fail("cannot create the staging folder " + staging_.filename().string() + " (" + ec.message() + ")");
  }
  ~OutputDirectory() {
    if (fd_ >= 0) ::close(fd_);
  }
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;

  // Where a file of the new checkpoint is written: `name` in the staging folder.
  fs::path staged(const std::string& name) const { return staging_ / name; }
  // A file of this run, written whole into the staging folder; commit() moves them in this order.
  void placed(const std::string& name) { placed_.push_back(name); }
  // The path a placed file will have after commit().
  fs::path final_path(const std::string& name) const { return dir_ / name; }

  // Replaces the old checkpoint with the staged one: the old config.json first (a directory
  // without one holds no whole checkpoint), then the old checkpoint's other files, then the new
  // files moved in, in the order they were placed (config.json last). Only renames and unlinks:
  // the window in which a kill leaves a mixed directory is that of a few system calls, not the
  // writing. Other files in the directory stay.
  void commit() {
    std::error_code ec;
    // Nothing is touched until every new file can take its place: a folder or another file that
    // is not a regular one where a file goes fails the run with the old checkpoint intact.
    for (const std::string& name : placed_) {
      const fs::file_status target = fs::status(dir_ / name, ec);
      if (fs::is_directory(target)) fail(name + " is a directory, where the checkpoint's file goes; move it away or give another --out");
      if (fs::exists(target) && !fs::is_regular_file(target))
        fail(name + " is not a regular file, where the checkpoint's file goes; move it away or give another --out");
    }
    const auto remove_old = [&](const fs::path& file) {
      if (!fs::remove(file, ec) && ec) fail("cannot remove the old file " + file.filename().string() + " (" + ec.message() + ")");
    };
    std::vector<fs::path> old_files;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_, ec))
      if (entry.is_regular_file() && is_checkpoint_file(entry.path().filename().string())) old_files.push_back(entry.path());
    if (ec) fail("cannot list the directory (" + ec.message() + ")");
    remove_old(dir_ / "config.json");
    for (const fs::path& file : old_files) remove_old(file);
    for (const std::string& name : placed_) {
      fs::rename(staging_ / name, dir_ / name, ec);
      if (ec) fail("cannot move " + name + " into place (" + ec.message() + ")");
    }
    fs::remove(staging_, ec);
    ::fsync(fd_);  // the renames themselves reach the disk
  }
  // After a failure: removes the staging folder with what this run wrote, and the directory
  // when this run made it (and nothing else is in it). The old checkpoint is untouched.
  void undo() noexcept {
    std::error_code ignored;
    fs::remove_all(staging_, ignored);
    if (created_ && fs::is_empty(dir_, ignored)) fs::remove(dir_, ignored);
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw InputError(dir_.string() + ": " + what);
  }

  fs::path dir_;
  fs::path staging_;
  int fd_ = -1;
  bool created_ = false;
  std::vector<std::string> placed_;
};

std::vector<PlannedTensor> plan_tensors(const ModuleTree& tree, std::int64_t head_tokens) {
  std::vector<PlannedTensor> tensors;
  for (const Module& m : tree.modules())  // preorder: the tree's (and the checkpoint's) order
    for (const Parameter& p : m.params)
      tensors.push_back({SafetensorsEntry{std::string(m.name) + "." + std::string(p.name), p.dtype,
                                          std::vector<std::int64_t>(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank)},
                         weight_init_for(m, p, head_tokens)});
  return tensors;
}

// huggingface_hub's split: fill a shard in order until the next tensor would pass the limit; a
// tensor larger than the limit gets a shard of its own.
std::vector<Shard> plan_shards(std::vector<PlannedTensor> tensors, std::uint64_t max_shard_bytes) {
  std::vector<Shard> shards(1);
  std::uint64_t shard_bytes = 0;
  for (PlannedTensor& t : tensors) {
    const std::uint64_t bytes = t.entry.bytes();
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shard_bytes += bytes;
    shards.back().push_back(std::move(t));
  }
  return shards;
}

std::string shard_file_name(std::size_t index, std::size_t count) {
  if (count == 1) return "model.safetensors";
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

// Chunk k + 1 is generated (on all cores) while a helper thread writes chunk k, so the disk and the
// generator work at the same time; two buffers of kChunkBytes are all the memory this takes.
// Returns the file's size in bytes.
// `progress(bytes)` hears each chunk's bytes once it is generated.
std::uint64_t write_shard(const fs::path& file, const Shard& shard, std::uint64_t seed,
                          std::array<std::vector<std::byte>, 2>& buffers, const std::function<void(std::uint64_t)>& progress) {
  std::vector<SafetensorsEntry> entries;
  for (const PlannedTensor& t : shard) entries.push_back(t.entry);
  SafetensorsWriter writer(file, std::move(entries));
  std::future<void> in_flight;  // destroyed (waited for) before the writer
  const auto wait_for_write = [&in_flight] {
    if (in_flight.valid()) in_flight.get();  // rethrows the write's InputError
  };
  std::size_t next = 0;
  for (const PlannedTensor& t : shard) {
    // An FP8 matrix's tile scales come from the matrix's own stream (fp8_tile_scale).
    std::string_view stream = t.entry.name;
    if (t.init.kind == WeightInit::Kind::fp8_tile_scales) stream.remove_suffix(std::string_view("_scale_inv").size());
    const std::uint64_t key = tensor_stream_key(seed, stream);
    const std::uint64_t element_bytes = static_cast<std::uint64_t>(dtype_info(t.entry.dtype).block_bytes);
    const std::uint64_t chunk_elements = kChunkBytes / element_bytes;
    const std::uint64_t elements = t.entry.bytes() / element_bytes;
    std::uint64_t first = 0;
    do {
      const std::span<std::byte> chunk(buffers[next].data(), std::min(chunk_elements, elements - first) * element_bytes);
      generate_weight_bytes(t.init, key, t.entry.dtype, first, chunk);
      wait_for_write();
      if (first == 0) writer.begin_tensor(t.entry.name);
      in_flight = std::async(std::launch::async, [&writer, chunk] { writer.write(chunk); });
      progress(chunk.size());
      next ^= 1;
      first += chunk_elements;
    } while (first < elements);
  }
  wait_for_write();
  writer.finish();
  return writer.header_bytes() + writer.data_bytes();
}

// The module tree of the summary's config, whose parameter count and MoE layers go into it.
ModuleTree summarised_tree(MakeModelSummary& summary, const WeightScheme& scheme) {
  ModuleTree tree = build_module_tree(summary.config, scheme);
  summary.parameters = tree.total_parameter_count();
  for (int layer = 0; layer < summary.config.num_hidden_layers; ++layer)
    summary.has_moe_layer = summary.has_moe_layer || summary.config.is_moe_layer(layer);
  return tree;
}

// options.extra_files into out_dir, each through a temporary renamed into place.
void copy_extra_files(const MakeModelOptions& options, OutputDirectory& out) {
  for (const fs::path& file : options.extra_files) {
    const std::string name = file.filename().string();
    write_file_atomically(out.staged(name), read_input_file(file, "file to copy", std::uint64_t{1} << 30));
    out.placed(name);
  }
}

// Every file goes to a temporary beside it and is renamed into place when complete (AtomicFile):
// the shards, then the index, then config.json, so that a directory with a config.json holds a
// whole checkpoint, all of one run.
void write_checkpoint(const MakeModelOptions& options, const WeightScheme& scheme, MakeModelSummary& summary,
                      OutputDirectory& out) {
  const ModuleTree tree = summarised_tree(summary, scheme);

  const std::vector<Shard> shards = plan_shards(plan_tensors(tree, options.head_tokens), options.max_shard_bytes);
  std::uint64_t total_bytes = 0, done_bytes = 0;
  for (const Shard& shard : shards)
    for (const PlannedTensor& t : shard) total_bytes += t.entry.bytes();
  const auto progress = [&](std::uint64_t bytes) {
    done_bytes += bytes;
    if (options.on_progress) options.on_progress(done_bytes, total_bytes);
  };
  nlohmann::json weight_map = nlohmann::json::object();
  std::array<std::vector<std::byte>, 2> buffers = {std::vector<std::byte>(kChunkBytes), std::vector<std::byte>(kChunkBytes)};
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shard_file_name(s, shards.size());
    const fs::path file = out.final_path(name);
    const std::uint64_t file_bytes = write_shard(out.staged(name), shards[s], options.seed, buffers, progress);
    out.placed(name);
    for (const PlannedTensor& t : shards[s]) {
      weight_map[t.entry.name] = name;
      summary.tensor_bytes += t.entry.bytes();
      ++summary.tensors;
    }
    summary.file_bytes += file_bytes;
    summary.files.push_back(file);
    if (options.on_file_written) options.on_file_written(file, file_bytes);
  }
  if (shards.size() > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", summary.tensor_bytes}}}, {"weight_map", weight_map}};
    write_file_atomically(out.staged("model.safetensors.index.json"), index.dump(2) + "\n");
    out.placed("model.safetensors.index.json");
  }
  copy_extra_files(options, out);
  nlohmann::json config = model_config_to_json(summary.config);
  if (scheme.fp8_block_scales)  // as DeepSeek-V3's release says it, for transformers' FP8 loader
    config["quantization_config"] = {{"quant_method", "fp8"},
                                     {"fmt", "e4m3"},
                                     {"activation_scheme", "dynamic"},
                                     {"weight_block_size", {kFp8Tile, kFp8Tile}}};
  write_file_atomically(out.staged("config.json"), config.dump(2) + "\n");
  out.placed("config.json");
}

// One model.gguf: config, tokenizer-less metadata and the tensors (core/gguf_model_writer.h).
void write_gguf(const MakeModelOptions& options, const WeightScheme& scheme, MakeModelSummary& summary,
                OutputDirectory& out) {
  const ModuleTree tree = summarised_tree(summary, scheme);
  const fs::path file = out.final_path("model.gguf");
  std::function<void(GgufWriter&)> tokenizer;
  if (options.gguf_tokenizer)
    tokenizer = [&](GgufWriter& writer) { options.gguf_tokenizer(writer, tree.config().vocab_size); };
  const GgufModelSummary written = write_gguf_model(tree, options.seed, out.staged("model.gguf"), tokenizer, options.head_tokens,
                                                    options.on_progress);
  out.placed("model.gguf");
  copy_extra_files(options, out);
  summary.tensors = written.tensors;
  summary.tensor_bytes = written.tensor_bytes;
  summary.file_bytes = written.file_bytes;
  summary.files.push_back(file);
  summary.tensors_by_type = written.tensors_by_type;
  if (options.on_file_written) options.on_file_written(file, written.file_bytes);
}

}  // namespace

MakeModelSummary make_model(const MakeModelOptions& given) {
  const auto start = std::chrono::steady_clock::now();
  MakeModelOptions options = given;
  options.dtype = to_lower(options.dtype);  // Q4_K_M, as llama.cpp's users write it, or q4_k_m
  options.format = to_lower(options.format);
  const WeightScheme& scheme = scheme_for(options);
  MakeModelSummary summary;
  summary.config = preset_config(options);
  if (options.max_shard_bytes == 0) throw InputError("max_shard_bytes must be positive");
  OutputDirectory out(options.out_dir, options.force);
  try {
    if (options.format == "gguf") write_gguf(options, scheme, summary, out);
    else write_checkpoint(options, scheme, summary, out);
    out.commit();
  } catch (...) {
    out.undo();
    throw;
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace switchyard
