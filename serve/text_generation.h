#pragma once
// Text generation on a built model: the prompt's ids through generate() (operators/model/
// generator.h), the ids back to text in whole UTF-8 characters, and the stop conditions a chat
// needs: the model's end-of-turn ids, stop strings (text/stop_strings.h), the token budget and
// the caller's word (a client gone). `chat` and `serve` both run their turns through here.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "operators/model/generator.h"
#include "serve/text_result.h"
#include "text/model_text.h"

namespace switchyard::serve {

// The thinking switches R1 and Qwen3 users know: `think` false renders the template with
// enable_thinking=false (Qwen3's "/no_think" turn); force_think opens the answer with "<think>\n",
// as ktransformers' --force_think does for R1, whose template may leave it out.
struct ThinkOptions {
  std::optional<bool> think;  // nullopt: the template's default
  bool force_think = false;
};

struct ChatPrompt {
  std::string text;      // what the chat template rendered, plus the forced opening
  std::string opening;   // the forced opening ("<think>\n" or ""), which the answer shows first
};

// `messages`: an OpenAI-style list. Throws InputError for a model without a chat template, messages
// that are not such a list, or a template that fails.
ChatPrompt chat_prompt(const text::ModelText& model_text, const nlohmann::ordered_json& messages,
                       const ThinkOptions& think, const nlohmann::ordered_json& template_kwargs = nlohmann::ordered_json::object());

struct TextRequest {
  std::vector<std::int32_t> prompt;   // encoded (chat_prompt's text, or a completion's prompt)
  GenerationOptions generation;       // max_new_tokens, sampling, seed; stop_tokens: the model's end ids added
  std::vector<std::string> stop;      // stop strings
  bool ignore_end_ids = false;        // go past the model's end-of-turn ids (benchmarks)
};

// Runs the request. `on_text` gets each piece of text as soon as it is safe to show (never part of
// a stop string or of a UTF-8 character) and returns whether to go on; false ends the generation as
// `cancelled`. Throws InputError as check_generation does, before any work.
TextResult generate_text(CausalLM& model, const text::ModelText& model_text, const TextRequest& request,
                         const std::function<bool(std::string_view)>& on_text);

}  // namespace switchyard::serve
