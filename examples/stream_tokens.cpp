// stream_tokens: loads a model from a checkpoint directory with Switchyard's engine, the way
// `switchyard run` does, and prints each generated token the moment the model chooses it.
//
//   usage: stream_tokens MODEL_DIR PROMPT [MAX_NEW_TOKENS [TEMPERATURE [SEED]]]
//     MODEL_DIR  a checkpoint: config.json and safetensors (switchyard make-model --preset
//                tiny-deepseek-v3 --out DIR writes a small one with random weights)
//     PROMPT     token ids (1,2,3), or text when MODEL_DIR holds a tokenizer.json
//                (make-model --tokenizer TOKENIZER_DIR puts one there)
//     defaults: 16 tokens, temperature 0 (greedy), seed 0
//
// Prints one line per generated token: its id and, with a tokenizer, the text it completes as a
// JSON string (a character that spans tokens comes whole with its last token). The same seed
// gives the same tokens. Exit status as switchyard's: 1 for a model that is wrong, 2 for usage
// and unreadable files.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/diagnostics.h"
#include "core/error.h"
#include "core/model_description.h"
#include "operators/ops/build_context.h"
#include "operators/model/causal_lm.h"
#include "operators/model/generator.h"
#include "placement/check.h"
#include "text/model_text.h"
#include "text/tokenizer.h"

namespace {

using namespace switchyard;

// "1,2,3" as ids; nullopt for anything else (text to encode). Range is checked by generate().
std::optional<std::vector<std::int32_t>> parse_ids(const std::string& prompt) {
  std::vector<std::int32_t> ids;
  std::size_t start = 0;
  while (start <= prompt.size()) {
    const std::size_t end = std::min(prompt.find(',', start), prompt.size());
    const std::string item = prompt.substr(start, end - start);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    ids.push_back(static_cast<std::int32_t>(std::stol(item)));
    start = end + 1;
  }
  return ids;
}

// A whole number from 0 to `max`, or a usage error naming the argument.
std::uint64_t whole_number(const char* text, const char* name, std::uint64_t max) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (*text < '0' || *text > '9' || *end != '\0' || errno == ERANGE || value > max)
    throw InputError(std::string(name) + ": '" + text + "' is not a whole number from 0 to " + std::to_string(max));
  return value;
}

// A number, or a usage error naming the argument (check_generation_options refuses NaN and the rest).
float number(const char* text, const char* name) {
  char* end = nullptr;
  const float value = std::strtof(text, &end);
  if (end == text || *end != '\0') throw InputError(std::string(name) + ": '" + text + "' is not a number");
  return value;
}

int stream(int argc, char** argv) {
  const std::filesystem::path model_dir = argv[1];
  const std::string prompt_arg = argv[2];
  GenerationOptions generation;
  generation.max_new_tokens = argc > 3 ? static_cast<int>(whole_number(argv[3], "MAX_NEW_TOKENS", INT32_MAX)) : 16;
  generation.sampling.temperature = argc > 4 ? number(argv[4], "TEMPERATURE") : 0.0f;
  generation.seed = argc > 5 ? whole_number(argv[5], "SEED", UINT64_MAX) : 0;
  check_generation_options(generation);  // ranges: an InputError names the one outside them

  // The model's text, where the checkpoint has a tokenizer: the prompt's text is encoded as
  // `switchyard run --prompt` encodes it, and generation stops at the model's end-of-turn ids.
  std::optional<text::ModelText> text;
  std::error_code error;
  if (std::filesystem::is_regular_file(model_dir / "tokenizer.json", error))
    text = text::ModelText::load(model_dir / "tokenizer.json");
  std::vector<std::int32_t> prompt;
  if (std::optional<std::vector<std::int32_t>> ids = parse_ids(prompt_arg)) prompt = *ids;
  else if (text) prompt = text->encode_prompt(prompt_arg);
  else throw InputError(model_dir.string() + " has no tokenizer.json: give the prompt as token ids (1,2,3)");
  if (text) generation.stop_tokens = text->end_ids;

  // 1. The plan: the dry run `switchyard check` makes. Where the weights disagree with the
  //    config.json, that is a diagnostic here, before anything is loaded.
  CheckOptions options;
  options.model.model_path = model_dir;
  options.profile = "<stream_tokens' CPU profile>";  // names the text below in messages
  // Every module on the CPU (the profile `switchyard run` uses when given none), so this runs on
  // any machine. To place modules on GPUs, set options.profile to a profile file instead
  // (optimize_rules/ has some); the engine then needs the CUDA backend (Switchyard_HAVE_CUDA).
  options.profile_text = kCpuOnlyProfile;
  const CheckResult check = run_check(options);
  for (const Diagnostic& d : check.diagnostics.sorted()) std::cerr << format_diagnostic(d) << "\n";
  if (check.diagnostics.has_errors()) return kExitBadContent;

  // 2. The weights (memory-mapped) and the operators the plan asks for, built on their devices.
  //    The context refers to the tree, the plan and the weights: they outlive the model.
  const Checkpoint weights = open_model_weights(options.model, check.tree->config());
  BuildContext context{*check.tree, check.plan, weights, options.budget.max_context, /*tracer=*/nullptr};
  context.kv_cache_dtype = options.budget.kv_cache_dtype;  // the KV cache check estimated
  CausalLMOptions lm_options;
  lm_options.prefill_chunk = options.budget.prefill_chunk;
  CausalLM model(context, lm_options);

  // 3. Generation: on_token sees each id as soon as it is chosen; returning false would stop.
  std::cout << "prompt: " << prompt.size() << " ids\n";
  std::optional<text::StreamDecoder> decoder;
  if (text) decoder.emplace(text->tokenizer);
  const GenerationResult result = generate(model, prompt, generation, [&decoder](std::int32_t id) {
    std::cout << id;
    // The JSON string shows spaces and newlines; text that is not UTF-8 becomes U+FFFD.
    if (decoder) std::cout << " " << nlohmann::json(decoder->push(id)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::cout << std::endl;  // flushed: each token appears when it is made
    return true;
  });
  const GenerationStats& stats = result.stats;
  std::cout << "finish: " << (result.finish == FinishReason::stop_token ? "end-of-turn token" : "length") << ", "
            << result.tokens.size() << " tokens";
  if (stats.decode_seconds > 0) std::cout << ", " << stats.generated_tokens / stats.decode_seconds << " tokens/s";
  std::cout << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 6) {
    std::cerr << "usage: stream_tokens MODEL_DIR PROMPT [MAX_NEW_TOKENS [TEMPERATURE [SEED]]]\n";
    return switchyard::kExitUsageOrIo;
  }
  try {
    return stream(argc, argv);
  } catch (const switchyard::InputError& e) {
    // Unreadable files, a broken config.json, a prompt the model cannot take, out of memory on a
    // device: the message says what and where.
    std::cerr << "stream_tokens: error: " << e.what() << "\n";
    return e.exit_code();
  }
}
