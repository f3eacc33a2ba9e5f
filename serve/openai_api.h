#pragma once
// The OpenAI HTTP API's bodies, without the HTTP: requests of /v1/chat/completions and
// /v1/completions parsed and checked field by field (a field of the wrong type or range is a 400
// naming it, as OpenAI's own answers do), the responses, the server-sent-event chunks of a stream
// and the error bodies. Every field is honoured or refused by name, never dropped: one this server
// cannot honour (n > 1, logprobs, tools, tool_choice, response_format other than text) is a 400
// naming it, and so is a field it does not know, as OpenAI answers one.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "operators/cpu/kernels/sampling.h"
#include "serve/text_result.h"

namespace switchyard::serve {

// An answer other than 200: {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
  int status;
  std::string type;   // invalid_request_error, authentication_error, server_error, ...
  std::string param;  // the request field at fault, "" for none
  std::string code;   // e.g. context_length_exceeded, "" for none
  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
};
std::string error_body(const ApiError& error);

enum class Endpoint { chat, completion };

// What a request may leave out: the server's flags (serve --temperature ...).
struct RequestDefaults {
  cpu::SamplingParams sampling;
  std::uint64_t seed = 0;
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::chat;
  bool stream = false;
  bool include_usage = false;            // stream_options.include_usage: a last chunk of usage alone
  nlohmann::ordered_json messages;       // chat
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  std::optional<std::string> prompt;     // completion: text ...
  std::vector<std::int32_t> prompt_ids;  // ... or token ids
  std::optional<std::int64_t> max_tokens;  // absent: to the end of the context
  cpu::SamplingParams sampling;
  std::uint64_t seed = 0;
  std::vector<std::string> stop;
  bool ignore_eos = false;
};

// Throws ApiError: 400 for a body that is not a JSON object, a missing, mistyped or unknown field,
// or a value out of range; 413 when the parsed body would take more than `max_document_bytes` of
// memory (core/json_input.h); 503 when memory runs out while parsing it.
CompletionRequest parse_request(std::string_view body, Endpoint endpoint, const RequestDefaults& defaults,
                                std::size_t max_document_bytes);
// With json_document_budget(body.size()) as the budget.
CompletionRequest parse_request(std::string_view body, Endpoint endpoint, const RequestDefaults& defaults);

// Identity of one response: "chatcmpl-..." or "cmpl-...", its Unix time and the served model name.
struct ResponseIds {
  std::string id;
  std::int64_t created = 0;
  std::string model;
};

nlohmann::json usage_json(const TextResult& result);
// The whole answer of a request without stream.
std::string response_body(Endpoint endpoint, const ResponseIds& ids, const TextResult& result);
// One server-sent event: "data: {...}\n\n". The first chat chunk carries the role (`first`); the
// last one the finish reason and usage.
std::string stream_event(Endpoint endpoint, const ResponseIds& ids, std::string_view text, bool first);
std::string stream_final_event(Endpoint endpoint, const ResponseIds& ids, const TextResult& result);
std::string stream_usage_event(Endpoint endpoint, const ResponseIds& ids, const TextResult& result);
constexpr std::string_view kStreamDone = "data: [DONE]\n\n";

}  // namespace switchyard::serve
