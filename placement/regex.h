#pragma once
// Regex: a PCRE2 pattern compiled once (JIT where the platform has it) and searched anywhere in
// a subject, like Python's re.search. Matching is bounded: a pattern that backtracks
// catastrophically stops at a match limit and reports it instead of hanging.
#include <memory>
#include <string>
#include <string_view>

namespace switchyard {

class Regex {
 public:
  enum class Outcome { match, no_match, limit_exceeded };

  struct CompileError {
    std::string message;
    std::size_t offset = 0;  // character offset in the pattern
  };

  // Returns false and fills `error` when the pattern does not compile.
  static bool compile(std::string_view pattern, Regex& out, CompileError& error);

  Outcome search(std::string_view subject) const;
  const std::string& pattern() const { return pattern_; }
  bool valid() const { return code_ != nullptr; }

  // Backtracking steps one search may take; module names are short, so honest patterns stay far
  // below this, and a runaway pattern ends within milliseconds.
  static constexpr unsigned kMatchLimit = 200000;

 private:
  struct State;
  std::string pattern_;
  std::shared_ptr<State> code_;
};

}  // namespace switchyard
