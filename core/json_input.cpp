#include "core/json_input.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"

namespace switchyard {

void check_json_nesting(std::string_view text, const std::string& source, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw InputError(source + ": JSON nesting deeper than " + std::to_string(max_depth) + " (at byte " +
                             std::to_string(i) + ")",
                         kExitBadContent);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars) {
  if (value.is_array()) return "a list of " + std::to_string(value.size()) + (value.size() == 1 ? " value" : " values");
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + (value.size() == 1 ? " field" : " fields");
  // Cut by characters, not bytes, so the message stays valid UTF-8.
  return printable_excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max_chars);
}

}  // namespace switchyard
