#include "cli/model_session.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>

#include "cli/embedded_tokenizer.h"
#include "cli/load_progress.h"
#include "core/error.h"
#include "core/gguf.h"
#include "core/input_file.h"
#include "core/make_model.h"
#include "core/page_prefetch.h"
#include "core/units.h"
#include "text/gguf_vocabulary.h"
#include "placement/report.h"

namespace switchyard::cli {
namespace {

constexpr const char* kEmbeddedPreset = "tiny-deepseek-v3";
constexpr std::uint64_t kEmbeddedSeed = 20261129;

}  // namespace

ChatTemplateSource read_chat_template(const std::string& flag) {
  std::error_code error;
  if (std::filesystem::is_regular_file(flag, error)) {
    // A template is a few KiB; real ones stay far below this.
    return {read_input_file(flag, "--chat-template", std::uint64_t{16} << 20), flag};
  }
  // llama.cpp also takes the name of a template it carries (chatml, llama3); here a template is Jinja text.
  if (flag.find("{{") == std::string::npos && flag.find("{%") == std::string::npos)
    throw InputError("--chat-template: " + quoted_argument(flag) +
                     " is neither a file nor a Jinja template (text with {{ or {%); built-in template names are not known");
  return {flag, "--chat-template"};
}

void SamplingFlags::add_to(CLI::App& sub, const std::string& max_new_tokens_help) {
  // The ranges are check_generation_options'; here the values are read as numbers. The second
  // names are llama.cpp's.
  if (!max_new_tokens_help.empty())
    sub.add_option("--max_new_tokens,-n,--n-predict", max_new_tokens, max_new_tokens_help)
        ->capture_default_str()
        ->transform(whole_number<int>())
        ->group(kSamplingGroup);
  sub.add_option("--seed,-s", seed, "sampling seed, 0 to 2^64 - 1")->capture_default_str()->transform(whole_number<std::uint64_t>());
  sub.add_option("--temperature,--temp", temperature, "a finite number >= 0; 0: greedy")->capture_default_str();
  sub.add_option("--top_k", top_k, "sample from the k most likely tokens (0: all)")->capture_default_str()->transform(whole_number<int>());
  sub.add_option("--top_p", top_p, "nucleus sampling mass, 0 to 1 (1: all)")->capture_default_str();
  sub.add_option("--min_p", min_p, "drop tokens less likely than min_p times the most likely, 0 to 1 (0: off)")->capture_default_str();
  sub.add_option("--repetition_penalty,--repeat-penalty", repetition_penalty,
                 "divide the logits of tokens already seen (prompt and output) by this, as transformers does (1: off)")
      ->capture_default_str();
  set_group(sub, {"--seed", "--temperature", "--top_k", "--top_p", "--min_p", "--repetition_penalty"}, kSamplingGroup);
}

GenerationOptions SamplingFlags::options() const {
  GenerationOptions g;
  g.max_new_tokens = max_new_tokens;
  g.seed = seed;
  g.sampling.temperature = temperature;
  g.sampling.top_k = top_k;
  g.sampling.top_p = top_p;
  g.sampling.min_p = min_p;
  g.sampling.repetition_penalty = repetition_penalty;
  check_generation_options(g);
  return g;
}

void EngineFlags::add_to(CLI::App& sub) {
  add_cpu_threads_option(sub, "--cpu_infer,-t,--threads", cpu_infer, "CPU threads (default: all cores)");
  add_cpu_kernels_option(sub, cpu_kernels);
  sub.add_option("--use_cuda_graph", use_cuda_graph, "decode each token as one CUDA graph when the layers and the head run on GPUs (true|false)")
      ->capture_default_str();
  sub.add_option("--prefill_chunk,--chunk_size", prefill_chunk, "most prompt tokens per forward pass")
      ->capture_default_str()
      ->transform(integer_range(1, 1 << 20));
  CLI::Option* on = sub.add_flag("--prefetch", prefetch,
                                 "read all the mapped weights into memory at load, with a progress line, so the first "
                                 "prompt does not pay the disk reads (default: on where stderr is a terminal)");
  sub.add_flag("--no_prefetch", no_prefetch, "leave the mapped weights to be read as they are first used")->excludes(on);
  set_group(sub, {"--cpu_infer", "--cpu_kernels", "--use_cuda_graph", "--prefill_chunk", "--prefetch", "--no_prefetch"},
            kPerformanceGroup);
  cpu_kernel_flags.add_to(sub);
}

SessionSettings EngineFlags::settings() const {
  SessionSettings s;
  s.prefill_chunk = prefill_chunk;
  s.use_cuda_graph = use_cuda_graph;
  s.cpu_kernels = cpu_kernels;
  s.cpu_kernel_options = cpu_kernel_flags.options();
  s.prefetch = prefetch || (!no_prefetch && isatty(STDERR_FILENO) == 1);
  return s;
}

ScratchDir::ScratchDir() {
  const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") && access("/dev/shm", W_OK) == 0
                                         ? std::filesystem::path("/dev/shm")
                                         : std::filesystem::temp_directory_path();
  path = base / ("switchyard-embedded-" + std::to_string(getpid()));
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

ModelSession::ModelSession(const ModelOptions& model, int prefill_chunk, bool quiet) : chosen_(model), quiet_(quiet) {
  embedded_ = chosen_.model_path.empty() && chosen_.arch.empty() && chosen_.gguf_path.empty();
  if (embedded_) chosen_.model_path = scratch_.path.string();
  const std::string dropped = chosen_.fall_back_to_cpu();
  if (!dropped.empty())
    std::cerr << "switchyard: warning: this machine has no CUDA device; " << dropped
              << " would place modules on a GPU, so every module runs on the CPU (as llama.cpp does)\n";
  if (chosen_.model_path.empty() && chosen_.gguf_path.empty())
    throw InputError("this needs weights: give --model_path DIR or --gguf_path FILE (make one with `switchyard make-model`)");
  options_ = chosen_.to_check_options();
  options_.budget.prefill_chunk = prefill_chunk;
  if (chosen_.profile.empty() && options_.quick_rules.empty() && !options_.fit.enabled) {
    options_.profile = "<built-in CPU profile>";
    options_.profile_text = kCpuOnlyProfile;
  }
}

ModelSession::~ModelSession() = default;

text::ModelText ModelSession::open_text(const std::string& tokenizer_flag) const {
  text::ModelText text = open_model_text(tokenizer_flag);
  if (!chosen_.chat_template.empty()) {
    const ChatTemplateSource given = read_chat_template(chosen_.chat_template);
    text::ChatTemplate parsed = text::ChatTemplate::parse(given.text, given.name);
    if (text.chat) {
      text.chat->chat_template = std::move(parsed);
      text.chat->source = given.name;
    } else {
      // The model names no bos/eos text for the template; the tokens that end a turn are end_ids'.
      text.chat = text::ChatFormat{std::move(parsed), "", "", given.name};
    }
  }
  return text;
}

text::ModelText ModelSession::open_model_text(const std::string& tokenizer_flag) const {
  if (!tokenizer_flag.empty()) return text::ModelText::load(tokenizer_flag);
  std::error_code error;
  if (!embedded_)
    for (const std::string& where : {chosen_.model_path, chosen_.gguf_path}) {
      if (where.empty()) continue;
      const std::filesystem::path dir = std::filesystem::is_directory(where, error) ? std::filesystem::path(where)
                                                                                    : std::filesystem::path(where).parent_path();
      if (std::filesystem::is_regular_file(dir / "tokenizer.json", error)) return text::ModelText::load(dir / "tokenizer.json");
    }
  if (!chosen_.gguf_path.empty()) {
    const GgufFile gguf = open_model_gguf(options_.model);
    if (text::gguf_has_vocabulary(gguf)) return text::ModelText::from_gguf(gguf);
  }
  if (embedded_) {
    if (const std::optional<EmbeddedTokenizer> t = embedded_tokenizer())
      return text::ModelText::from_texts(t->tokenizer_json, t->tokenizer_config_json, "the built-in DeepSeek-V3 tokenizer");
    throw InputError("the built-in model has no tokenizer in this build (it is built in when scripts/install-deps.sh has "
                     "fetched the tokenizers before cmake runs); give --tokenizer DIR, or --prompt_ids 1,2,3");
  }
  throw InputError("the model has no tokenizer: give --tokenizer DIR (a tokenizer.json, or a directory holding one), "
                   "put tokenizer.json beside the weights (make-model --tokenizer DIR does; a GGUF may carry its own), or pass --prompt_ids 1,2,3");
}

namespace {

// The built-in model's files (its config.json is what check reads).
void make_embedded(const std::filesystem::path& dir, const text::Tokenizer* tokenizer, bool quiet) {
  MakeModelOptions make;
  make.preset = kEmbeddedPreset;
  make.out_dir = dir;
  make.seed = kEmbeddedSeed;
  make.dtype = "bf16";
  if (tokenizer) make.vocab_size = tokenizer->vocab_size();
  make_model(make);
  if (!quiet)
    std::fprintf(stderr, "model: built-in %s (random weights, seed %llu)\n", kEmbeddedPreset,
                 static_cast<unsigned long long>(kEmbeddedSeed));
}

// Reads the mapped weights into memory, unless they would crowd it: past 85% of the machine's
// memory, the pages read first would be evicted by the last, and the reads are wasted.
PrefetchReport prefetch_weights(const Checkpoint& weights, bool show_progress) {
  PrefetchReport report;
  const std::uint64_t bytes = weights.file_bytes();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const double memory = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
  if (memory > 0 && static_cast<double>(bytes) > 0.85 * memory) {
    char why[160];
    std::snprintf(why, sizeof why, "the weights (%.2f GB) are more than 85%% of this machine's memory (%.2f GB)",
                  static_cast<double>(bytes) / 1e9, memory / 1e9);
    report.skipped = why;
    return report;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::span<const std::byte>> files = weights.file_views();
  PrefetchProgress progress;
  if (show_progress) progress = LoadProgress("prefetching");
  report.bytes = prefetch_pages(files, progress);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace

std::optional<int> ModelSession::place(const text::Tokenizer* tokenizer, bool dry_run) {
  if (embedded_) make_embedded(scratch_.path, tokenizer, quiet_);
  check_.emplace(run_check(options_));
  const CheckResult& check = *check_;
  // A checkpoint that disagrees with its config.json, or holds weights of a type run does not take,
  // is a problem of the model's content (exit 1), not of the profile.
  bool unmatched = false, unsupported = false;
  for (const Diagnostic& d : check.diagnostics.items()) {
    unmatched |= d.code == "missing-tensor" || d.code == "tensor-shape-mismatch";
    unsupported |= d.code == "unsupported-dtype";
  }
  if (unmatched || unsupported) {
    for (const Diagnostic& d : check.diagnostics.sorted())
      if (d.severity == Severity::error) std::cerr << format_diagnostic(d) << "\n";
    const std::string model = options_.model.gguf_path.empty() ? "the checkpoint in " + options_.model.model_path.string()
                                                               : "the GGUF file " + options_.model.gguf_path.string();
    if (unmatched)
      std::cerr << "switchyard: " << model << " does not match "
                << (options_.model.gguf_path.empty()      ? "its config.json"
                    : options_.model.model_path.empty() ? "its metadata"
                                                        : "the config.json beside it")
                << "\n";
    if (unsupported) std::cerr << "switchyard: " << model << " holds weights of a type run does not take\n";
    return kExitBadContent;
  }
  if (dry_run || check.diagnostics.has_errors()) {
    std::cout << format_check_table(check, options_.budget);
    return check.diagnostics.has_errors() ? 1 : 0;
  }
  const std::int64_t vocab = check.tree->config().vocab_size;
  if (tokenizer && tokenizer->vocab_size() > vocab)
    throw InputError("the tokenizer's vocabulary (" + std::to_string(tokenizer->vocab_size()) +
                     " tokens) is larger than the model's (vocab_size " + std::to_string(vocab) +
                     "): it is not this model's tokenizer");
  return std::nullopt;
}

CausalLM& ModelSession::build(const SessionSettings& settings) {
  const CheckResult& check = *check_;
  for (const Diagnostic& d : check.diagnostics.sorted()) std::cerr << format_diagnostic(d) << "\n";
  apply_cpu_kernels(settings.cpu_kernels);
  cpu::set_kernel_options(settings.cpu_kernel_options);
  const auto load_start = std::chrono::steady_clock::now();
  weights_.emplace(open_model_weights(options_.model, check.tree->config()));
  if (settings.prefetch) {
    prefetch_ = prefetch_weights(*weights_, settings.show_progress);
    if (settings.show_progress && prefetch_->skipped.empty())
      std::fprintf(stderr, "prefetch: %s of mapped weights read in %.2fs\n", format_bytes(prefetch_->bytes).c_str(),
                   prefetch_->seconds);
    else if (settings.show_progress)
      std::fprintf(stderr, "prefetch: skipped, %s; pages are read as they are first used\n", prefetch_->skipped.c_str());
  }
  tracer_ = std::make_unique<Tracer>(parse_layer_selection(settings.nvtx_layers, check.tree->num_layers()), settings.tracing);
  context_ = std::make_unique<BuildContext>(BuildContext{*check.tree, check.plan, *weights_, options_.budget.max_context, tracer_.get()});
  context_->kv_cache_dtype = options_.budget.kv_cache_dtype;  // the caches check estimated
  CausalLMOptions lm_options;
  lm_options.use_cuda_graph = settings.use_cuda_graph;
  lm_options.prefill_chunk = options_.budget.prefill_chunk;
  lm_options.device_map = options_.budget.device_map;
  if (settings.show_progress) lm_options.on_progress = LoadProgress();
  lm_ = build_model(*context_, lm_options, check);
  // Mapping the weights, the copies the plan makes (GPU uploads, dequantized bf16 copies of
  // quantised weights for operators that multiply floats) and the caches, as ollama's "load duration".
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  return *lm_;
}

}  // namespace switchyard::cli
