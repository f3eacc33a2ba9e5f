// `serve` in process, over loopback sockets written by hand (the openai npm client covers the
// happy paths; tests/serve/openai_client.mjs): the queue's 503, clients that go away while waiting
// or while their answer is generated, hostile HTTP, and concurrent clients each getting their own
// answer. The model is the built-in tiny DeepSeek-V3 with the real DeepSeek-V3 tokenizer.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/model_session.h"
#include "serve/http_server.h"
#include "tests/tokenizer_test_support.h"

using namespace switchyard;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// A loopback connection; closed when destroyed.
struct Connection {
  int fd = -1;
  explicit Connection(int port) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    timeval timeout{60, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  ~Connection() { close(fd); }
  void send_all(const std::string& bytes) {
    std::size_t at = 0;
    while (at < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may close first (a refused request)
      at += static_cast<std::size_t>(n);
    }
  }
  // Reads until `marker` appears or the server closes.
  std::string read_until(const std::string& marker) {
    std::string got;
    char buffer[4096];
    while (got.find(marker) == std::string::npos) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      got.append(buffer, static_cast<std::size_t>(n));
    }
    return got;
  }
};

std::string http_request(const std::string& method, const std::string& path, const std::string& body,
                         const std::string& extra_headers = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct Answer {
  int status = 0;
  std::string body;  // chunked bodies joined
};

Answer parse_answer(const std::string& raw) {
  Answer a;
  if (raw.size() > 12) a.status = std::stoi(raw.substr(9, 3));
  const std::size_t head = raw.find("\r\n\r\n");
  if (head == std::string::npos) return a;
  std::string rest = raw.substr(head + 4);
  if (raw.substr(0, head).find("Transfer-Encoding: chunked") == std::string::npos) {
    a.body = rest;
    return a;
  }
  std::size_t at = 0;
  for (;;) {
    const std::size_t line = rest.find("\r\n", at);
    if (line == std::string::npos) break;
    const std::size_t size = std::stoul(rest.substr(at, line - at), nullptr, 16);
    if (size == 0) break;
    a.body += rest.substr(line + 2, size);
    at = line + 2 + size + 2;
  }
  return a;
}

Answer ask(int port, const std::string& method, const std::string& path, const std::string& body = "",
           const std::string& headers = "") {
  Connection c(port);
  c.send_all(http_request(method, path, body, headers));
  return parse_answer(c.read_until("\r\n0\r\n\r\n"));
}

json health(int port) { return json::parse(ask(port, "GET", "/health").body); }

// Polls /health until `done` holds (or 20 s).
bool eventually(int port, const std::function<bool(const json&)>& done) {
  for (int i = 0; i < 400; ++i) {
    if (done(health(port))) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

json chat_body(const std::string& text, int max_tokens, bool stream = false, bool endless = false) {
  return {{"model", "tiny"},
          {"messages", {{{"role", "user"}, {"content", text}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", stream},
          {"ignore_eos", endless}};
}

// The server on its worker thread for one test.
struct Served {
  cli::ModelSession session;
  text::ModelText text;
  std::unique_ptr<serve::OpenAiServer> server;
  std::thread worker;
  int port = 0;

  explicit Served(std::size_t max_queue, const std::function<void(serve::ServerOptions&)>& adjust = nullptr)
      : session(options(), 512), text(text::ModelText::load(testing::real_tokenizer("deepseek_v3") / "tokenizer.json")) {
    REQUIRE_FALSE(session.place(&text.tokenizer, false));
    CausalLM& lm = session.build(cli::SessionSettings{});
    serve::ServerOptions o;
    o.port = 0;
    o.max_queue = max_queue;
    o.served_model_name = "tiny";
    o.log_requests = false;
    o.max_body_bytes = 1 << 20;
    if (adjust) adjust(o);
    server = std::make_unique<serve::OpenAiServer>(o, lm, text);
    port = server->bind();
    worker = std::thread([this] { server->run(); });
  }
  ~Served() {
    server->stop();
    worker.join();
  }
  static cli::ModelOptions options() {
    cli::ModelOptions m;
    m.max_context = 32768;  // long enough that an endless answer outlasts every probe
    m.profile_required = false;
    return m;
  }
};

}  // namespace

TEST_CASE("serve: a full queue answers 503; a client gone while queued or while answered is cancelled, and the rest are served") {
  Served s(1);
  // A: streams without end (ignore_eos to the context's end), holding the worker.
  auto a = std::make_unique<Connection>(s.port);
  a->send_all(http_request("POST", "/v1/chat/completions", chat_body("first", 30000, true, true).dump()));
  REQUIRE(a->read_until("data: {").find("data: {") != std::string::npos);
  // B waits in the queue (its one place); C finds it full.
  Connection b(s.port);
  b.send_all(http_request("POST", "/v1/chat/completions", chat_body("second", 4).dump()));
  REQUIRE(eventually(s.port, [](const json& h) { return h["waiting"] == 1; }));
  const Answer c = ask(s.port, "POST", "/v1/chat/completions", chat_body("third", 4).dump());
  CHECK(c.status == 503);
  CHECK(json::parse(c.body)["error"]["code"] == "queue_full");
  // A goes away: its generation stops, and B is answered.
  a.reset();
  CHECK(eventually(s.port, [](const json& h) { return h["cancelled"] == 1; }));
  const Answer bs = parse_answer(b.read_until("\r\n0\r\n\r\n"));
  REQUIRE(bs.status == 200);
  CHECK(json::parse(bs.body)["usage"]["completion_tokens"] == 4);
  // D, not streamed and endless, goes away while generated: the whitespace probe notices.
  {
    Connection d(s.port);
    d.send_all(http_request("POST", "/v1/chat/completions", chat_body("fourth", 30000, false, true).dump()));
    REQUIRE(eventually(s.port, [](const json& h) { return h["waiting"] == 0; }));
    std::this_thread::sleep_for(200ms);
  }
  CHECK(eventually(s.port, [](const json& h) { return h["cancelled"] == 2; }));
  const json h = health(s.port);
  CHECK(h["completed"] == 1);
  CHECK(h["refused_full"] == 1);
}

TEST_CASE("serve: hostile HTTP gets clear errors and the server keeps serving") {
  Served s(4);
  CHECK(ask(s.port, "GET", "/v1/nothing").status == 404);
  CHECK(ask(s.port, "POST", "/v1/chat/completions", "{not json").status == 400);
  CHECK(ask(s.port, "POST", "/v1/chat/completions", std::string(100000, '[')).status == 400);
  CHECK(ask(s.port, "POST", "/v1/chat/completions", std::string(2 << 20, ' ')).status == 413);
  CHECK(ask(s.port, "POST", "/v1/completions", R"({"prompt": [999999999]})").status == 400);
  const Answer long_prompt = ask(s.port, "POST", "/v1/completions", json{{"prompt", std::string(200000, 'a')}, {"max_tokens", 30000}}.dump());
  CHECK(long_prompt.status == 400);
  CHECK(json::parse(long_prompt.body)["error"]["code"] == "context_length_exceeded");
  {  // Not HTTP at all, and a request cut off mid-body.
    Connection garbage(s.port);
    garbage.send_all(std::string("\x16\x03\x01 hello? \r\n\r\n", 16));
    garbage.read_until("\r\n\r\n");
    Connection cut(s.port);
    cut.send_all("POST /v1/completions HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{\"prompt\":");
  }
  const Answer fine = ask(s.port, "POST", "/v1/completions", R"({"prompt": "The river", "max_tokens": 3, "temperature": 0})");
  REQUIRE(fine.status == 200);
  CHECK(json::parse(fine.body)["usage"]["completion_tokens"] == 3);
}

TEST_CASE("serve: concurrent clients each get the answer they get alone") {
  Served s(8);
  const std::vector<std::string> prompts = {"Rhine", "Danube", "Elbe", "Loire", "Tagus", "Volga"};
  std::vector<std::string> alone;
  for (const std::string& p : prompts) alone.push_back(json::parse(ask(s.port, "POST", "/v1/chat/completions", chat_body(p, 6).dump()).body)["choices"][0]["message"]["content"]);
  std::vector<std::future<Answer>> together;
  for (const std::string& p : prompts)
    together.push_back(std::async(std::launch::async, [&, p] { return ask(s.port, "POST", "/v1/chat/completions", chat_body(p, 6).dump()); }));
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Answer a = together[i].get();
    REQUIRE(a.status == 200);
    CHECK(json::parse(a.body)["choices"][0]["message"]["content"] == alone[i]);
  }
}

TEST_CASE("serve: a body compressed, without a length, past the limits or costlier than the memory budget gets a clear error") {
  // A 900 KB body's share is 18 MB, past this budget; a 600 KB one's 12.4 MB.
  Served s(4, [](serve::ServerOptions& o) { o.request_memory_bytes = 16 << 20; });
  const std::string body = chat_body("hi", 2).dump();
  const Answer gzip = ask(s.port, "POST", "/v1/chat/completions", body, "Content-Encoding: gzip\r\n");
  CHECK(gzip.status == 415);
  CHECK(json::parse(gzip.body)["error"]["message"].get<std::string>().find("Content-Encoding 'gzip' is not accepted") == 0);
  CHECK(json::parse(gzip.body)["error"]["message"].get<std::string>().find("identity") != std::string::npos);
  CHECK(ask(s.port, "POST", "/v1/chat/completions", body, "Content-Encoding: identity\r\n").status == 200);
  {  // No length at all; a length past the limit is refused before a byte of the body is read.
    Connection c(s.port);
    c.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n{}");
    CHECK(parse_answer(c.read_until("}}")).status == 411);
    Connection big(s.port);
    const auto sent = std::chrono::steady_clock::now();
    big.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n");
    const Answer a = parse_answer(big.read_until("}}"));
    CHECK(a.status == 413);
    CHECK(std::chrono::steady_clock::now() - sent < 2s);
  }
  const Answer busy = ask(s.port, "POST", "/v1/completions", json{{"prompt", std::string(900000, 'a')}}.dump());
  CHECK(busy.status == 503);
  CHECK(json::parse(busy.body)["error"]["code"] == "server_busy");
  std::string lists = R"({"prompt": "a", "max_tokens": [)";
  for (int i = 0; i < 200000; ++i) lists += i ? ",[]" : "[]";  // 600 KB of text, 12.8 MB as a document
  lists += "]}";
  const Answer bomb = ask(s.port, "POST", "/v1/completions", lists);
  CHECK(bomb.status == 413);
  CHECK(json::parse(bomb.body)["error"]["message"].get<std::string>().find("of memory to hold") != std::string::npos);
  CHECK(ask(s.port, "POST", "/v1/completions", R"({"prompt": "The river", "max_tokens": 2})").status == 200);
}

TEST_CASE("serve: slow clients get 408 at the deadline, those past the bound per address 429, and /health answers throughout") {
  Served s(4, [](serve::ServerOptions& o) {
    o.read_deadline = 1500ms;
    o.max_client_connections = 4;
  });
  // Twelve clients from this address dribble a body a byte at a time, each byte within the read timeout.
  std::vector<std::unique_ptr<Connection>> slow;
  for (int i = 0; i < 12; ++i) {
    slow.push_back(std::make_unique<Connection>(s.port));
    slow.back()->send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{");
  }
  std::atomic<bool> dribbling{true};
  std::thread dribbler([&] {
    while (dribbling) {
      for (auto& c : slow) {
        // Until answered: bytes sent after the server has closed would be answered with a reset.
        pollfd answered{c->fd, POLLIN, 0};
        if (poll(&answered, 1, 0) == 0) c->send_all(" ");
      }
      std::this_thread::sleep_for(100ms);
    }
  });
  const auto began = std::chrono::steady_clock::now();
  auto slowest_health = 0ms;
  while (std::chrono::steady_clock::now() - began < 2500ms) {
    const auto asked = std::chrono::steady_clock::now();
    CHECK(health(s.port)["status"] == "ok");
    slowest_health = std::max(slowest_health, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - asked));
    std::this_thread::sleep_for(100ms);
  }
  CHECK(slowest_health < 500ms);
  int timed_out = 0, refused = 0;
  for (auto& c : slow) {
    const Answer a = parse_answer(c->read_until("}}"));
    timed_out += a.status == 408;
    refused += a.status == 429;
  }
  dribbling = false;
  dribbler.join();
  CHECK(timed_out == 4);
  CHECK(refused == 8);
}

TEST_CASE("serve: a shutdown answers waiting requests 503 and ends a running stream with an error event, not a finish") {
  Served s(2);
  Connection running(s.port);
  running.send_all(http_request("POST", "/v1/chat/completions", chat_body("first", 30000, true, true).dump()));
  std::string streamed = running.read_until("data: {");
  REQUIRE(streamed.find("data: {") != std::string::npos);
  Connection waiting(s.port), waiting_stream(s.port);
  waiting.send_all(http_request("POST", "/v1/chat/completions", chat_body("second", 4).dump()));
  waiting_stream.send_all(http_request("POST", "/v1/chat/completions", chat_body("third", 4, true).dump()));
  REQUIRE(eventually(s.port, [](const json& h) { return h["waiting"] == 2; }));
  s.server->stop();
  streamed += running.read_until("\r\n0\r\n\r\n");
  const Answer stream = parse_answer(streamed);
  CHECK(stream.status == 200);
  const std::size_t last_event = stream.body.rfind("data: ");
  REQUIRE(last_event != std::string::npos);
  const json end = json::parse(stream.body.substr(last_event + 6));
  CHECK(end["error"]["message"].get<std::string>().find("shutting down") != std::string::npos);
  CHECK(stream.body.find("[DONE]") == std::string::npos);
  CHECK(stream.body.find("\"finish_reason\":\"stop\"") == std::string::npos);
  for (Connection* c : {&waiting, &waiting_stream}) {
    const Answer a = parse_answer(c->read_until("}}"));
    CHECK(a.status == 503);
    CHECK(json::parse(a.body)["error"]["message"].get<std::string>().find("shutting down") != std::string::npos);
  }
}
