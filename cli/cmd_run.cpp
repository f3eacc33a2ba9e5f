// switchyard run: place the model by the profile (the same plan `check` prints), build the
// operators, prefill the prompt and decode. Without --model_path it runs a built-in tiny
// DeepSeek-V3 model generated from a fixed seed.
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/gguf.h"
#include "core/make_model.h"
#include "core/model_description.h"
#include "core/trace.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "text/gguf_vocabulary.h"
#include "text/tokenizer.h"
#include "operators/kernels/cpu/isa.h"
#include "operators/model/causal_lm.h"
#include "operators/model/generator.h"
#include "placement/report.h"

namespace switchyard::cli {
namespace {

constexpr const char* kEmbeddedPreset = "tiny-deepseek-v3";
constexpr std::uint64_t kEmbeddedSeed = 20261129;
// The profile `run` uses when given none: every module on the CPU with its own implementation.
constexpr const char* kCpuProfile = R"(- match:
    name: ""
  replace:
    class: default
    kwargs: {generate_device: "cpu", prefill_device: "cpu"}
)";

// A scratch directory for the embedded model, in memory (/dev/shm) where the system has it.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") && access("/dev/shm", W_OK) == 0
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    path = base / ("switchyard-embedded-" + std::to_string(getpid()));
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    try {
      std::size_t used = 0;
      const long value = std::stol(item, &used);
      if (used != item.size() || value < 0 || value > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<std::int32_t>(value));
    } catch (const std::exception&) {
      throw InputError("--prompt_ids: " + quoted_argument(item) + " is not a token id (write e.g. 1,2,3)");
    }
  }
  return ids;
}

struct RunCommand {
  ModelOptions model;
  std::string prompt_ids = "1,17,42,99,7";
  std::string prompt;
  std::string tokenizer;                    // --tokenizer; else the tokenizer.json beside the weights
  const CLI::Option* prompt_ids_given = nullptr;
  int max_new_tokens = 16;
  int cpu_infer = 0;
  std::string cpu_kernels = "auto";
  std::uint64_t seed = 0;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  bool dry_run = false;
  std::string nvtx_layers = "none";
  bool profile = false;
  std::string trace_out;
  bool use_cuda_graph = true;
  int prefill_chunk = 512;

  // --prompt's tokenizer: --tokenizer, else the tokenizer.json beside the weights.
  std::filesystem::path tokenizer_path(const ModelOptions& chosen) const {
    if (!tokenizer.empty()) return tokenizer;
    std::error_code error;
    for (const std::string& where : {chosen.model_path, chosen.gguf_path}) {
      if (where.empty()) continue;
      const std::filesystem::path dir = std::filesystem::is_directory(where, error) ? std::filesystem::path(where)
                                                                                    : std::filesystem::path(where).parent_path();
      if (std::filesystem::is_regular_file(dir / "tokenizer.json", error)) return dir / "tokenizer.json";
    }
    // A GGUF's own vocabulary (tokenizer.ggml.*): Tokenizer::from_file reads it from the file.
    if (!chosen.gguf_path.empty() && text::gguf_has_vocabulary(GgufFile::open(chosen.gguf_path))) return chosen.gguf_path;
    throw InputError("--prompt needs a tokenizer: give --tokenizer DIR (a tokenizer.json, or a directory holding one), "
                     "put tokenizer.json beside the weights (make-model --tokenizer DIR does; a GGUF may carry its own), or pass --prompt_ids 1,2,3");
  }

  int run() {
    if (!prompt.empty() && prompt_ids_given && prompt_ids_given->count() > 0)
      throw InputError("give --prompt TEXT or --prompt_ids 1,2,3, not both");
    // Every option that needs no model is checked before any work.
    GenerationOptions generation;
    generation.max_new_tokens = max_new_tokens;
    generation.seed = seed;
    generation.sampling.temperature = temperature;
    generation.sampling.top_k = top_k;
    generation.sampling.top_p = top_p;
    generation.sampling.min_p = min_p;
    generation.sampling.repetition_penalty = repetition_penalty;
    check_generation_options(generation);
    std::vector<std::int32_t> ids = prompt.empty() ? parse_ids(prompt_ids) : std::vector<std::int32_t>{};
    apply_cpu_threads(cpu_infer);  // before the embedded model's generation, the first parallel work
    // Opened now, so that a path where the trace cannot go fails before the run; committed after it.
    std::optional<AtomicFile> trace_file;
    if (!trace_out.empty()) trace_file.emplace(trace_out);

    ScratchDir scratch;
    ModelOptions chosen = model;
    const bool embedded = chosen.model_path.empty() && chosen.arch.empty() && chosen.gguf_path.empty();
    if (embedded) chosen.model_path = scratch.path.string();
    if (chosen.model_path.empty() && chosen.gguf_path.empty())
      throw InputError("run needs weights: give --model_path DIR or --gguf_path FILE (make one with `switchyard make-model`)");
    // Text in: the prompt encoded before any weight is read, so that a tokenizer problem costs nothing.
    std::optional<text::Tokenizer> text_tokenizer;
    if (!prompt.empty()) {
      if (embedded) throw InputError("--prompt needs a model with a tokenizer: give --model_path or --gguf_path (the built-in model has none yet)");
      text_tokenizer.emplace(text::Tokenizer::from_file(tokenizer_path(chosen)));
      ids = text_tokenizer->encode(prompt, /*add_special=*/true);
      if (ids.empty()) throw InputError("--prompt: the text encodes to no tokens");
    }
    CheckOptions options = chosen.to_check_options();  // before the embedded model is made
    if (embedded) {
      MakeModelOptions make;
      make.preset = kEmbeddedPreset;
      make.out_dir = scratch.path;
      make.seed = kEmbeddedSeed;
      make.dtype = "bf16";
      make_model(make);
      std::printf("model: built-in %s (random weights, seed %llu)\n", kEmbeddedPreset,
                  static_cast<unsigned long long>(kEmbeddedSeed));
    }
    options.budget.prefill_chunk = prefill_chunk;
    if (chosen.profile.empty() && options.quick_rules.empty() && !options.fit.enabled) {
      options.profile = "<built-in CPU profile>";
      options.profile_text = kCpuProfile;
    }
    const CheckResult check = run_check(options);
    if (text_tokenizer && text_tokenizer->vocab_size() > check.tree->config().vocab_size)
      throw InputError("the tokenizer's vocabulary (" + std::to_string(text_tokenizer->vocab_size()) +
                       " tokens) is larger than the model's (vocab_size " + std::to_string(check.tree->config().vocab_size) +
                       "): it is not this model's tokenizer");
    // A checkpoint that disagrees with its config.json is a problem of the model's content (exit 1),
    // not of the profile.
    bool broken_model = false;
    for (const Diagnostic& d : check.diagnostics.items())
      if (d.code == "missing-tensor" || d.code == "tensor-shape-mismatch") broken_model = true;
    if (broken_model) {
      for (const Diagnostic& d : check.diagnostics.sorted())
        if (d.severity == Severity::error) std::cerr << format_diagnostic(d) << "\n";
      if (options.model.gguf_path.empty())
        std::cerr << "switchyard run: the checkpoint in " << options.model.model_path.string()
                  << " does not match its config.json\n";
      else
        std::cerr << "switchyard run: the GGUF file " << options.model.gguf_path.string() << " does not match "
                  << (options.model.model_path.empty() ? "its metadata" : "the config.json beside it") << "\n";
      return kExitBadContent;
    }
    if (dry_run || check.diagnostics.has_errors()) {
      std::cout << format_check_table(check, options.budget);
      return check.diagnostics.has_errors() ? 1 : 0;
    }
    for (const Diagnostic& d : check.diagnostics.sorted()) std::cerr << format_diagnostic(d) << "\n";
    apply_cpu_kernels(cpu_kernels);
    const auto load_start = std::chrono::steady_clock::now();
    const Checkpoint weights = open_model_weights(options.model, check.tree->config());
    Tracer tracer(parse_layer_selection(nvtx_layers, check.tree->num_layers()), profile || !trace_out.empty());
    BuildContext context{*check.tree, check.plan, weights, options.budget.max_context, &tracer};
    context.kv_cache_dtype = options.budget.kv_cache_dtype;  // the caches check estimated
    CausalLMOptions lm_options;
    lm_options.use_cuda_graph = use_cuda_graph;
    lm_options.prefill_chunk = prefill_chunk;
    const std::unique_ptr<CausalLM> built = build_model(context, lm_options, check);
    CausalLM& lm = *built;
    // Mapping the weights, the copies the plan makes (GPU uploads, dequantized bf16 copies of
    // quantised weights for operators that multiply floats) and the caches, as ollama's "load duration".
    std::printf("load duration:        %.4fs\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
    if (check.fit) std::printf("%s\n", describe_fit(*check.fit).c_str());
    std::printf("placement: %s\n", lm.placement_summary().c_str());
    if (const auto graph = lm.graph_device())
      std::printf("decode: one CUDA graph per step on %s\n", graph->str().c_str());

    generation.tracer = &tracer;
    check_generation(lm, ids, generation);  // a bad request is an error before any output
    std::vector<std::int32_t> generated;
    std::string ids_text;
    for (std::int32_t id : ids) ids_text += (ids_text.empty() ? "" : ",") + std::to_string(id);
    std::printf("prompt ids: %s\n", ids_text.c_str());
    std::optional<text::StreamDecoder> stream;
    if (text_tokenizer) stream.emplace(*text_tokenizer);
    std::printf("%s", stream ? "generated text: " : "generated ids:");
    std::fflush(stdout);
    const GenerationResult result = generate(lm, ids, generation, [&](std::int32_t id) {
      generated.push_back(id);
      if (stream) std::printf("%s", stream->push(id).c_str());
      else std::printf(" %d", id);
      std::fflush(stdout);
    });
    if (stream) {
      std::printf("%s\ngenerated ids:", stream->finish().c_str());
      for (std::int32_t id : generated) std::printf(" %d", id);
    }
    const GenerationStats& s = result.stats;
    std::printf("\n\nprompt eval count:    %lld token(s)\n", static_cast<long long>(s.prompt_tokens));
    std::printf("prompt eval duration: %.4fs\n", s.prompt_seconds);
    std::printf("prompt eval rate:     %.2f tokens/s\n", s.prompt_seconds > 0 ? s.prompt_tokens / s.prompt_seconds : 0.0);
    std::printf("eval count:           %lld token(s)\n", static_cast<long long>(s.generated_tokens));
    std::printf("eval duration:        %.4fs\n", s.decode_seconds);
    std::printf("eval rate:            %.2f tokens/s\n", s.decode_seconds > 0 ? s.generated_tokens / s.decode_seconds : 0.0);
    std::printf("threads: %d, CPU kernels: %s, KV cache: %.1f MiB for %lld tokens (%s)\n", omp_get_max_threads(),
                cpu::isa_name(cpu::chosen_isa()), static_cast<double>(lm.kv_cache_bytes()) / (1 << 20),
                static_cast<long long>(lm.max_context()), dtype_name(context.kv_cache().dtype));
    const std::uint64_t checkpoint_bytes = weights.file_bytes();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("peak RSS: %.1f MiB (checkpoint %.1f MiB, mapped in place)\n", static_cast<double>(usage.ru_maxrss) / 1024.0,
                static_cast<double>(checkpoint_bytes) / (1 << 20));
    if (profile) std::printf("\n%s", tracer.profile_table().c_str());
    if (trace_file) {
      tracer.write_chrome_trace(*trace_file);
      trace_file->commit();
      std::printf("trace: %s (open in ui.perfetto.dev or chrome://tracing)\n", trace_out.c_str());
    }
    return 0;
  }
};

}  // namespace

Runner add_run_command(CLI::App& app) {
  auto command = std::make_shared<RunCommand>();
  CLI::App* sub = app.add_subcommand("run", "run a model placed by a profile: prefill the prompt, then decode");
  command->model.add_to(*sub, /*profile_required=*/false);
  command->prompt_ids_given =
      sub->add_option("--prompt_ids", command->prompt_ids, "prompt token ids, comma separated")->capture_default_str();
  sub->add_option("--prompt", command->prompt,
                  "prompt text, encoded by the model's tokenizer.json (beside the weights, or --tokenizer); the "
                  "answer is printed as text");
  sub->add_option("--tokenizer", command->tokenizer, "--prompt's tokenizer: a tokenizer.json or a directory holding one");
  // The generation options' ranges are check_generation_options'; here they are read as numbers.
  sub->add_option("--max_new_tokens", command->max_new_tokens, "tokens to generate, 1 or more")
      ->capture_default_str()
      ->transform(whole_number<int>());
  add_cpu_threads_option(*sub, "--cpu_infer", command->cpu_infer, "CPU threads (default: all cores)");
  add_cpu_kernels_option(*sub, command->cpu_kernels);
  sub->add_option("--seed", command->seed, "sampling seed, 0 to 2^64 - 1")
      ->capture_default_str()
      ->transform(whole_number<std::uint64_t>());
  sub->add_option("--temperature", command->temperature, "a finite number >= 0; 0: greedy")->capture_default_str();
  sub->add_option("--top_k", command->top_k, "sample from the k most likely tokens (0: all)")
      ->capture_default_str()
      ->transform(whole_number<int>());
  sub->add_option("--top_p", command->top_p, "nucleus sampling mass, 0 to 1 (1: all)")->capture_default_str();
  sub->add_option("--min_p", command->min_p, "drop tokens less likely than min_p times the most likely, 0 to 1 (0: off)")
      ->capture_default_str();
  sub->add_option("--repetition_penalty", command->repetition_penalty,
                  "divide the logits of tokens already seen (prompt and output) by this, as transformers does (1: off)")
      ->capture_default_str();
  sub->add_flag("--dry_run", command->dry_run, "check the placement and stop (same output as `switchyard check`)");
  sub->add_option("--nvtx_layers", command->nvtx_layers, "NVTX ranges for these layers: 3,22,50 | 0-5 | all | none")
      ->capture_default_str();
  sub->add_flag("--profile", command->profile, "time each layer's parts per decode step and print the split");
  sub->add_option("--trace_out", command->trace_out, "write a Chrome/Perfetto trace-event JSON of the run");
  sub->add_option("--use_cuda_graph", command->use_cuda_graph,
                  "decode each token as one CUDA graph when the layers run on one GPU (true|false)")
      ->capture_default_str();
  sub->add_option("--prefill_chunk", command->prefill_chunk, "most prompt tokens per forward pass")
      ->capture_default_str()
      ->transform(integer_range(1, 1 << 20));
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
