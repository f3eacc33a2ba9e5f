#include "serve/openai_api.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "core/json_input.h"
#include "core/text.h"

namespace switchyard::serve {
namespace {

using Json = nlohmann::ordered_json;

// Messages and prompts may hold any text; dump replaces invalid UTF-8 rather than throwing.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

[[noreturn]] void bad(const std::string& param, const std::string& what) {
  throw ApiError(400, "'" + param + "' " + what, param);
}

const char* kind(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return "a number";
  }
}

// The field when present and not null.
const Json* field(const Json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<bool> boolean(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(name, std::string("must be a boolean, not ") + kind(*v));
  return v->get<bool>();
}

std::optional<double> number(const Json& body, const char* name, double low, double high) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, std::string("must be a number, not ") + kind(*v));
  const double x = v->get<double>();
  if (!(x >= low && x <= high))
    bad(name, "is " + dump(*v) + ", outside " + dump(Json(low)) + " to " + dump(Json(high)));
  return x;
}

std::optional<std::int64_t> integer(const Json& body, const char* name, std::int64_t low, std::int64_t high) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(name, std::string("must be an integer, not ") + (v->is_number() ? dump(*v) : kind(*v)));
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(high))
    bad(name, "is " + dump(*v) + ", outside " + std::to_string(low) + " to " + std::to_string(high));
  const std::int64_t x = v->get<std::int64_t>();
  if (x < low || x > high) bad(name, "is " + dump(*v) + ", outside " + std::to_string(low) + " to " + std::to_string(high));
  return x;
}

// Stop strings: one, or a list of up to 16 (OpenAI takes 4; more costs nothing here).
std::vector<std::string> stop_strings(const Json& body) {
  const Json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) bad("stop", std::string("must be a string or an array of strings, not ") + kind(*v));
  if (v->size() > 16) bad("stop", "has " + std::to_string(v->size()) + " strings; at most 16");
  std::vector<std::string> out;
  for (const Json& s : *v) {
    if (!s.is_string()) bad("stop", std::string("must hold strings only, not ") + kind(s));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// Fields whose only supported value is their default.
void refuse_unless(const Json& body, const char* name, const Json& allowed, const std::string& why) {
  const Json* v = field(body, name);
  if (v && *v != allowed) bad(name, "is " + dump(*v) + ": " + why);
}

// OpenAI's content parts, [{"type": "text", "text": ...}], joined into one string in place.
void join_content_parts(Json& message, std::size_t i) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null() || it->is_string()) return;
  const std::string where = "messages[" + std::to_string(i) + "].content";
  if (!it->is_array()) bad(where, std::string("must be a string or an array of text parts, not ") + kind(*it));
  std::string text;
  for (const Json& part : *it) {
    // Compared as JSON: a "type" of another kind is simply not "text" (value() would throw).
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") || !part["text"].is_string())
      bad(where, "holds a part that is not {\"type\": \"text\", \"text\": \"...\"} (only text is supported)");
    text += part["text"].get<std::string>();
  }
  *it = std::move(text);
}

}  // namespace

std::string error_body(const ApiError& error) {
  Json e = {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? Json() : Json(error.param)},
            {"code", error.code.empty() ? Json() : Json(error.code)}};
  return dump(Json{{"error", e}});
}

namespace {

// The fields each endpoint reads (each one honoured, or refused by name when its value asks for
// what this server cannot do); any other field is refused as OpenAI refuses it.
constexpr std::string_view kCommonFields[] = {
    "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
    "seed", "stop", "ignore_eos", "n", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "user"};
constexpr std::string_view kChatFields[] = {"messages", "max_completion_tokens", "chat_template_kwargs", "top_logprobs", "tools",
                                            "tool_choice", "parallel_tool_calls", "response_format", "functions", "function_call"};
constexpr std::string_view kCompletionFields[] = {"prompt", "echo", "suffix", "best_of"};

void refuse_unknown_fields(const Json& body, Endpoint endpoint) {
  for (const auto& item : body.items()) {
    const std::string& name = item.key();  // not a structured binding: clang 14 cannot capture one
    auto known = [&name](const auto& list) { return std::find(std::begin(list), std::end(list), name) != std::end(list); };
    if (known(kCommonFields) || (endpoint == Endpoint::chat ? known(kChatFields) : known(kCompletionFields))) continue;
    const std::string shown = printable_excerpt(name, 60);  // a key may be megabytes long
    throw ApiError(400, "Unrecognized request argument supplied: '" + shown + "' (this server does not support it)", shown);
  }
}

// The chat fields of tool calls and structured output, until they are implemented: each is refused
// unless its value asks for nothing (no tools, plain text).
void refuse_tools_and_formats(const Json& body) {
  if (const Json* tools = field(body, "tools"); tools && !(tools->is_array() && tools->empty()))
    bad("tools", "tool calls are not supported yet");
  if (const Json* functions = field(body, "functions"); functions && !(functions->is_array() && functions->empty()))
    bad("functions", "function calls are not supported yet");
  refuse_unless(body, "function_call", "none", "function calls are not supported yet");
  refuse_unless(body, "tool_choice", "none", "tool calls are not supported yet");
  if (const Json* p = field(body, "parallel_tool_calls"); p && !p->is_boolean())
    bad("parallel_tool_calls", std::string("must be a boolean, not ") + kind(*p));
  if (const Json* format = field(body, "response_format")) {
    if (!format->is_object()) bad("response_format", std::string("must be an object, not ") + kind(*format));
    if (format->size() != 1 || !format->contains("type") || (*format)["type"] != "text")
      bad("response_format", "is " + dump(*format) + ": only {\"type\": \"text\"} is supported (no JSON mode or schema yet)");
  }
}

}  // namespace

CompletionRequest parse_request(std::string_view body_text, Endpoint endpoint, const RequestDefaults& defaults,
                                std::size_t max_document_bytes) {
  Json body;
  try {
    body = parse_json<Json>(body_text, "the request body", max_document_bytes);
  } catch (const JsonTooLarge& e) {
    if (e.cause() == JsonTooLarge::Cause::budget) throw ApiError(413, e.what(), "", "request_too_large");
    throw ApiError(503, std::string(e.what()) + "; retry later, or send a smaller request", "", "out_of_memory", "server_error");
  } catch (const InputError& e) {
    throw ApiError(400, e.what());
  }
  if (!body.is_object()) throw ApiError(400, std::string("the request body must be a JSON object, not ") + kind(body));
  refuse_unknown_fields(body, endpoint);
  CompletionRequest r;
  r.endpoint = endpoint;
  if (const Json* m = field(body, "model"); m && !m->is_string()) bad("model", std::string("must be a string, not ") + kind(*m));
  if (const Json* u = field(body, "user"); u && !u->is_string()) bad("user", std::string("must be a string, not ") + kind(*u));
  r.stream = boolean(body, "stream").value_or(false);
  if (const Json* o = field(body, "stream_options")) {
    if (!o->is_object()) bad("stream_options", std::string("must be an object, not ") + kind(*o));
    for (const auto& [name, value] : o->items())
      if (name != "include_usage") bad("stream_options." + printable_excerpt(name, 60), "is not supported (include_usage is)");
    r.include_usage = boolean(*o, "include_usage").value_or(false);
  }
  if (endpoint == Endpoint::chat) {
    Json* messages = body.contains("messages") && !body["messages"].is_null() ? &body["messages"] : nullptr;
    if (!messages) throw ApiError(400, "'messages' is required", "messages");
    if (!messages->is_array()) bad("messages", std::string("must be an array of messages, not ") + kind(*messages));
    if (messages->empty()) bad("messages", "is empty; give at least one message");
    for (std::size_t i = 0; i < messages->size(); ++i) {
      Json& m = (*messages)[i];
      const std::string where = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) bad(where, std::string("must be an object, not ") + kind(m));
      if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", "must be a string");
      join_content_parts(m, i);
    }
    // Moved, not copied: a request's messages may be most of its megabytes.
    r.messages = std::move(*messages);
    if (const Json* kwargs = field(body, "chat_template_kwargs")) {
      if (!kwargs->is_object()) bad("chat_template_kwargs", std::string("must be an object, not ") + kind(*kwargs));
      r.template_kwargs = *kwargs;
    }
    r.max_tokens = integer(body, "max_completion_tokens", 1, std::numeric_limits<std::int32_t>::max());
    if (!r.max_tokens) r.max_tokens = integer(body, "max_tokens", 1, std::numeric_limits<std::int32_t>::max());
    refuse_unless(body, "logprobs", false, "log probabilities are not supported");
    refuse_unless(body, "top_logprobs", 0, "log probabilities are not supported");
    refuse_tools_and_formats(body);
  } else {
    const Json* prompt = field(body, "prompt");
    if (!prompt) throw ApiError(400, "'prompt' is required", "prompt");
    // A string, a list of one string, or a list of token ids.
    const Json* p = prompt;
    if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
    if (p->is_string()) {
      r.prompt = p->get<std::string>();
    } else if (p->is_array() && !p->empty() && std::all_of(p->begin(), p->end(), [](const Json& x) { return x.is_number_integer(); })) {
      for (const Json& x : *p) {
        if (x.is_number_unsigned() ? x.get<std::uint64_t>() > std::numeric_limits<std::int32_t>::max()
                                   : x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max())
          bad("prompt", "holds " + dump(x) + ", which is not a token id");
        r.prompt_ids.push_back(static_cast<std::int32_t>(x.get<std::int64_t>()));
      }
    } else {
      bad("prompt", "must be a string, a list of one string, or a list of token ids (batches of prompts are not supported)");
    }
    r.max_tokens = integer(body, "max_tokens", 1, std::numeric_limits<std::int32_t>::max()).value_or(16);  // OpenAI's default
    refuse_unless(body, "echo", false, "echo is not supported");
    refuse_unless(body, "logprobs", Json(), "log probabilities are not supported");
    refuse_unless(body, "suffix", Json(), "suffix is not supported");
    refuse_unless(body, "best_of", 1, "best_of other than 1 is not supported");
  }
  refuse_unless(body, "n", 1, "one choice per request is supported");
  refuse_unless(body, "presence_penalty", 0, "presence_penalty is not supported (repetition_penalty is)");
  refuse_unless(body, "frequency_penalty", 0, "frequency_penalty is not supported (repetition_penalty is)");
  if (const Json* bias = field(body, "logit_bias"); bias && !(bias->is_object() && bias->empty()))
    bad("logit_bias", "is not supported");
  r.sampling = defaults.sampling;
  r.seed = defaults.seed;
  if (auto v = number(body, "temperature", 0, 2)) r.sampling.temperature = static_cast<float>(*v);
  if (auto v = number(body, "top_p", 0, 1)) r.sampling.top_p = static_cast<float>(*v);
  if (auto v = integer(body, "top_k", -1, std::numeric_limits<std::int32_t>::max())) r.sampling.top_k = *v < 0 ? 0 : static_cast<int>(*v);
  if (auto v = number(body, "min_p", 0, 1)) r.sampling.min_p = static_cast<float>(*v);
  if (auto v = number(body, "repetition_penalty", 1e-3, 1e3)) r.sampling.repetition_penalty = static_cast<float>(*v);
  if (auto v = integer(body, "seed", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()))
    r.seed = static_cast<std::uint64_t>(*v);
  r.stop = stop_strings(body);
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  return r;
}

CompletionRequest parse_request(std::string_view body, Endpoint endpoint, const RequestDefaults& defaults) {
  return parse_request(body, endpoint, defaults, json_document_budget(body.size()));
}

nlohmann::json usage_json(const TextResult& result) {
  return {{"prompt_tokens", result.prompt_tokens},
          {"completion_tokens", result.completion_tokens},
          {"total_tokens", result.prompt_tokens + result.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", result.stats.cached_tokens}}}};
}

namespace {

Json header(Endpoint endpoint, const ResponseIds& ids, bool chunk) {
  const char* object = endpoint == Endpoint::chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return Json{{"id", ids.id}, {"object", object}, {"created", ids.created}, {"model", ids.model}};
}

Json finish_json(const TextResult& result) {
  // A cancelled generation has no client to read it; "stop" keeps the field's values OpenAI's.
  return result.finish == TextFinish::length ? "length" : "stop";
}

std::string event(const Json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

std::string response_body(Endpoint endpoint, const ResponseIds& ids, const TextResult& result) {
  Json j = header(endpoint, ids, false);
  Json choice = {{"index", 0}};
  if (endpoint == Endpoint::chat) choice["message"] = {{"role", "assistant"}, {"content", result.text}};
  else choice["text"] = result.text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_json(result);
  j["choices"] = Json::array({choice});
  j["usage"] = usage_json(result);
  return dump(j);
}

std::string stream_event(Endpoint endpoint, const ResponseIds& ids, std::string_view text, bool first) {
  Json j = header(endpoint, ids, true);
  Json choice = {{"index", 0}};
  if (endpoint == Endpoint::chat) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  j["choices"] = Json::array({choice});
  return event(j);
}

std::string stream_final_event(Endpoint endpoint, const ResponseIds& ids, const TextResult& result) {
  Json j = header(endpoint, ids, true);
  Json choice = {{"index", 0}};
  if (endpoint == Endpoint::chat) choice["delta"] = Json::object();
  else choice["text"] = "";
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_json(result);
  j["choices"] = Json::array({choice});
  j["usage"] = usage_json(result);
  return event(j);
}

std::string stream_usage_event(Endpoint endpoint, const ResponseIds& ids, const TextResult& result) {
  Json j = header(endpoint, ids, true);
  j["choices"] = Json::array();
  j["usage"] = usage_json(result);
  return event(j);
}

}  // namespace switchyard::serve
