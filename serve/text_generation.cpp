#include "serve/text_generation.h"

#include <algorithm>

#include "core/error.h"
#include "text/stop_strings.h"

namespace switchyard::serve {

ChatPrompt chat_prompt(const text::ModelText& model_text, const nlohmann::ordered_json& messages,
                       const ThinkOptions& think, const nlohmann::ordered_json& template_kwargs) {
  if (!model_text.chat)
    throw InputError(model_text.source + " has no chat template (tokenizer_config.json's chat_template, or a GGUF's "
                     "tokenizer.chat_template): this model takes plain completions only");
  nlohmann::ordered_json extra = template_kwargs.is_object() ? template_kwargs : nlohmann::ordered_json::object();
  if (think.think && !extra.contains("enable_thinking")) extra["enable_thinking"] = *think.think;
  ChatPrompt p;
  p.text = model_text.chat->render(messages, /*add_generation_prompt=*/true, extra);
  // The template may already open the thought (R1's later templates end with "<think>\n").
  if (think.force_think && !p.text.ends_with("<think>\n")) {
    p.opening = "<think>\n";
    p.text += p.opening;
  }
  return p;
}

TextResult generate_text(CausalLM& model, const text::ModelText& model_text, const TextRequest& request,
                         const std::function<bool(std::string_view)>& on_text) {
  GenerationOptions options = request.generation;
  if (!request.ignore_end_ids)
    for (const std::int32_t id : model_text.end_ids)
      if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), id) == options.stop_tokens.end())
        options.stop_tokens.push_back(id);
  TextResult result;
  text::StreamDecoder decoder(model_text.tokenizer, /*skip_special=*/true);
  text::StopStrings stops(request.stop);
  bool cancelled = false;
  auto hand_on = [&](const std::string& piece) {
    if (piece.empty() || cancelled) return;
    result.text += piece;
    if (on_text && !on_text(piece)) cancelled = true;
  };
  const GenerationResult g = generate(model, request.prompt, options, [&](std::int32_t id) {
    // An end id is not text; the decoder skips special tokens.
    hand_on(stops.push(decoder.push(id)));
    return !cancelled && !stops.stopped();
  });
  if (!cancelled && !stops.stopped()) hand_on(stops.push(decoder.finish()));
  if (!cancelled) hand_on(stops.finish());
  result.prompt_tokens = static_cast<std::int64_t>(request.prompt.size());
  result.completion_tokens = static_cast<std::int64_t>(g.tokens.size());
  result.stats = g.stats;
  result.finish = cancelled                                   ? TextFinish::cancelled
                  : stops.stopped() || g.finish == FinishReason::stop_token ? TextFinish::stop
                                                                            : TextFinish::length;
  return result;
}

}  // namespace switchyard::serve
