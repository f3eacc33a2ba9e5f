#pragma once
// `switchyard serve`: the OpenAI HTTP API (serve/openai_api.h) over one built model, on
// cpp-httplib. Endpoints: POST /v1/chat/completions and /v1/completions (server-sent events with
// "stream": true), GET /v1/models and /health. Requests are checked on the HTTP threads, then
// queued (serve/generation_queue.h) and generated one at a time on the thread that calls run();
// a full queue answers 503. A streaming client that goes away is noticed at the next piece of
// text or within a second (an SSE comment probes the connection while it waits) and its
// generation stops; a non-streaming one is probed with whitespace before its JSON the same way.
#include <cstddef>
#include <memory>
#include <string>

#include "operators/model/causal_lm.h"
#include "serve/openai_api.h"
#include "serve/text_generation.h"
#include "text/model_text.h"

namespace switchyard::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (bind() says which)
  std::string api_key;               // "": no Authorization needed
  std::size_t max_queue = 16;        // requests that may wait behind the running one
  std::string served_model_name = "switchyard";
  RequestDefaults defaults;          // sampling a request leaves out
  ThinkOptions think;
  std::size_t max_body_bytes = 32u << 20;
  bool log_requests = true;          // one line on stderr per request
};

class OpenAiServer {
 public:
  OpenAiServer(ServerOptions options, CausalLM& model, const text::ModelText& model_text);
  ~OpenAiServer();
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  // Binds the socket; returns the port. Throws InputError naming host:port when it cannot.
  int bind();
  // Serves until stop(): HTTP on its own threads, the generations on this one.
  void run();
  // From any thread (a signal's): stops accepting, ends the running generation, returns run().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace switchyard::serve
