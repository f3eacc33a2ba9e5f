// libFuzzer target for the server's request bodies (serve/openai_api.h): the input's first byte
// picks the endpoint (even: /v1/chat/completions, odd: /v1/completions), the rest is the body.
// A body that parses is answered as the server would (the whole response, a stream's chunks and
// its usage) and a chat's messages are rendered through a ChatML-style template with its
// chat_template_kwargs. ApiError is the expected answer to a bad body and InputError to messages
// the template refuses; any other exception, a crash, a sanitizer report or a time-out is a bug.
// docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "serve/openai_api.h"
#include "text/chat_template.h"

std::uint64_t fuzz_openai_request_sink = 0;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace switchyard::serve;
  if (size == 0) return 0;
  static const switchyard::text::ChatTemplate chat = switchyard::text::ChatTemplate::parse(
      "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
      "{%- if message['content'] is string %}{{ message['content'] }}"
      "{%- elif message['content'] is iterable %}{%- for part in message['content'] %}"
      "{%- if part['type'] == 'text' %}{{ part['text'] }}{%- endif %}{%- endfor %}{%- endif %}"
      "{{ '<|im_end|>\\n' }}{%- endfor %}"
      "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
      "{%- if enable_thinking is defined and not enable_thinking %}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
      "{%- endif %}",
      "fuzz ChatML");
  const Endpoint endpoint = data[0] % 2 == 0 ? Endpoint::chat : Endpoint::completion;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  RequestDefaults defaults;
  defaults.sampling.temperature = 0.7f;
  try {
    const CompletionRequest request = parse_request(body, endpoint, defaults);
    TextResult result;
    result.text = request.prompt.value_or("answer");
    result.prompt_tokens = static_cast<std::int64_t>(request.prompt_ids.size()) + 1;
    result.completion_tokens = request.max_tokens.value_or(1);
    const ResponseIds ids{"cmpl-fuzz", 1, "fuzz"};
    fuzz_openai_request_sink += response_body(endpoint, ids, result).size();
    fuzz_openai_request_sink += stream_event(endpoint, ids, result.text, true).size();
    fuzz_openai_request_sink += stream_final_event(endpoint, ids, result).size();
    fuzz_openai_request_sink += stream_usage_event(endpoint, ids, result).size();
    if (endpoint == Endpoint::chat) {
      nlohmann::ordered_json context = request.template_kwargs;
      context["messages"] = request.messages;
      context["add_generation_prompt"] = true;
      try {
        fuzz_openai_request_sink += chat.render(context).size();
      } catch (const switchyard::InputError&) {
      }
    }
  } catch (const ApiError&) {
  }
  return 0;
}
