#include "serve/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "core/error.h"
#include "serve/generation_queue.h"

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

}  // namespace

struct OpenAiServer::Impl {
  ServerOptions options;
  CausalLM& model;
  const text::ModelText& model_text;
  httplib::Server http;
  GenerationQueue queue;
  // What the model's KV cache holds from the request before (read and written by the queue's one
  // generation at a time): a request sharing its start (a system prompt, a conversation's turns so
  // far) prefills only the rest.
  KvPrefix kv_prefix;
  std::atomic<std::uint64_t> next_id{1};
  // Requests that reached the queue, by how they ended (/health reports them).
  std::atomic<std::uint64_t> completed{0}, cancelled{0}, failed{0}, refused_full{0};
  std::thread http_thread;
  int port = -1;

  Impl(ServerOptions o, CausalLM& m, const text::ModelText& t)
      : options(std::move(o)), model(m), model_text(t), queue(options.max_queue) {}

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

  void completions(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    const auto start = Clock::now();
    if (!authorised(req, res)) return;
    CompletionRequest request;
    auto text = std::make_shared<TextRequest>();
    std::string opening;
    try {
      request = parse_request(req.body, endpoint, options.defaults);
      *text = text_request(request, opening);
    } catch (const ApiError& e) {
      send_error(res, e);
      return;
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
    if (stream) {
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream", [=](std::size_t, httplib::DataSink& sink) {
            bool first = true;
            auto gone = [&] {
              log("cancelled (the client went away)");  // first: the next request may be answered as soon as it is cancelled
              job->cancel();
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
      return;
    }
    // Not streamed: whitespace before the JSON probes the connection while the client waits
    // (JSON allows it), so that a client gone stops its generation too.
    res.set_chunked_content_provider("application/json", [=](std::size_t, httplib::DataSink& sink) {
      std::string body = opening;
      auto last_probe = Clock::now();
      for (;;) {
        const Job::Update u = job->wait(kProbeInterval);
        body += u.text;
        if (!u.done) {
          if (Clock::now() - last_probe < kProbeInterval) continue;
          last_probe = Clock::now();
          if (!write(sink, " ")) {
            log("cancelled (the client went away)");
            job->cancel();
            return false;
          }
          continue;
        }
        if (!u.error.empty()) {
          write(sink, job_error_body(u));
          log("failed");
        } else {
          TextResult r = *result;
          r.text = body;
          write(sink, response_body(endpoint, ids, r));
          log("200");
        }
        sink.done();
        return true;
      }
    });
  }

  void routes() {
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, Endpoint::chat); });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, Endpoint::completion); });
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
    // Unknown paths, wrong methods, bodies past the limit: OpenAI-style bodies.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string message = res.status == 404   ? "No route " + req.method + " " + req.path + " (see /v1/models, /v1/chat/completions, /v1/completions, /health)"
                            : res.status == 413 ? "The request body is too large"
                                                : "HTTP " + std::to_string(res.status);
      res.set_content(error_body(ApiError(res.status, message)), "application/json");
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, "internal error: " + what, "", "", "server_error"));
    });
    http.set_payload_max_length(options.max_body_bytes);
    http.set_keep_alive_timeout(5);
    // A thread for each request that may wait and a few to answer the rest (503s, /health) at once.
    const std::size_t threads = std::min<std::size_t>(options.max_queue + 5, 512);
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
  return impl_->port;
}

void OpenAiServer::run() {
  if (impl_->port < 0) bind();
  impl_->http_thread = std::thread([this] { impl_->http.listen_after_bind(); });
  impl_->queue.run_worker();
  impl_->http.stop();
  if (impl_->http_thread.joinable()) impl_->http_thread.join();
}

void OpenAiServer::stop() {
  impl_->queue.stop();
  impl_->http.stop();
}

}  // namespace switchyard::serve
