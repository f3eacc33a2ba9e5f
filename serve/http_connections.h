#pragma once
// The connections under `serve`'s HTTP: cpp-httplib parses the requests and runs the handlers; this
// owns the sockets, so that slow clients cannot hold the server.
// - A deadline per request: its request line, headers and body must all arrive within
//   ConnectionLimits::read_deadline, however slowly they dribble in (a read timeout alone restarts
//   at every byte). Past it the request is answered 408.
// - A bound per client address on stalled connections: a connection still waiting for bytes of a
//   request (its line, headers or body, or the next request on a kept-alive connection) more than
//   kStallGrace after it began waiting for that request counts against its address until the
//   request is read; the one past max_client_connections is refused (429; an idle kept-alive
//   connection is closed), as is the one past max_stalled_connections over all addresses (503).
//   A request that arrives whole never counts, so /health answers even from an address whose
//   other connections all stall, and dribbling a byte at a time, however fast, does not evade it.
// - Threads: one per connection being served (httplib's pool), sized by the caller for every
//   stalled connection allowed plus the requests it serves at once.
// Handlers read their connection through HttpConnections::current(): whether the client has gone,
// and whether to close after the answer (a body left unread).
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace switchyard::serve {

struct ConnectionLimits {
  std::chrono::milliseconds read_deadline{60000};  // request line, headers and body together
  std::chrono::milliseconds read_timeout{5000};    // the longest wait for one byte (httplib's default)
  std::chrono::milliseconds keep_alive{5000};      // an idle kept-alive connection closes after this
  std::size_t max_client_connections = 16;         // stalled connections per client address
  std::size_t max_stalled_connections = 64;        // stalled connections over all addresses
};

// How long a connection may wait for request bytes before it counts as stalled: bytes a client
// sends at once arrive well within it, a client dribbling them does not.
constexpr std::chrono::milliseconds kStallGrace{200};

// Why a request's bytes stopped being read, when the connection layer stopped them.
enum class ReadRefusal { none, deadline, silent, crowded_client, crowded_server };

class HttpConnections;

// One accepted socket, as the handler of its current request sees it.
class Connection {
 public:
  // The client has closed its side or reset the connection (looked at without reading).
  bool client_gone() const;
  // Close the connection after this answer (its body was left unread, or half read).
  void close_after_response() { close_ = true; }
  // The request has been read whole: the connection no longer counts as stalled.
  void request_read();
  ReadRefusal refusal() const { return refusal_; }
  // The HTTP status and message for refusal() (408, 429, 503).
  int refusal_status() const;
  std::string refusal_message() const;

 private:
  friend class HttpConnections;
  friend class DeadlineStream;
  Connection(HttpConnections& server, int socket, std::string address) : server_(server), socket_(socket), address_(std::move(address)) {}
  ~Connection() { request_read(); }  // however it ends, it no longer counts as stalled
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  HttpConnections& server_;
  int socket_;
  std::string address_;  // the client's IP address
  bool close_ = false;
  ReadRefusal refusal_ = ReadRefusal::none;
  std::chrono::steady_clock::time_point reading_since_;  // when the wait for the current request began
  bool stalled_ = false;                                  // counted against address_ (begin_stall)
};

class HttpConnections : public httplib::Server {
 public:
  explicit HttpConnections(ConnectionLimits limits);
  ~HttpConnections() override;

  // The connection whose request this thread is handling (handlers run on their connection's
  // thread); nullptr outside one.
  static Connection* current();
  // Stops accepting and wakes every connection waiting for bytes; httplib's stop() then joins them.
  void shut_down();
  // After binding: httplib listens with a backlog of 5, so a burst of connections (many slow
  // clients at once) has the kernel drop SYNs, which the next client (/health) retries only after
  // a second. The system's most instead.
  void widen_listen_backlog();
  const ConnectionLimits& limits() const { return limits_; }

 private:
  friend class Connection;
  friend class DeadlineStream;
  bool process_and_close_socket(socket_t sock) override;
  // The connection's requests, kept alive up to httplib's count; false when one failed.
  bool serve(Connection& c);
  // Waits up to `timeout` (and not past `deadline`) for bytes on `c`: false, with c's refusal set
  // where the limits ended the wait, when none came.
  bool wait_for_bytes(Connection& c, std::chrono::milliseconds timeout, std::chrono::steady_clock::time_point deadline);
  // Polls `socket` for bytes until `until`, or until shut_down; true when bytes (or an end) are there.
  bool poll_until(int socket, std::chrono::steady_clock::time_point until) const;
  // Ends the writing side and drops incoming bytes briefly, so that the close does not reset the
  // connection before the client has read the answer.
  void linger(int socket) const;
  bool begin_stall(const std::string& address, ReadRefusal& refusal);
  void end_stall(const std::string& address);

  const ConnectionLimits limits_;
  std::atomic<bool> shutting_down_{false};
  int wake_pipe_[2] = {-1, -1};  // readable once shut_down() has run
  std::mutex mutex_;
  std::unordered_map<std::string, std::size_t> stalled_by_address_;
  std::size_t stalled_ = 0;
};

}  // namespace switchyard::serve
