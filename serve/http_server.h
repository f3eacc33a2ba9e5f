#pragma once
// `switchyard serve`: the OpenAI HTTP API (serve/openai_api.h) over one built model, on
// cpp-httplib, whose connections serve/http_connections.h holds to a deadline and a bound per
// client. Endpoints: POST /v1/chat/completions and /v1/completions (server-sent events with
// "stream": true), GET /v1/models and /health. Bodies are read under the server's memory budget
// (serve/request_memory.h) and checked on the HTTP threads, then queued (serve/generation_queue.h)
// and generated one at a time on the thread that calls run(); a full queue answers 503.
// Nothing is sent while a request waits in the queue, so that a shutdown can still answer it 503.
// A non-streaming answer is sent whole when done, with its own status; a stream starts when its
// generation does, and one cut short by a shutdown ends with an error event, not a finish reason.
// A client that goes away is noticed within a second (its socket is looked at while it waits; an
// SSE comment probes a stream) and its generation stops.
#include <chrono>
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
  // Bodies being read and parsed, all requests together (serve/request_memory.h): a 32 MiB body's
  // share is 609 MiB.
  std::size_t request_memory_bytes = std::size_t{1} << 30;
  std::chrono::milliseconds read_deadline{60000};  // a request's line, headers and body, all of it
  std::size_t max_client_connections = 16;         // stalled connections per client address
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
