#include "serve/http_connections.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "serve/openai_api.h"

namespace switchyard::serve {
namespace {

using Clock = std::chrono::steady_clock;

thread_local Connection* current_connection = nullptr;

// A connection closed on a request it did not read whole drops what still comes for this long, or
// this much (see linger).
constexpr std::chrono::milliseconds kLinger{1000};
constexpr std::size_t kLingerBytes = std::size_t{64} << 20;

std::string peer_address(int socket) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  if (getpeername(socket, reinterpret_cast<sockaddr*>(&address), &size) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = {};
  const void* ip = address.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6&>(address).sin6_addr)
                                                 : static_cast<const void*>(&reinterpret_cast<sockaddr_in&>(address).sin_addr);
  return inet_ntop(address.ss_family, ip, text, sizeof text) ? text : "?";
}

int milliseconds_until(Clock::time_point until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

const char* reason_phrase(int status) {
  switch (status) {
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    default: return "Bad Request";
  }
}

// "60" for 60000 ms, "0.5" for 500.
std::string seconds_text(std::chrono::milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof text, t.count() % 1000 == 0 ? "%.0f" : "%.1f", static_cast<double>(t.count()) / 1000);
  return text;
}

// An answer written straight to the socket, for refusals before httplib has read a request.
void write_refusal(int socket, int status, const std::string& message) {
  const std::string body = error_body(ApiError(status, message, "", "", status >= 500 ? "server_error" : "invalid_request_error"));
  const std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                           "\r\nConnection: close\r\n\r\n";
  const std::string all = head + body;
  // Small: the socket's send buffer takes it whole, or the client is not reading and loses it.
  (void)::send(socket, all.data(), all.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

// httplib's view of a connection while one request is read and answered: reads wait for bytes
// through HttpConnections::wait_for_bytes (the deadline, the stall bound), writes wait up to the
// write timeout. Reads are buffered as httplib's own SocketStream buffers them.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(HttpConnections& server, Connection& connection, Clock::time_point deadline)
      : server_(server), connection_(connection), deadline_(deadline) {}

  bool is_readable() const override { return offset_ < size_; }
  bool is_writable() const override {
    pollfd p{connection_.socket_, POLLOUT, 0};
    return ::poll(&p, 1, kWriteTimeoutMs) > 0 && (p.revents & POLLOUT) && !connection_.client_gone();
  }
  ssize_t read(char* out, std::size_t size) override {
    if (offset_ == size_) {
      if (!server_.wait_for_bytes(connection_, server_.limits().read_timeout, deadline_)) return -1;
      const ssize_t n = ::recv(connection_.socket_, buffer_, sizeof buffer_, 0);
      if (n <= 0) return n;
      offset_ = 0;
      size_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, size_ - offset_);
    std::memcpy(out, buffer_ + offset_, n);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* data, std::size_t size) override {
    pollfd p{connection_.socket_, POLLOUT, 0};
    if (::poll(&p, 1, kWriteTimeoutMs) <= 0 || !(p.revents & POLLOUT)) return -1;
    const ssize_t n = ::send(connection_.socket_, data, size, MSG_NOSIGNAL);
    if (n > 0) written_ += static_cast<std::size_t>(n);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(&getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(&getsockname, ip, port); }
  socket_t socket() const override { return connection_.socket_; }

  std::size_t written() const { return written_; }

 private:
  static constexpr int kWriteTimeoutMs = 5000;  // httplib's write timeout: a client that reads nothing for it is gone

  void address_of(int (*name)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage address{};
    socklen_t size = sizeof address;
    ip.clear();
    port = -1;
    if (name(connection_.socket_, reinterpret_cast<sockaddr*>(&address), &size) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (address.ss_family == AF_INET6) {
      const auto& a = reinterpret_cast<const sockaddr_in6&>(address);
      if (inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text)) ip = text;
      port = ntohs(a.sin6_port);
    } else if (address.ss_family == AF_INET) {
      const auto& a = reinterpret_cast<const sockaddr_in&>(address);
      if (inet_ntop(AF_INET, &a.sin_addr, text, sizeof text)) ip = text;
      port = ntohs(a.sin_port);
    }
  }

  HttpConnections& server_;
  Connection& connection_;
  const Clock::time_point deadline_;
  char buffer_[4096];
  std::size_t offset_ = 0, size_ = 0;
  std::size_t written_ = 0;
};

bool Connection::client_gone() const {
  pollfd p{socket_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char byte;
  return ::recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;  // bytes waiting: a next request
}

int Connection::refusal_status() const {
  switch (refusal_) {
    case ReadRefusal::deadline:
    case ReadRefusal::silent: return 408;
    case ReadRefusal::crowded_client: return 429;
    case ReadRefusal::crowded_server: return 503;
    case ReadRefusal::none: break;
  }
  return 400;
}

std::string Connection::refusal_message() const {
  const ConnectionLimits& l = server_.limits();
  switch (refusal_) {
    case ReadRefusal::deadline:
      return "The request did not arrive within " + seconds_text(l.read_deadline) + " s (its request line, headers and body; serve --read_deadline_s)";
    case ReadRefusal::silent: return "No bytes of the request came for " + seconds_text(l.read_timeout) + " s";
    case ReadRefusal::crowded_client:
      return "Too many connections from " + address_ + " are waiting to send their requests (at most " +
             std::to_string(l.max_client_connections) + ", serve --max_client_connections); send whole requests, or fewer at once";
    case ReadRefusal::crowded_server:
      return "Too many connections are waiting to send their requests (at most " + std::to_string(l.max_stalled_connections) + "); retry later";
    case ReadRefusal::none: break;
  }
  return "The request could not be read";
}

HttpConnections::HttpConnections(ConnectionLimits limits) : limits_(limits) {
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) wake_pipe_[0] = wake_pipe_[1] = -1;
}

HttpConnections::~HttpConnections() {
  for (int fd : wake_pipe_)
    if (fd >= 0) ::close(fd);
}

Connection* HttpConnections::current() { return current_connection; }

void HttpConnections::widen_listen_backlog() {
  if (const int socket = svr_sock_; socket != INVALID_SOCKET) ::listen(socket, SOMAXCONN);  // listen again: a new backlog
}

void HttpConnections::shut_down() {
  shutting_down_ = true;
  if (wake_pipe_[1] >= 0) {
    const char byte = 0;
    (void)!::write(wake_pipe_[1], &byte, 1);  // never read: the pipe stays readable
  }
  stop();
}

bool HttpConnections::poll_until(int socket, Clock::time_point until) const {
  for (;;) {
    pollfd p[2] = {{socket, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int n = ::poll(p, wake_pipe_[0] >= 0 ? 2 : 1, milliseconds_until(until));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (p[1].revents & POLLIN) return false;  // shutting down
    return true;
  }
}

bool HttpConnections::begin_stall(const std::string& address, ReadRefusal& refusal) {
  std::lock_guard lock(mutex_);
  std::size_t& mine = stalled_by_address_[address];
  if (mine >= limits_.max_client_connections) refusal = ReadRefusal::crowded_client;
  else if (stalled_ >= limits_.max_stalled_connections) refusal = ReadRefusal::crowded_server;
  if (refusal != ReadRefusal::none) {
    if (mine == 0) stalled_by_address_.erase(address);
    return false;
  }
  ++mine;
  ++stalled_;
  return true;
}

void HttpConnections::end_stall(const std::string& address) {
  std::lock_guard lock(mutex_);
  --stalled_;
  const auto it = stalled_by_address_.find(address);  // there: begin_stall counted it
  if (--it->second == 0) stalled_by_address_.erase(it);
}

bool HttpConnections::wait_for_bytes(Connection& c, std::chrono::milliseconds timeout, Clock::time_point deadline) {
  const auto give_up = std::min(Clock::now() + timeout, deadline);
  if (!c.stalled_) {
    if (poll_until(c.socket_, std::min(c.reading_since_ + kStallGrace, give_up))) return true;
    if (Clock::now() < give_up && !shutting_down_) {
      if (!begin_stall(c.address_, c.refusal_)) return false;
      c.stalled_ = true;
    }
  }
  if (c.stalled_ && poll_until(c.socket_, give_up)) return true;
  if (shutting_down_) return false;  // no answer owed
  c.refusal_ = Clock::now() >= deadline ? ReadRefusal::deadline : ReadRefusal::silent;
  return false;
}

void Connection::request_read() {
  if (!stalled_) return;
  server_.end_stall(address_);
  stalled_ = false;
}

bool HttpConnections::process_and_close_socket(socket_t sock) {
  bool ok = false;
  try {
    Connection c(*this, sock, peer_address(sock));
    ok = serve(c);
  } catch (...) {
    // Thrown outside a handler (httplib catches only theirs), e.g. while writing an answer when
    // memory runs out: this connection ends, the server goes on (on a pool thread it would terminate).
    ok = false;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

bool HttpConnections::serve(Connection& c) {
  bool ok = false;
  bool unread = false;  // bytes of a request may still be coming when the connection closes
  for (std::size_t served = 0; served < keep_alive_max_count_ && !shutting_down_; ++served) {
    // The request's first byte: within the read timeout on a new connection, the keep-alive time on
    // one kept alive. An idle kept-alive connection past the limits is closed without a word.
    c.reading_since_ = Clock::now();
    if (!wait_for_bytes(c, served == 0 ? limits_.read_timeout : limits_.keep_alive, c.reading_since_ + limits_.read_deadline)) {
      c.request_read();
      if (served == 0 && (c.refusal_ == ReadRefusal::crowded_client || c.refusal_ == ReadRefusal::crowded_server)) {
        write_refusal(c.socket_, c.refusal_status(), c.refusal_message());
        unread = true;
      }
      break;
    }
    DeadlineStream stream(*this, c, Clock::now() + limits_.read_deadline);
    bool client_closes = false;
    current_connection = &c;
    struct Unset {
      ~Unset() { current_connection = nullptr; }
    } unset;
    ok = process_request(stream, served + 1 == keep_alive_max_count_, client_closes, nullptr);
    current_connection = nullptr;
    c.request_read();
    // A request cut off before httplib had a line to answer: the refusal is still owed.
    if (c.refusal_ != ReadRefusal::none && stream.written() == 0) write_refusal(c.socket_, c.refusal_status(), c.refusal_message());
    unread = c.close_ || (c.refusal_ != ReadRefusal::none && c.refusal_ != ReadRefusal::silent);
    if (!ok || client_closes || c.close_ || c.refusal_ != ReadRefusal::none) break;
  }
  if (unread) linger(c.socket_);
  return ok;
}

void HttpConnections::linger(int socket) const {
  // Closed with bytes of the request unread, the socket would answer them with a reset, which can
  // reach the client before it has read our answer: end our side, then read (and drop) what is
  // still coming for a moment.
  ::shutdown(socket, SHUT_WR);
  const auto until = Clock::now() + kLinger;
  char buffer[16384];
  for (std::size_t dropped = 0; dropped < kLingerBytes && poll_until(socket, until);) {
    const ssize_t n = ::recv(socket, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    dropped += static_cast<std::size_t>(n);
  }
}

}  // namespace switchyard::serve
