// libFuzzer target for chat templates (text/chat_template.h): the input is a template's text,
// parsed, then rendered with a small conversation (system, user, assistant with a tool call,
// tool), and the rendered text encoded by a byte-level tokenizer, as `serve` and `chat` do with a
// template a GGUF carries (whose bytes need not be UTF-8). InputError is the expected answer to a template that does not parse or fails; any other
// exception, a crash, a sanitizer report or a time-out is a bug. docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/chat_template.h"
#include "tests/fuzz/byte_level_tokenizer.h"

std::uint64_t fuzz_chat_template_sink = 0;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris? 你好"},
      {"role": "assistant", "content": "<think>\nlook it up\n</think>\n\n", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"temp\": 18}"},
      {"role": "assistant", "content": null}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>"
  })");
  try {
    const auto t = switchyard::text::ChatTemplate::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    const std::string rendered = t.render(context);
    fuzz_chat_template_sink += switchyard::fuzz::byte_level_tokenizer().encode(rendered, false).size();
  } catch (const switchyard::InputError&) {
  }
  return 0;
}
