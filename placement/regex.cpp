#include "placement/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace switchyard {

struct Regex::State {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_match_data* match_data = nullptr;  // reused: one search at a time per Regex
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
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter where JIT is unavailable
  state->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(state->context, kMatchLimit);
  pcre2_set_depth_limit(state->context, kMatchLimit);
  state->match_data = pcre2_match_data_create_from_pattern(code, nullptr);
  out.pattern_ = std::string(pattern);
  out.code_ = std::move(state);
  return true;
}

Regex::Outcome Regex::search(std::string_view subject) const {
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0, 0,
                             code_->match_data, code_->context);
  if (rc >= 0) return Outcome::match;
  if (rc == PCRE2_ERROR_NOMATCH) return Outcome::no_match;
  // PCRE2_ERROR_MATCHLIMIT, DEPTHLIMIT, HEAPLIMIT, JIT_STACKLIMIT: the pattern ran away.
  return Outcome::limit_exceeded;
}

}  // namespace switchyard
