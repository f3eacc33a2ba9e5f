#include "placement/required_literal.h"

#include <algorithm>
#include <cctype>

namespace switchyard {
namespace {

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Escapes that stand for one position or one character class and take no argument.
bool is_plain_class_escape(char c) {
  switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': case 'h': case 'H': case 'v': case 'V':
    case 'b': case 'B': case 'A': case 'z': case 'Z': case 'G': case 'K': case 'R': case 'X':
    case 'n': case 't': case 'r': case 'f': case 'e': case 'a':
      return true;
    default: return false;
  }
}

class LiteralScanner {
 public:
  explicit LiteralScanner(std::string_view pattern) : p_(pattern) {}

  std::vector<std::string> scan() {
    if (p_.find("\\Q") != std::string_view::npos || p_.find("(?#") != std::string_view::npos ||
        p_.find("(*") != std::string_view::npos)
      return {};
    while (i_ < p_.size()) {
      if (!step()) return {};
    }
    commit();
    std::stable_sort(runs_.begin(), runs_.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    return runs_;
  }

 private:
  // One atom at top level, with its quantifier. False: give up.
  bool step() {
    const char c = p_[i_];
    switch (c) {
      case '|': return false;  // alternation: no single run is required
      case ')': return false;  // unbalanced; the pattern would not compile
      case '(': {
        if (inline_options_change_literals()) return false;
        if (!skip_group()) return false;
        other_atom();
        return true;
      }
      case '[':
        if (!skip_class()) return false;
        other_atom();
        return true;
      case '.': case '^': case '$':
        ++i_;
        other_atom();
        return true;
      case '?': case '*': case '+': case '{':
        return quantifier();
      case '\\': {
        if (i_ + 1 >= p_.size()) return false;
        const char e = p_[i_ + 1];
        i_ += 2;
        if (!is_alnum(e)) return literal(e);
        if (e == 'N' && i_ < p_.size() && p_[i_] == '{') return false;  // \N{U+...}
        if (!is_plain_class_escape(e)) return false;  // \x, \p, \g, \k, \c, \o, backreferences...
        other_atom();
        return true;
      }
      default:
        ++i_;
        return literal(c);
    }
  }

  bool literal(char c) {
    run_ += c;
    last_was_literal_ = true;
    return true;
  }

  void other_atom() {
    commit();
    last_was_literal_ = false;
  }

  // ?, *, +, {n,m} after an atom, with its lazy or possessive suffix.
  bool quantifier() {
    const char q = p_[i_];
    if (q == '{') {
      std::size_t j = i_ + 1;
      while (j < p_.size() && (std::isdigit(static_cast<unsigned char>(p_[j])) || p_[j] == ',' || p_[j] == ' ')) ++j;
      if (j >= p_.size() || p_[j] != '}') {
        // Not a quantifier, so a literal '{'; treating it as an unknown atom after dropping the
        // previous character is still conservative.
        if (last_was_literal_ && !run_.empty()) run_.pop_back();
        ++i_;
        other_atom();
        return true;
      }
      i_ = j + 1;
    } else {
      ++i_;
    }
    if (last_was_literal_ && !run_.empty()) {
      // The quantified character: optional for ?, * and {0,...}; for + it stays, but what
      // follows it need not be adjacent to what precedes it.
      if (q != '+') run_.pop_back();
    }
    commit();
    last_was_literal_ = false;
    if (i_ < p_.size() && (p_[i_] == '?' || p_[i_] == '+')) ++i_;
    return true;
  }

  // (?i), (?x), (?ix-s) and the like change how the rest of the pattern matches literals.
  bool inline_options_change_literals() const {
    if (i_ + 1 >= p_.size() || p_[i_ + 1] != '?') return false;
    std::size_t j = i_ + 2;
    bool changes = false;
    while (j < p_.size() && (std::isalpha(static_cast<unsigned char>(p_[j])) || p_[j] == '-' || p_[j] == '^')) {
      changes = changes || p_[j] == 'i' || p_[j] == 'x';
      ++j;
    }
    return changes && j < p_.size() && p_[j] == ')';
  }

  // Skips a character class starting at p_[i_] == '['.
  bool skip_class() {
    std::size_t j = class_end(i_);
    if (j == std::string_view::npos) return false;
    i_ = j;
    return true;
  }

  // One past the ']' closing the class that opens at `open`; npos when unterminated.
  std::size_t class_end(std::size_t open) const {
    std::size_t j = open + 1;
    if (j < p_.size() && p_[j] == '^') ++j;
    if (j < p_.size() && p_[j] == ']') ++j;  // a leading ']' is a member
    while (j < p_.size()) {
      if (p_[j] == '\\') {
        j += 2;
      } else if (p_[j] == '[' && j + 1 < p_.size() && p_[j + 1] == ':') {
        const std::size_t close = p_.find(":]", j + 2);
        if (close == std::string_view::npos) return std::string_view::npos;
        j = close + 2;
      } else if (p_[j] == ']') {
        return j + 1;
      } else {
        ++j;
      }
    }
    return std::string_view::npos;
  }

  // Skips a group starting at p_[i_] == '(' with everything nested in it.
  bool skip_group() {
    int depth = 0;
    std::size_t j = i_;
    while (j < p_.size()) {
      const char c = p_[j];
      if (c == '\\') {
        j += 2;
      } else if (c == '[') {
        j = class_end(j);
        if (j == std::string_view::npos) return false;
      } else if (c == '(') {
        ++depth;
        ++j;
      } else if (c == ')') {
        ++j;
        if (--depth == 0) {
          i_ = j;
          return true;
        }
      } else {
        ++j;
      }
    }
    return false;
  }

  void commit() {
    if (!run_.empty()) runs_.push_back(std::move(run_));
    run_.clear();
  }

  std::string_view p_;
  std::size_t i_ = 0;
  std::string run_;
  std::vector<std::string> runs_;
  bool last_was_literal_ = false;
};

}  // namespace

std::vector<std::string> required_literals(std::string_view pattern) { return LiteralScanner(pattern).scan(); }

}  // namespace switchyard
