// switchyard make-model: writes a preset as a HF checkpoint with random weights, for tests and
// benchmarks of the loaders and kernels without downloading a release.
#include <cstdio>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "core/make_model.h"
#include "core/units.h"
#include "cli/commands.h"
#include "cli/load_progress.h"
#include "cli/model_options.h"
#include "text/gguf_vocabulary.h"
#include "text/tokenizer.h"

namespace switchyard::cli {
namespace {

// "15.71 B", "2.10 M", "950 K": parameter counts at a glance.
std::string format_count(std::uint64_t n) {
  char text[32];
  if (n >= 1'000'000'000) std::snprintf(text, sizeof text, "%.2f B", static_cast<double>(n) / 1e9);
  else if (n >= 1'000'000) std::snprintf(text, sizeof text, "%.2f M", static_cast<double>(n) / 1e6);
  else if (n >= 1'000) std::snprintf(text, sizeof text, "%.1f K", static_cast<double>(n) / 1e3);
  else std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(n));
  return text;
}

void print_summary(const MakeModelOptions& options, const MakeModelSummary& s) {
  if (!s.has_moe_layer)
    std::cout << "note: with " << s.config.num_hidden_layers << " layer(s) and first_k_dense_replace = "
              << s.config.first_k_dense_replace << ", every layer is dense: the checkpoint has no MoE layer\n";
  const double megabytes_per_second = s.seconds > 0 ? static_cast<double>(s.file_bytes) / 1e6 / s.seconds : 0;
  char timing[96];
  std::snprintf(timing, sizeof timing, "%.1f s, %.1f MB/s", s.seconds, megabytes_per_second);
  std::cout << "wrote " << options.preset << " (" << s.config.num_hidden_layers << " layers, " << options.dtype
            << ", seed " << options.seed << ") to " << options.out_dir.string() << ": " << format_count(s.parameters)
            << " parameters in " << s.tensors << " tensors, " << s.file_bytes << " bytes (" << format_bytes(s.file_bytes)
            << ") in " << s.files.size() << (s.files.size() == 1 ? " file, " : " files, ") << timing << "\n";
  if (!s.tensors_by_type.empty()) {
    std::cout << "stored types:";
    for (const auto& [dtype, count] : s.tensors_by_type) std::cout << " " << dtype_name(dtype) << " x" << count;
    std::cout << "\n";
  }
}

struct MakeModelCommand {
  MakeModelOptions options;
  std::string out;
  std::string tokenizer;

  int run() {
    apply_cpu_threads(0);  // the weights are generated on OpenMP's threads
    options.out_dir = out;
    if (!tokenizer.empty()) {
      // The checkpoint gets the tokenizer's files and a vocabulary of its size.
      const std::filesystem::path given = tokenizer;
      std::error_code error;
      const std::filesystem::path dir = std::filesystem::is_directory(given, error) ? given : given.parent_path();
      const std::filesystem::path json = std::filesystem::is_directory(given, error) ? given / "tokenizer.json" : given;
      options.vocab_size = text::Tokenizer::from_file(json).vocab_size();
      options.extra_files = {json};
      const std::filesystem::path config = dir / "tokenizer_config.json";
      if (std::filesystem::is_regular_file(config, error)) options.extra_files.push_back(config);
      // A GGUF carries the tokenizer in its own keys too, as llama.cpp reads it.
      options.gguf_tokenizer = [json, config](GgufWriter& writer, std::int64_t vocab_size) {
        std::error_code missing;
        text::write_gguf_vocabulary(
            text::gguf_vocabulary_from_files(json, std::filesystem::is_regular_file(config, missing) ? config : "", vocab_size),
            writer);
      };
    }
    // Bytes written, GB/s and time left on stderr, for a write that takes more than a second.
    options.on_progress = [progress = std::make_shared<LoadProgress>("writing")](std::uint64_t done, std::uint64_t total) {
      (*progress)(done, total);
    };
    options.on_file_written = [](const std::filesystem::path& file, std::uint64_t bytes) {
      std::cout << "  " << file.filename().string() << " (" << format_bytes(bytes) << ")" << std::endl;
    };
    try {
      print_summary(options, make_model(options));
      return 0;
    } catch (const InputError& e) {
      std::cerr << "switchyard make-model: error: " << e.what() << "\n";
      return e.exit_code();
    }
  }
};

}  // namespace

Runner add_make_model_command(CLI::App& app) {
  auto command = std::make_shared<MakeModelCommand>();
  MakeModelOptions& o = command->options;
  CLI::App* sub = app.add_subcommand(
      "make-model", "write a preset with random weights: a HF checkpoint (config.json + safetensors) or a GGUF file");
  sub->add_option("--preset", o.preset, "built-in architecture, e.g. deepseek-v2-lite or tiny-deepseek-v3")->required();
  sub->add_option("--out", command->out,
                  "directory to write; must be empty or new unless --force, and not being written by another make-model")
      ->required();
  sub->add_option("--seed", o.seed, "random seed, 0 to 2^64 - 1; the same seed writes the same bytes")
      ->capture_default_str()
      ->transform(whole_number<std::uint64_t>());
  sub->add_option("--format", o.format,
                  "safetensors, or gguf: one model.gguf in llama.cpp's layout (fused experts, its names and keys)")
      ->capture_default_str();
  sub->add_option("--dtype,--quant", o.dtype,
                  "safetensors: bf16, f32 or fp8; gguf: f32, f16, bf16, q8_0, q6_k, q5_k, q4_k, q3_k, q5_1, q5_0, q4_1, q4_0, "
                  "iq4_xs, iq4_nl, mxfp4 (experts; q8_0 elsewhere), or a llama.cpp mix: q5_k_m, q4_k_m, q2_k "
                  "(docs/gguf.md gives each mix's choices; llama-quantize writes the other IQ types)")
      ->capture_default_str();
  sub->add_option("--layers", o.layers, "number of decoder layers, 1 to 1024, overriding the preset's")
      ->transform(whole_number<int>());
  sub->add_option("--head_tokens", o.head_tokens,
                  "lm_head's rows at full scale for this many evenly spaced tokens only, the others 64x smaller: "
                  "greedy choices that lead by a wide margin, for comparing engines on one file (0: off)")
      ->capture_default_str()
      ->transform(whole_number<std::int64_t>());
  sub->add_flag("--force", o.force, "write into a non-empty directory, replacing its checkpoint files");
  sub->add_option("--tokenizer", command->tokenizer,
                  "a real tokenizer (a directory with tokenizer.json, or the file): copied beside the weights, and the "
                  "vocabulary sized to it");
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
