#pragma once
// make_model: a complete HF-format checkpoint of a built-in preset with random weights (config.json
// and model.safetensors, or model-0000K-of-0000N.safetensors shards with
// model.safetensors.index.json past `max_shard_bytes`, as save_pretrained lays them out). The tensors
// are exactly the module tree's parameters, in tree order; values come from core/random_weights.h,
// so the same seed gives the same bytes.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/model_config.h"

namespace switchyard {

class GgufWriter;

struct MakeModelOptions {
  std::string preset;                           // "tiny-deepseek-v3", "deepseek-v2-lite", ...
  std::filesystem::path out_dir;
  std::uint64_t seed = 0;
  // safetensors: bf16 or f32 (bf16: e_score_correction_bias stays f32). gguf: any weight scheme
  // (core/weight_scheme.h): f32, f16, bf16, a ggml block type (q8_0, q4_k...) or a mix (q4_k_m).
  std::string dtype = "bf16";
  std::string format = "safetensors";           // safetensors | gguf (one model.gguf, llama.cpp's layout)
  std::optional<int> layers;                    // overrides num_hidden_layers
  std::optional<std::int64_t> vocab_size;       // overrides the preset's (a tokenizer's vocabulary)
  // lm_head's full-scale rows for this many evenly spaced tokens only, the rest 64x smaller
  // (core/random_weights.h): greedy choices far apart, for comparing engines. 0: all alike.
  std::int64_t head_tokens = 0;
  // Copied into out_dir as they are (a tokenizer.json and its tokenizer_config.json), before
  // config.json, each atomically.
  std::vector<std::filesystem::path> extra_files;
  // gguf: sets the tokenizer's keys (make-model --tokenizer: text/gguf_vocabulary.h); given the
  // vocabulary size the model is made with.
  std::function<void(GgufWriter&, std::int64_t vocab_size)> gguf_tokenizer;
  bool force = false;                           // write into a non-empty out_dir (not one another run holds)
  std::uint64_t max_shard_bytes = 5'000'000'000;  // save_pretrained's "5GB": tensor bytes per shard
  // Called after each safetensors file is closed, with its path and size in bytes.
  std::function<void(const std::filesystem::path&, std::uint64_t)> on_file_written;
  // Called as the tensors are generated and written: the bytes of tensor data done so far, of all.
  std::function<void(std::uint64_t done_bytes, std::uint64_t total_bytes)> on_progress;
};

struct MakeModelSummary {
  ModelConfig config;                        // as written to config.json
  std::uint64_t parameters = 0;
  std::uint64_t tensors = 0;
  std::uint64_t tensor_bytes = 0;            // data only, the index's total_size
  std::uint64_t file_bytes = 0;              // the safetensors files, headers included
  std::vector<std::filesystem::path> files;  // safetensors files in shard order, or the GGUF file
  std::map<DType, std::uint64_t> tensors_by_type;  // GGUF: the stored types, as the scheme and the fallbacks chose
  double seconds = 0;
  bool has_moe_layer = false;
};

// Writes the checkpoint (config.json and safetensors files, or model.gguf) into out_dir, which it creates when missing and locks for the whole run
// (flock on the directory: a second run into it fails at once). The files are written whole into
// a staging folder inside out_dir first; only then do they replace the old checkpoint (its
// config.json removed first, the new one moved in last): a directory with a config.json holds a
// whole checkpoint of one run, and a run that fails or is killed while writing leaves the old
// checkpoint as it was. With `force`, the earlier checkpoint's files are replaced so (the disk
// holds both meanwhile); other files stay.
// Throws InputError (exit status 2) for an unknown preset, an unsupported dtype, a bad layer count,
// a directory another run holds, a non-empty out_dir without `force`, and any file that cannot be
// written, naming it; then what this run wrote is removed again, and out_dir too when this run
// created it.
MakeModelSummary make_model(const MakeModelOptions& options);

}  // namespace switchyard
