#include "placement/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "placement/required_literal.h"

namespace switchyard {

std::string regex_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}


struct Regex::State {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_match_data* match_data = nullptr;  // reused: one search at a time per Regex
  std::vector<std::string> required_literals;
  unsigned searches = 0;  // PCRE2 runs so far, until the JIT compile
  ~State() {
    pcre2_match_data_free(match_data);
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

bool Regex::compile(std::string_view pattern, Regex& out, CompileError& error) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0, &error_code,
                                   &error_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(error_code, buffer, sizeof buffer);
    error.message = reinterpret_cast<const char*>(buffer);
    error.offset = error_offset;
    return false;
  }
  auto state = std::make_shared<State>();
  state->code = code;
  state->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(state->context, kMatchLimit);
  pcre2_set_depth_limit(state->context, kMatchLimit);
  state->match_data = pcre2_match_data_create_from_pattern(code, nullptr);
  state->required_literals = switchyard::required_literals(pattern);
  out.pattern_ = std::string(pattern);
  out.code_ = std::move(state);
  return true;
}

const std::vector<std::string>& Regex::required_literals() const { return code_->required_literals; }

Regex::Outcome Regex::search(std::string_view subject) const {
  State& state = *code_;
  for (const std::string& literal : state.required_literals)
    if (subject.find(literal) == std::string_view::npos) return Outcome::no_match;
  // pcre2_match interprets until the JIT code exists (and always where the platform has no JIT).
  if (state.searches++ == kJitAfterSearches) pcre2_jit_compile(state.code, PCRE2_JIT_COMPLETE);
  const int rc = pcre2_match(state.code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0, 0,
                             state.match_data, state.context);
  if (rc >= 0) return Outcome::match;
  if (rc == PCRE2_ERROR_NOMATCH) return Outcome::no_match;
  // PCRE2_ERROR_MATCHLIMIT, DEPTHLIMIT, HEAPLIMIT, JIT_STACKLIMIT: the pattern ran away.
  return Outcome::limit_exceeded;
}

}  // namespace switchyard
