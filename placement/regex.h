#pragma once
// Regex: a PCRE2 pattern compiled once and searched anywhere in a subject, like Python's
// re.search. Matching is bounded: a pattern that backtracks catastrophically stops at a match
// limit and reports it instead of hanging. A search first looks for the pattern's required literals
// (placement/required_literal.h) and answers no_match without PCRE2 when the subject lacks one;
// a pattern is JIT-compiled once it has been run kJitAfterSearches times, since most of a large
// profile's patterns are rejected by their literal alone and compiling them would cost more than
// every search they make.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard {

// `text` with every regex metacharacter escaped: a pattern that matches exactly `text`.
std::string regex_escape(std::string_view text);

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
  // Runs of bytes every match contains, longest first; none when they cannot be read off.
  const std::vector<std::string>& required_literals() const;
  bool valid() const { return code_ != nullptr; }

  // Backtracking steps one search may take; module names are short, so honest patterns stay far
  // below this, and a runaway pattern ends within milliseconds.
  static constexpr unsigned kMatchLimit = 200000;
  static constexpr unsigned kJitAfterSearches = 16;

 private:
  struct State;  // shared by copies; searches mutate its match data, so one search at a time
  std::string pattern_;
  std::shared_ptr<State> code_;
};

}  // namespace switchyard
