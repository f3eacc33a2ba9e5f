// switchyard run: place the model by the profile (the same plan `check` prints), build the
// operators, prefill the prompt and decode. Without --model_path it runs a built-in tiny
// DeepSeek-V3 model generated from a fixed seed.
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/gguf.h"
#include "core/make_model.h"
#include "core/model_description.h"
#include "core/process_memory.h"
#include "core/trace.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/embedded_tokenizer.h"
#include "cli/model_session.h"
#include "text/gguf_vocabulary.h"
#include "text/model_text.h"
#include "text/tokenizer.h"
#include "operators/kernels/cpu/isa.h"
#include "operators/model/causal_lm.h"
#include "operators/model/generator.h"
#include "placement/report.h"

namespace switchyard::cli {
namespace {

constexpr const char* kEmbeddedPrompt = "The experts of a Mixture-of-Experts model can wait on the CPU while";

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

// -f FILE: the file's text, less one final newline (an editor's), as llama.cpp reads it.
std::string read_prompt_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InputError("--file: cannot open " + quoted_argument(path));
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) throw InputError("--file: cannot read " + quoted_argument(path));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.empty()) throw InputError("--file: " + quoted_argument(path) + " is empty");
  return text;
}

struct RunCommand {
  ModelOptions model;
  std::string prompt_ids = "1,17,42,99,7";
  std::string prompt;
  std::string prompt_file;                  // -f: the prompt's text from a file
  std::string tokenizer;                    // --tokenizer; else the tokenizer.json beside the weights
  const CLI::Option* prompt_ids_given = nullptr;
  SamplingFlags sampling;
  EngineFlags engine;
  bool dry_run = false;
  std::string nvtx_layers = "none";
  bool profile = false;
  std::string trace_out;

  int run() {
    if (!model.chat_template.empty())
      throw InputError("--chat-template: run continues the prompt as plain text, without a chat template; `chat` and "
                       "`serve` render chats");
    if (!prompt_file.empty()) prompt = read_prompt_file(prompt_file);
    if (!prompt.empty() && prompt_ids_given && prompt_ids_given->count() > 0)
      throw InputError("give --prompt TEXT or --prompt_ids 1,2,3, not both");
    // Every option that needs no model is checked before any work.
    GenerationOptions generation = sampling.options();
    std::vector<std::int32_t> ids = prompt.empty() ? parse_ids(prompt_ids) : std::vector<std::int32_t>{};
    apply_cpu_threads(engine.cpu_infer);  // before the embedded model's generation, the first parallel work
    // Opened now, so that a path where the trace cannot go fails before the run; committed after it.
    std::optional<AtomicFile> trace_file;
    if (!trace_out.empty()) trace_file.emplace(trace_out);

    ModelSession session(model, engine.prefill_chunk);
    // The built-in model with no prompt given speaks text where this build carries its tokenizer.
    if (session.embedded() && prompt.empty() && (!prompt_ids_given || prompt_ids_given->count() == 0) &&
        tokenizer.empty() && embedded_tokenizer())
      prompt = kEmbeddedPrompt;
    // Text in: the prompt encoded before any weight is read, so that a tokenizer problem costs nothing.
    std::optional<text::ModelText> model_text;
    if (!prompt.empty()) {
      model_text.emplace(session.open_text(tokenizer));
      ids = model_text->encode_prompt(prompt);
      // A text prompt ends at the model's end of turn, as a chat does.
      generation.stop_tokens = model_text->end_ids;
      if (ids.empty()) throw InputError("--prompt: the text encodes to no tokens");
    }
    if (const std::optional<int> status = session.place(model_text ? &model_text->tokenizer : nullptr, dry_run)) return *status;
    const CheckResult& check = session.check();
    SessionSettings settings = engine.settings();
    settings.nvtx_layers = nvtx_layers;
    settings.tracing = profile || !trace_out.empty();
    CausalLM& lm = session.build(settings);
    Tracer& tracer = session.tracer();
    std::printf("load duration:        %.4fs\n", session.load_seconds());
    if (check.fit) std::printf("%s\n", describe_fit(*check.fit).c_str());
    std::printf("placement: %s\n", lm.placement_summary().c_str());
    if (const auto graph = lm.graph_device())
      std::printf("decode: one CUDA graph per step on %s\n", graph->str().c_str());

    generation.tracer = &tracer;
    check_generation(lm, ids, generation);  // a bad request is an error before any output
    std::vector<std::int32_t> generated;
    std::string ids_text;
    for (std::int32_t id : ids) ids_text += (ids_text.empty() ? "" : ",") + std::to_string(id);
    if (!prompt.empty()) std::printf("prompt: %s\n", prompt.c_str());
    std::printf("prompt ids: %s\n", ids_text.c_str());
    std::optional<text::StreamDecoder> stream;
    if (model_text) stream.emplace(model_text->tokenizer);
    std::printf("%s", stream ? "generated text: " : "generated ids:");
    std::fflush(stdout);
    const GenerationResult result = generate(lm, ids, generation, [&](std::int32_t id) {
      generated.push_back(id);
      if (stream) std::printf("%s", stream->push(id).c_str());
      else std::printf(" %d", id);
      std::fflush(stdout);
      return true;
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
                static_cast<long long>(lm.max_context()), dtype_name(session.context().kv_cache().dtype));
    const std::uint64_t checkpoint_bytes = session.weights().file_bytes();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("peak RSS: %.1f MiB (checkpoint %.1f MiB, mapped in place)", static_cast<double>(usage.ru_maxrss) / 1024.0,
                static_cast<double>(checkpoint_bytes) / (1 << 20));
    // What is resident now, by what backs it: the mapped file's pages against everything else.
    if (const std::optional<ProcessMemory> now = process_memory())
      std::printf("; now %.1f MiB of mapped files, %.1f MiB anonymous, %.1f MiB shared",
                  static_cast<double>(now->file_bytes) / (1 << 20), static_cast<double>(now->anon_bytes) / (1 << 20),
                  static_cast<double>(now->shmem_bytes) / (1 << 20));
    std::printf("\n");
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
  CLI::Option* prompt_option = sub->add_option("-p,--prompt", command->prompt,
                  "prompt text, encoded by the model's tokenizer.json (beside the weights, or --tokenizer); the "
                  "answer is printed as text");
  sub->add_option("-f,--file,--prompt_file", command->prompt_file, "the prompt text from a file (less a final newline)")
      ->excludes(prompt_option);
  sub->add_option("--tokenizer", command->tokenizer, "--prompt's tokenizer: a tokenizer.json or a directory holding one");
  command->sampling.add_to(*sub, "tokens to generate, 1 or more");
  command->engine.add_to(*sub);
  sub->add_flag("--dry_run", command->dry_run, "check the placement and stop (same output as `switchyard check`)");
  sub->add_option("--nvtx_layers", command->nvtx_layers, "NVTX ranges for these layers: 3,22,50 | 0-5 | all | none")
      ->capture_default_str();
  sub->add_flag("--profile", command->profile, "time each layer's parts per decode step and print the split");
  sub->add_option("--trace_out", command->trace_out, "write a Chrome/Perfetto trace-event JSON of the run");
  set_group(*sub, {"--dry_run", "--nvtx_layers", "--profile", "--trace_out"}, kOutputGroup);
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
