#include "serve/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <ctime>
#include <new>
#include <optional>

#include "core/error.h"
#include "core/json_input.h"
#include "core/text.h"
#include "serve/generation_queue.h"
#include "serve/http_connections.h"
#include "serve/request_memory.h"

namespace switchyard::serve {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kProbeInterval = std::chrono::milliseconds(1000);  // liveness probes while a client waits

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(error_body(error), "application/json");
}

// A failed job's error as OpenAI's body (its status already sent as 200 once streaming began).
std::string job_error_body(const Job::Update& u) {
  return error_body(ApiError(u.status, u.error, "", "", u.status >= 500 ? "server_error" : "invalid_request_error"));
}

// Writes all of `text`; false when the client is gone.
bool write(httplib::DataSink& sink, std::string_view text) { return sink.write(text.data(), text.size()); }

// An answer sent before the body was read whole: the rest of it must not be read as a next request.
void refuse_and_close(httplib::Response& res, const ApiError& error) {
  send_error(res, error);
  res.set_header("Connection", "close");
  if (Connection* c = HttpConnections::current()) c->close_after_response();
}

ApiError out_of_memory(const std::string& what) {
  return ApiError(503, "The server ran out of memory " + what + "; retry later, or send a smaller request", "", "out_of_memory",
                  "server_error");
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y)); });
}

ConnectionLimits connection_limits(const ServerOptions& o) {
  ConnectionLimits l;
  l.read_deadline = o.read_deadline;
  l.max_client_connections = o.max_client_connections;
  return l;
}

}  // namespace

struct OpenAiServer::Impl {
  ServerOptions options;
  CausalLM& model;
  const text::ModelText& model_text;
  HttpConnections http;
  GenerationQueue queue;
  RequestMemory request_memory;
  // What the model's KV cache holds from the request before (read and written by the queue's one
  // generation at a time): a request sharing its start (a system prompt, a conversation's turns so
  // far) prefills only the rest.
  KvPrefix kv_prefix;
  std::atomic<std::uint64_t> next_id{1};
  // Requests that reached the queue, by how they ended (/health reports them).
  std::atomic<std::uint64_t> completed{0}, cancelled{0}, failed{0}, refused_full{0};
  std::thread http_thread;
  int port = -1;
  // Completions being answered (until their last byte is written): a shutdown lets them end first,
  // since httplib's stop would leave a stream that had not begun writing without its end.
  std::mutex answering_mutex;
  std::condition_variable answering_done;
  std::size_t answering = 0;
  struct Answering {
    Impl& impl;
    explicit Answering(Impl& i) : impl(i) {
      std::lock_guard lock(impl.answering_mutex);
      ++impl.answering;
    }
    ~Answering() {
      std::lock_guard lock(impl.answering_mutex);
      if (--impl.answering == 0) impl.answering_done.notify_all();
    }
  };
  void wait_for_answers(std::chrono::seconds at_most) {
    std::unique_lock lock(answering_mutex);
    answering_done.wait_for(lock, at_most, [&] { return answering == 0; });
  }

  Impl(ServerOptions o, CausalLM& m, const text::ModelText& t)
      : options(std::move(o)), model(m), model_text(t), http(connection_limits(options)), queue(options.max_queue),
        request_memory(options.request_memory_bytes) {}

  bool authorised(const httplib::Request& req, httplib::Response& res) const {
    if (options.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + options.api_key) return true;
    send_error(res, ApiError(401, "Incorrect or missing API key: send the header 'Authorization: Bearer <key>' with the key serve was started with",
                             "", "invalid_api_key"));
    return false;
  }

  // The request as generate_text takes it, with the text the answer opens with.
  TextRequest text_request(const CompletionRequest& r, std::string& opening) const {
    TextRequest t;
    if (r.endpoint == Endpoint::chat) {
      ChatPrompt p;
      try {
        p = chat_prompt(model_text, r.messages, options.think, r.template_kwargs);
      } catch (const InputError& e) {
        throw ApiError(400, e.what(), "messages");
      }
      opening = p.opening;
      t.prompt = model_text.tokenizer.encode(p.text, /*add_special=*/false);
    } else if (r.prompt) {
      try {
        t.prompt = model_text.encode_prompt(*r.prompt);
      } catch (const InputError& e) {
        throw ApiError(400, e.what(), "prompt");
      }
    } else {
      for (const std::int32_t id : r.prompt_ids)
        if (id >= model.vocab_size())
          throw ApiError(400, "'prompt' holds token id " + std::to_string(id) + ", outside the vocabulary of " +
                                  std::to_string(model.vocab_size()), "prompt");
      t.prompt = r.prompt_ids;
    }
    if (t.prompt.empty()) throw ApiError(400, "the prompt encodes to no tokens", r.endpoint == Endpoint::chat ? "messages" : "prompt");
    const auto prompt_tokens = static_cast<std::int64_t>(t.prompt.size());
    const std::int64_t room = model.max_context() - prompt_tokens;
    const std::int64_t max_tokens = r.max_tokens.value_or(room);
    if (room < 1 || max_tokens > room)
      throw ApiError(400, "This model's maximum context length is " + std::to_string(model.max_context()) + " tokens. However, you requested " +
                              std::to_string(prompt_tokens + std::max<std::int64_t>(max_tokens, 1)) + " tokens (" +
                              std::to_string(prompt_tokens) + " in the messages, " + std::to_string(max_tokens) +
                              " in the completion). Please reduce the length of the messages or completion.",
                     r.endpoint == Endpoint::chat ? "messages" : "prompt", "context_length_exceeded");
    t.generation.max_new_tokens = static_cast<int>(max_tokens);
    t.generation.sampling = r.sampling;
    t.generation.seed = r.seed;
    t.stop = r.stop;
    t.ignore_end_ids = r.ignore_eos;
    return t;
  }

  // The body of a POST, read whole under the memory budget, with the share it holds; nullopt when
  // the request was answered instead (and the connection is to close).
  std::optional<std::string> read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                                       std::optional<RequestMemory::Lease>& lease) {
    if (const std::string encoding = req.get_header_value("Content-Encoding"); !encoding.empty() && !equals_ignoring_case(encoding, "identity")) {
      refuse_and_close(res, ApiError(415, "Content-Encoding '" + printable_excerpt(encoding, 40) + "' is not accepted: send the body uncompressed (Content-Encoding: identity, or no such header)",
                                     "", "unsupported_content_encoding"));
      return std::nullopt;
    }
    const std::string transfer = req.get_header_value("Transfer-Encoding");
    const bool chunked = equals_ignoring_case(transfer, "chunked");
    if (!transfer.empty() && !chunked) {
      refuse_and_close(res, ApiError(400, "Transfer-Encoding '" + printable_excerpt(transfer, 40) + "' is not accepted (chunked is)"));
      return std::nullopt;
    }
    std::size_t length = 0;
    if (!chunked) {
      const std::string declared = req.get_header_value("Content-Length");
      if (declared.empty()) {
        refuse_and_close(res, ApiError(411, "The request has no Content-Length: send one, or Transfer-Encoding: chunked"));
        return std::nullopt;
      }
      if (declared.size() > 15 || declared.find_first_not_of("0123456789") != std::string::npos) {
        refuse_and_close(res, ApiError(400, "Content-Length '" + printable_excerpt(declared, 20) + "' is not a number of bytes"));
        return std::nullopt;
      }
      length = std::stoull(declared);
    }
    const std::string too_large = "The request body is larger than " + std::to_string(options.max_body_bytes >> 20) + " MiB";
    if (length > options.max_body_bytes) {
      refuse_and_close(res, ApiError(413, too_large + " (" + std::to_string(length) + " bytes)", "", "request_too_large"));
      return std::nullopt;
    }
    const auto busy = [&] {
      return ApiError(503, "The server is reading or parsing " + std::to_string(request_memory.reserved_bytes() >> 20) + " MiB of requests' bodies (serve --max_request_memory_mib " +
                               std::to_string(request_memory.budget_bytes() >> 20) + "); retry later",
                      "", "server_busy", "server_error");
    };
    lease = request_memory.reserve(length);
    if (!lease) {
      refuse_and_close(res, busy());
      return std::nullopt;
    }
    std::string body;
    enum class Stop { none, too_large, busy } stop = Stop::none;
    bool read = false;
    try {
      body.reserve(length);
      read = reader([&](const char* data, std::size_t size) {
        if (size > options.max_body_bytes - body.size()) {
          stop = Stop::too_large;
          return false;
        }
        if (chunked && !lease->grow_to(body.size() + size)) {
          stop = Stop::busy;
          return false;
        }
        body.append(data, size);
        return true;
      });
    } catch (const std::bad_alloc&) {
      refuse_and_close(res, out_of_memory("reading the request body"));
      return std::nullopt;
    }
    if (read) {
      if (Connection* c = HttpConnections::current()) c->request_read();
      return body;
    }
    const Connection* connection = HttpConnections::current();
    if (stop == Stop::too_large) refuse_and_close(res, ApiError(413, too_large, "", "request_too_large"));
    else if (stop == Stop::busy) refuse_and_close(res, busy());
    else if (connection && connection->refusal() != ReadRefusal::none)
      refuse_and_close(res, ApiError(connection->refusal_status(), connection->refusal_message(), "", "",
                                     connection->refusal_status() >= 500 ? "server_error" : "invalid_request_error"));
    else refuse_and_close(res, ApiError(400, "The request body ended before its Content-Length, or its chunks are malformed"));
    return std::nullopt;
  }

  // Waits while the job is queued, looking at the client's socket each probe interval. True once it
  // has started or ended; false when its client went away (the job is cancelled, nothing is sent).
  bool wait_until_started(Job& job, const std::function<void()>& cancelled) const {
    Connection* connection = HttpConnections::current();
    while (!job.wait_started(kProbeInterval)) {
      if (connection && connection->client_gone()) {
        cancelled();
        connection->close_after_response();
        return false;
      }
    }
    return true;
  }

  void completions(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader, Endpoint endpoint) {
    const auto start = Clock::now();
    auto answering = std::make_shared<Answering>(*this);  // the stream's provider holds it to its end
    if (!authorised(req, res)) {
      res.set_header("Connection", "close");
      if (Connection* c = HttpConnections::current()) c->close_after_response();
      return;
    }
    CompletionRequest request;
    auto text = std::make_shared<TextRequest>();
    std::string opening;
    {
      // The share is held until the body, its JSON and the prompt built from them are freed (in
      // the reverse order of these declarations).
      std::optional<RequestMemory::Lease> lease;
      std::optional<std::string> body = read_body(req, res, reader, lease);
      if (!body) return;
      try {
        request = parse_request(*body, endpoint, options.defaults, lease->document_budget());
        body.reset();
        *text = text_request(request, opening);
      } catch (const ApiError& e) {
        release_json(request.messages);
        send_error(res, e);
        return;
      } catch (const std::bad_alloc&) {
        release_json(request.messages);  // its destructor could not run while memory is short
        send_error(res, out_of_memory("preparing the prompt"));
        return;
      }
      release_json(request.messages);
    }
    auto result = std::make_shared<TextResult>();
    std::shared_ptr<Job> job = queue.submit([this, text, result](Job& j) {
      try {
        text->generation.reuse = &kv_prefix;
        *result = generate_text(model, model_text, *text, [&j](std::string_view piece) { return j.push(piece); });
      } catch (const InputError& e) {
        j.fail(e.what(), 400);
      }
    });
    if (!job && queue.stopped()) {
      send_error(res, ApiError(503, "The server is shutting down; retry later", "", "", "server_error"));
      return;
    }
    if (!job) {
      ++refused_full;
      send_error(res, ApiError(503, "The server is busy: " + std::to_string(options.max_queue) +
                                        " requests are already waiting (serve --max_queue); retry later",
                               "", "queue_full", "server_error"));
      return;
    }
    ResponseIds ids{std::string(endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++),
                    static_cast<std::int64_t>(std::time(nullptr)), options.served_model_name};
    const bool stream = request.stream, include_usage = request.include_usage;
    const std::string path = req.path;
    auto log = [this, path, start, result](const char* outcome) {
      std::atomic<std::uint64_t>& count = outcome[0] == '2' ? completed : outcome[0] == 'c' ? cancelled : failed;
      ++count;
      if (!options.log_requests) return;
      std::fprintf(stderr, "serve: POST %s %s, %lld prompt + %lld completion tokens, %.2f s\n", path.c_str(), outcome,
                   static_cast<long long>(result->prompt_tokens), static_cast<long long>(result->completion_tokens),
                   std::chrono::duration<double>(Clock::now() - start).count());
    };
    // By value: the stream's provider runs it after this handler has returned.
    const auto client_gone = [log, job] {
      log("cancelled (the client went away)");  // first: the next request may be answered as soon as it is cancelled
      job->cancel();
    };
    if (!wait_until_started(*job, client_gone)) return;
    if (!job->started()) {
      // Ended while it waited (the server stopping): its own status, nothing sent before it.
      const Job::Update u = job->wait(kProbeInterval);
      res.status = u.status;
      res.set_content(job_error_body(u), "application/json");
      log("failed");
      return;
    }
    if (!stream) {
      // Sent whole when done, with the status it ended with.
      std::string body = opening;
      Connection* connection = HttpConnections::current();
      for (;;) {
        const Job::Update u = job->wait(kProbeInterval);
        body += u.text;
        if (u.done) {
          if (!u.error.empty()) {
            res.status = u.status;
            res.set_content(job_error_body(u), "application/json");
            log("failed");
          } else {
            TextResult r = *result;
            r.text = std::move(body);
            res.set_content(response_body(endpoint, ids, r), "application/json");
            log("200");
          }
          return;
        }
        if (connection && connection->client_gone()) {
          client_gone();
          connection->close_after_response();
          return;
        }
      }
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [=](std::size_t, httplib::DataSink& sink) {
          (void)answering;
          bool first = true;
          auto gone = [&] {
            client_gone();
            return false;
          };
          if (!opening.empty()) {
            if (!write(sink, stream_event(endpoint, ids, opening, true))) return gone();
            first = false;
          }
          for (;;) {
            const Job::Update u = job->wait(kProbeInterval);
            if (!u.text.empty()) {
              if (!write(sink, stream_event(endpoint, ids, u.text, first))) return gone();
              first = false;
            } else if (!u.done && !write(sink, ": waiting\n\n")) {
              return gone();
            }
            if (!u.done) continue;
            if (!u.error.empty()) {
              // The stream's end: an error event, never a finish reason or [DONE], so that a client
              // can tell an answer cut short from a whole one.
              write(sink, "data: " + job_error_body(u) + "\n\n");
              log("failed");
            } else {
              if (first && !write(sink, stream_event(endpoint, ids, "", true))) return gone();
              write(sink, stream_final_event(endpoint, ids, *result));
              if (include_usage) write(sink, stream_usage_event(endpoint, ids, *result));
              write(sink, kStreamDone);
              log("200 (stream)");
            }
            sink.done();
            return true;
          }
        });
  }

  void routes() {
    // With a ContentReader: the handler reads the body itself, after checking its headers.
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      completions(req, res, reader, Endpoint::chat);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      completions(req, res, reader, Endpoint::completion);
    });
    http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorised(req, res)) return;
      const nlohmann::json body = {{"object", "list"},
                                   {"data", nlohmann::json::array({{{"id", options.served_model_name},
                                                                    {"object", "model"},
                                                                    {"created", 0},
                                                                    {"owned_by", "switchyard"},
                                                                    {"max_model_len", model.max_context()}}})}};
      res.set_content(body.dump(), "application/json");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(nlohmann::json{{"status", "ok"},
                                     {"waiting", queue.waiting()},
                                     {"completed", completed.load()},
                                     {"cancelled", cancelled.load()},
                                     {"failed", failed.load()},
                                     {"refused_full", refused_full.load()}}
                          .dump(),
                      "application/json");
    });
    // Unknown paths, wrong methods, requests the connection layer stopped reading, bodies of other
    // routes: OpenAI-style bodies.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const Connection* connection = HttpConnections::current();
      std::string message;
      if (connection && connection->refusal() != ReadRefusal::none) {
        res.status = connection->refusal_status();
        message = connection->refusal_message();
      } else {
        message = res.status == 404   ? "No route " + req.method + " " + req.path + " (see /v1/models, /v1/chat/completions, /v1/completions, /health)"
                  : res.status == 413 ? "The request body is too large"
                  : res.status == 400 ? "The request is not HTTP/1.1 this server can read (its request line or headers)"
                                      : "HTTP " + std::to_string(res.status);
      }
      res.set_content(error_body(ApiError(res.status, message)), "application/json");
    });
    // Must not throw: an exception leaving it ends the process (httplib calls it from a catch block).
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) noexcept {
      try {
        try {
          if (ep) std::rethrow_exception(ep);
          send_error(res, ApiError(500, "internal error", "", "", "server_error"));
        } catch (const std::bad_alloc&) {
          send_error(res, out_of_memory("answering the request"));
        } catch (const std::exception& e) {
          send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error"));
        } catch (...) {
          send_error(res, ApiError(500, "internal error", "", "", "server_error"));
        }
      } catch (...) {
        res.status = 503;  // no memory even for the message: the status alone
        res.body.clear();
      }
    });
    http.set_payload_max_length(options.max_body_bytes);
    http.set_keep_alive_timeout(5);
    // A thread for each request that may wait or be generated, each stalled connection allowed,
    // and a few to answer the rest (503s, /health) at once.
    const std::size_t threads = std::min<std::size_t>(options.max_queue + 1 + http.limits().max_stalled_connections + 4, 1024);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  }
};

OpenAiServer::OpenAiServer(ServerOptions options, CausalLM& model, const text::ModelText& model_text)
    : impl_(std::make_unique<Impl>(std::move(options), model, model_text)) {
  impl_->routes();
}

OpenAiServer::~OpenAiServer() {
  stop();
  if (impl_->http_thread.joinable()) impl_->http_thread.join();
}

int OpenAiServer::bind() {
  const ServerOptions& o = impl_->options;
  if (o.port == 0) {
    impl_->port = impl_->http.bind_to_any_port(o.host);
  } else {
    impl_->port = impl_->http.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (impl_->port < 0)
    throw InputError("serve: cannot listen on " + o.host + ":" + std::to_string(o.port) +
                     " (the address is in use, or not an address of this machine)");
  impl_->http.widen_listen_backlog();
  return impl_->port;
}

void OpenAiServer::run() {
  if (impl_->port < 0) bind();
  impl_->http_thread = std::thread([this] { impl_->http.listen_after_bind(); });
  impl_->queue.run_worker();
  // The answers the stop ended (503s, streams' error events) are written before the HTTP side
  // stops; a client that does not read its answer holds the stop no more than this.
  impl_->wait_for_answers(std::chrono::seconds(10));
  impl_->http.shut_down();
  if (impl_->http_thread.joinable()) impl_->http_thread.join();
}

void OpenAiServer::stop() {
  // The queue alone: run() stops the HTTP side once the answers this ends are sent.
  impl_->queue.stop();
}

}  // namespace switchyard::serve
