#pragma once
// The memory requests take on their way to the generation queue (the body, the JSON parsed from it,
// the prompt text and ids built from that), bounded for the whole server. A request reserves its
// share before its body is read, and one that does not fit is answered 503 at once: many large
// bodies at the same time would otherwise take many times the memory. The share of a body of B
// bytes is 3 B (the body and the JSON lexer's two copies of its longest string) plus its document
// budget (core/json_input.h: 16 B + 1 MiB), an upper bound of what parsing it may hold at once.
//
// glibc keeps freed heap in per-thread arenas and gives little of it back by itself, so a server that
// parsed a few large bodies on different threads would keep their peak for good: when a large share
// ends (its request's memory freed by then), the heap is trimmed back to the system.
#include <cstddef>
#include <mutex>
#include <optional>

namespace switchyard::serve {

class RequestMemory {
 public:
  explicit RequestMemory(std::size_t budget_bytes) : budget_bytes_(budget_bytes) {}
  RequestMemory(const RequestMemory&) = delete;
  RequestMemory& operator=(const RequestMemory&) = delete;

  // One request's share; returned (and the heap trimmed, when large) when destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    // Grows the share to a body of `body_bytes` (a chunked body, whose size comes as it is read);
    // false when that does not fit.
    bool grow_to(std::size_t body_bytes);
    // What the body's parsed JSON may take (parse_request's max_document_bytes).
    std::size_t document_budget() const { return document_budget_; }

   private:
    friend class RequestMemory;
    Lease(RequestMemory* owner, std::size_t bytes, std::size_t body_bytes);
    void end() noexcept;
    RequestMemory* owner_;
    std::size_t bytes_;
    std::size_t document_budget_;
  };

  // The share of a body of `body_bytes`; nullopt when it does not fit beside the shares held now.
  std::optional<Lease> reserve(std::size_t body_bytes);
  // A body's share: 3 B plus json_document_budget(B).
  static std::size_t share_bytes(std::size_t body_bytes);
  std::size_t budget_bytes() const { return budget_bytes_; }
  std::size_t reserved_bytes() const;

 private:
  bool take(std::size_t bytes);
  void give_back(std::size_t bytes) noexcept;

  const std::size_t budget_bytes_;
  mutable std::mutex mutex_;
  std::size_t reserved_bytes_ = 0;
};

}  // namespace switchyard::serve
