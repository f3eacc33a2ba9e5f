#pragma once
// A model made ready for generation, the way run, chat and serve share: the built-in tiny model
// generated where no weights are given, the plan (`check`'s), the weights mapped and the operators
// built. Everything the built model refers to lives here, at a fixed address.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cpu_kernel_flags.h"
#include "cli/model_options.h"
#include "core/model_description.h"
#include "core/trace.h"
#include "operators/model/causal_lm.h"
#include "operators/model/generator.h"
#include "placement/check.h"
#include "text/model_text.h"

namespace switchyard::cli {

// A directory for the built-in model, in memory (/dev/shm) where the system has it; removed with it.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

struct SessionSettings {
  int prefill_chunk = 512;
  bool use_cuda_graph = true;
  std::string cpu_kernels = "auto";
  cpu::KernelOptions cpu_kernel_options;
  std::string nvtx_layers = "none";
  bool tracing = false;  // profile steps and events (--profile, --trace_out)
  bool show_progress = true;  // progress lines on stderr (off under --quiet)
  bool prefetch = false;      // read every mapped weight page at load (--prefetch)
};

// What --prefetch did: the bytes read into memory and how long it took, or why it read nothing.
struct PrefetchReport {
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::string skipped;  // non-empty: not prefetched, and why
};

// --chat-template's value: a file's text, or the template's own text (it holds "{{" or "{%");
// `name` is the file's path or "--chat-template", for messages. InputError (exit 2) otherwise.
struct ChatTemplateSource {
  std::string text, name;
};
ChatTemplateSource read_chat_template(const std::string& flag);

// The sampling flags of run, chat and serve: --max_new_tokens --seed --temperature --top_k --top_p
// --min_p --repetition_penalty, and llama.cpp's -n/--n-predict -s --temp --repeat-penalty
// (ranges: check_generation_options').
struct SamplingFlags {
  int max_new_tokens = 16;
  std::uint64_t seed = 0;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;

  // "" for max_new_tokens_help: no --max_new_tokens (serve's requests say their own).
  void add_to(CLI::App& command, const std::string& max_new_tokens_help);
  // Checked: an InputError (exit 2) names the flag out of range.
  GenerationOptions options() const;
};

// The engine flags of run, chat and serve: --cpu_infer (llama.cpp's -t/--threads) --cpu_kernels
// --use_cuda_graph --prefill_chunk (ktransformers' --chunk_size) --prefetch/--no_prefetch (default:
// on where stderr is a terminal, where a person waits for the first answer), and the CPU kernels'
// settings (cli/cpu_kernel_flags.h).
struct EngineFlags {
  int cpu_infer = 0;
  std::string cpu_kernels = "auto";
  CpuKernelFlags cpu_kernel_flags;
  bool use_cuda_graph = true;
  int prefill_chunk = 512;
  bool prefetch = false, no_prefetch = false;

  void add_to(CLI::App& command);
  SessionSettings settings() const;
};

class ModelSession {
 public:
  // The plan of `model` (the built-in model when it names no weights and no --arch; the built-in
  // CPU profile when it gives no profile, quick rule or --fit). No weights are read yet.
  // `quiet`: no notes on stderr (the built-in model's line); warnings and errors still go there.
  explicit ModelSession(const ModelOptions& model, int prefill_chunk, bool quiet = false);
  ~ModelSession();
  ModelSession(const ModelSession&) = delete;
  ModelSession& operator=(const ModelSession&) = delete;

  bool embedded() const { return embedded_; }
  // Where the model's own tokenizer may be: its weights' directory or GGUF ("" for --arch alone).
  const ModelOptions& chosen() const { return chosen_; }
  const CheckOptions& options() const { return options_; }
  const CheckResult& check() const { return *check_; }
  // The model's text interface (text/model_text.h): `tokenizer_flag` (--tokenizer) where given,
  // else the tokenizer.json beside the weights, else a GGUF's own vocabulary, else the built-in
  // model's tokenizer; its chat template replaced by --chat-template's where given. Throws
  // InputError saying where a tokenizer may come from when none is found.
  text::ModelText open_text(const std::string& tokenizer_flag) const;
  // The plan, before any weight is read: the built-in model generated first where it is the one
  // (its vocabulary sized to `tokenizer` where given, the built-in tokenizer), then check. Returns
  // an exit status where the run cannot go on: the checkpoint disagrees with its config (1,
  // printed), or, unless `dry_run` prints the table, the plan has errors. A tokenizer whose
  // vocabulary is larger than the placed model's is an InputError.
  std::optional<int> place(const text::Tokenizer* tokenizer, bool dry_run);
  // Maps the weights, prefetches them where settings say so (a "prefetch:" line on stderr with
  // show_progress), and builds the operators (place() first); prints the check's warnings.
  CausalLM& build(const SessionSettings& settings);

  CausalLM& lm() { return *lm_; }
  const Checkpoint& weights() const { return *weights_; }
  Tracer& tracer() { return *tracer_; }
  const BuildContext& context() const { return *context_; }
  double load_seconds() const { return load_seconds_; }
  // Set by build() when settings.prefetch asked for one.
  const std::optional<PrefetchReport>& prefetch() const { return prefetch_; }

 private:
  text::ModelText open_model_text(const std::string& tokenizer_flag) const;

  ScratchDir scratch_;
  ModelOptions chosen_;
  bool embedded_ = false;
  bool quiet_ = false;
  CheckOptions options_;
  std::optional<CheckResult> check_;
  std::optional<Checkpoint> weights_;
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<BuildContext> context_;
  std::unique_ptr<CausalLM> lm_;
  double load_seconds_ = 0;
  std::optional<PrefetchReport> prefetch_;
};

}  // namespace switchyard::cli
