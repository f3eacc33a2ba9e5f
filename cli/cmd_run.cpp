// switchyard run: place the model by the profile (the same plan `check` prints), build the
// operators, prefill the prompt and decode. Without --model_path it runs a built-in tiny
// DeepSeek-V3 model generated from a fixed seed.
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

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
#include "operators/cpu/kernels/isa.h"
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

std::string join_ids(const std::vector<std::int32_t>& ids, const char* separator) {
  std::string out;
  for (std::int32_t id : ids) out += (out.empty() ? "" : separator) + std::to_string(id);
  return out;
}

// printf into a std::string.
template <typename... Args>
std::string format_string(const char* format, Args... args) {
  const int size = std::snprintf(nullptr, 0, format, args...);
  std::string out(static_cast<std::size_t>(std::max(size, 0)), '\0');
  std::snprintf(out.data(), out.size() + 1, format, args...);
  return out;
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
  std::string format = "text";
  bool quiet = false, verbose = false;
  // How much goes to stderr: quiet, warnings and errors alone; normal, the load and placement
  // lines and the statistics; verbose, the prompt and both id lists as well.
  enum class Level { quiet, normal, verbose };

  int run() {
    if (!model.chat_template.empty())
      throw InputError("--chat-template: run continues the prompt as plain text, without a chat template; `chat` and "
                       "`serve` render chats");
    if (quiet && verbose) throw InputError("give --quiet or --verbose, not both");
    if (dry_run && format == "json")
      throw InputError("--dry_run prints check's table; for the plan as JSON run `switchyard check --format json`");
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
    const Level level = quiet ? Level::quiet : verbose ? Level::verbose : Level::normal;
    const bool json = format == "json";

    ModelSession session(model, engine.prefill_chunk, level == Level::quiet);
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
    settings.show_progress = level != Level::quiet;
    CausalLM& lm = session.build(settings);
    Tracer& tracer = session.tracer();
    const auto note = [level](Level at, const std::string& line) {
      if (level >= at) std::fprintf(stderr, "%s\n", line.c_str());
    };
    note(Level::normal, format_string("load duration:        %.4fs", session.load_seconds()));
    if (check.fit) note(Level::normal, describe_fit(*check.fit));
    note(Level::normal, "placement: " + lm.placement_summary());
    if (const auto graph = lm.graph_device()) note(Level::normal, "decode: one CUDA graph per step on " + graph->str());

    generation.tracer = &tracer;
    check_generation(lm, ids, generation);  // a bad request is an error before any output
    if (!prompt.empty()) note(Level::verbose, "prompt: " + prompt);
    note(Level::verbose, "prompt ids: " + join_ids(ids, ","));
    // stdout holds the answer alone: its text as it comes (its ids where the prompt was ids), or
    // with --format json one object at the end.
    std::optional<text::StreamDecoder> stream;
    if (model_text) stream.emplace(model_text->tokenizer);
    std::string text;
    std::vector<std::int32_t> generated;
    const GenerationResult result = generate(lm, ids, generation, [&](std::int32_t id) {
      generated.push_back(id);
      const std::string piece = stream ? stream->push(id) : (generated.size() > 1 ? " " : "") + std::to_string(id);
      text += piece;
      if (!json) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
      return true;
    });
    if (stream) {
      const std::string rest = stream->finish();
      text += rest;
      if (!json) std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    if (!json) std::fputs("\n", stdout);
    std::fflush(stdout);
    note(Level::verbose, "generated ids: " + join_ids(generated, " "));

    const GenerationStats& s = result.stats;
    const double prompt_rate = s.prompt_seconds > 0 ? s.prompt_tokens / s.prompt_seconds : 0.0;
    const double decode_rate = s.decode_seconds > 0 ? s.generated_tokens / s.decode_seconds : 0.0;
    note(Level::normal, format_string("\nprompt eval count:    %lld token(s)\nprompt eval duration: %.4fs\n"
                                      "prompt eval rate:     %.2f tokens/s\neval count:           %lld token(s)\n"
                                      "eval duration:        %.4fs\neval rate:            %.2f tokens/s",
                                      static_cast<long long>(s.prompt_tokens), s.prompt_seconds, prompt_rate,
                                      static_cast<long long>(s.generated_tokens), s.decode_seconds, decode_rate));
    const double kv_mib = static_cast<double>(lm.kv_cache_bytes()) / (1 << 20);
    const char* kv_dtype = dtype_name(session.context().kv_cache().dtype);
    note(Level::normal, format_string("threads: %d, CPU kernels: %s, KV cache: %.1f MiB for %lld tokens (%s)",
                                      omp_get_max_threads(), cpu::isa_name(cpu::chosen_isa()), kv_mib,
                                      static_cast<long long>(lm.max_context()), kv_dtype));
    const std::uint64_t checkpoint_bytes = session.weights().file_bytes();
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const double peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
    // What is resident now, by what backs it: the mapped file's pages against everything else.
    const std::optional<ProcessMemory> now = process_memory();
    std::string memory = format_string("peak RSS: %.1f MiB (checkpoint %.1f MiB, mapped in place)", peak_mib,
                                       static_cast<double>(checkpoint_bytes) / (1 << 20));
    if (now)
      memory += format_string("; now %.1f MiB of mapped files, %.1f MiB anonymous, %.1f MiB shared",
                              static_cast<double>(now->file_bytes) / (1 << 20), static_cast<double>(now->anon_bytes) / (1 << 20),
                              static_cast<double>(now->shmem_bytes) / (1 << 20));
    note(Level::normal, memory);
    if (profile) std::fprintf(stderr, "\n%s", tracer.profile_table().c_str());  // asked for, so even under --quiet
    if (trace_file) {
      tracer.write_chrome_trace(*trace_file);
      trace_file->commit();
      note(Level::normal, "trace: " + trace_out + " (open in ui.perfetto.dev or chrome://tracing)");
    }
    if (json) {
      nlohmann::ordered_json doc;
      doc["prompt"] = prompt.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(prompt);
      doc["prompt_ids"] = ids;
      doc["text"] = stream ? nlohmann::ordered_json(text) : nlohmann::ordered_json();
      doc["generated_ids"] = generated;
      doc["finish_reason"] = result.finish == FinishReason::stop_token ? "stop" : "length";
      doc["timings"] = {{"load_s", session.load_seconds()},
                        {"prompt_tokens", s.prompt_tokens},
                        {"prompt_s", s.prompt_seconds},
                        {"prompt_tokens_per_s", prompt_rate},
                        {"decode_tokens", s.generated_tokens},
                        {"decode_s", s.decode_seconds},
                        {"decode_tokens_per_s", decode_rate}};
      doc["placement"] = lm.placement_summary();
      doc["fit"] = check.fit ? nlohmann::ordered_json(describe_fit(*check.fit)) : nlohmann::ordered_json();
      const auto graph = lm.graph_device();
      doc["decode_graph_device"] = graph ? nlohmann::ordered_json(graph->str()) : nlohmann::ordered_json();
      doc["threads"] = omp_get_max_threads();
      doc["cpu_kernels"] = cpu::isa_name(cpu::chosen_isa());
      doc["kv_cache"] = {{"bytes", lm.kv_cache_bytes()}, {"tokens", lm.max_context()}, {"dtype", kv_dtype}};
      doc["memory"] = {{"peak_rss_bytes", static_cast<std::uint64_t>(usage.ru_maxrss) * 1024},
                       {"checkpoint_bytes", checkpoint_bytes},
                       {"mapped_file_bytes", now ? nlohmann::ordered_json(now->file_bytes) : nlohmann::ordered_json()},
                       {"anonymous_bytes", now ? nlohmann::ordered_json(now->anon_bytes) : nlohmann::ordered_json()}};
      if (const auto& prefetched = session.prefetch())
        doc["prefetch"] = prefetched->skipped.empty()
                              ? nlohmann::ordered_json{{"bytes", prefetched->bytes}, {"seconds", prefetched->seconds}}
                              : nlohmann::ordered_json{{"skipped", prefetched->skipped}};
      else
        doc["prefetch"] = nullptr;
      // Bytes that are not UTF-8 (a model can stop inside a character) become U+FFFD, as serve sends them.
      std::printf("%s\n", doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
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
  sub->add_option("--format", command->format,
                  "text: the answer alone on stdout, as it is generated; json: one JSON object at the end (text, ids, "
                  "timings, placement)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  sub->add_flag("-q,--quiet", command->quiet, "nothing on stderr but warnings and errors");
  sub->add_flag("-v,--verbose", command->verbose, "also the prompt and the prompt's and answer's token ids on stderr");
  set_group(*sub, {"--format", "--quiet", "--verbose", "--dry_run", "--nvtx_layers", "--profile", "--trace_out"}, kOutputGroup);
  return [command] { return command->run(); };
}

}  // namespace switchyard::cli
