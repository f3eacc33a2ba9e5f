#include "core/json_input.h"

#include <algorithm>
#include <iterator>
#include <new>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/text.h"
#include "core/units.h"

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

std::size_t json_document_budget(std::size_t text_bytes) {
  constexpr std::size_t kBytesPerTextByte = 16, kFloorBytes = std::size_t{1} << 20;
  return text_bytes > (SIZE_MAX - kFloorBytes) / kBytesPerTextByte ? SIZE_MAX : kBytesPerTextByte * text_bytes + kFloorBytes;
}

namespace {

// glibc's malloc on 64-bit: a chunk is the request plus 8 bytes, rounded up to 16, at least 32.
constexpr std::size_t chunk_bytes(std::size_t request) { return std::max<std::size_t>(32, (request + 8 + 15) / 16 * 16); }

// nlohmann's DOM builder with the document's heap counted as it grows: each value costs its slot in
// its parent (twice the slot: a vector's capacity runs up to twice its size) and what it points to
// (a string's object and characters, a container's object). Past the budget, parsing stops.
template <class Json>
class BudgetedDom {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  BudgetedDom(Json& root, std::size_t budget_bytes) : dom_(root, /*allow_exceptions=*/true), budget_bytes_(budget_bytes) {}

  bool null() { return value(0) && dom_.null(); }
  bool boolean(bool v) { return value(0) && dom_.boolean(v); }
  bool number_integer(number_integer_t v) { return value(0) && dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return value(0) && dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& text) { return value(0) && dom_.number_float(v, text); }
  bool string(string_t& s) { return value(string_bytes(s.size())) && dom_.string(s); }
  bool binary(binary_t& b) { return value(chunk_bytes(sizeof(binary_t)) + chunk_bytes(b.size())) && dom_.binary(b); }
  bool start_object(std::size_t size) {
    if (!value(chunk_bytes(sizeof(typename Json::object_t)))) return false;
    in_array_.push_back(false);
    return dom_.start_object(size);
  }
  bool key(string_t& k) {
    // The member's slot (key and value in place) and the key's characters past the short-string buffer.
    const std::size_t key_bytes = k.size() < sizeof(string_t) / 2 ? 0 : chunk_bytes(k.size() + 1);
    return charge(2 * sizeof(typename Json::object_t::value_type) + key_bytes) && dom_.key(k);
  }
  bool end_object() {
    in_array_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t size) {
    if (!value(chunk_bytes(sizeof(typename Json::array_t)))) return false;
    in_array_.push_back(true);
    return dom_.start_array(size);
  }
  bool end_array() {
    in_array_.pop_back();
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);  // throws e
  }

  bool over_budget() const { return used_bytes_ > budget_bytes_; }

 private:
  static std::size_t string_bytes(std::size_t size) {
    const std::size_t object = chunk_bytes(sizeof(string_t));
    return size < sizeof(string_t) / 2 ? object : object + chunk_bytes(size + 1);
  }
  // A value's heap, with its slot when its parent is a list (an object member's slot came with its key).
  bool value(std::size_t heap_bytes) {
    return charge(heap_bytes + (!in_array_.empty() && in_array_.back() ? 2 * sizeof(Json) : 0));
  }
  bool charge(std::size_t bytes) {
    used_bytes_ += bytes;
    return !over_budget();
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::size_t budget_bytes_;
  std::size_t used_bytes_ = 0;
  std::vector<bool> in_array_;  // per open container, innermost last: a list (true) or an object
};

// A container's last child, when it is a container with children of its own.
template <class Json>
Json* last_full_container(Json& node) {
  Json* last = nullptr;
  if (node.is_array() && !node.empty()) last = &node.back();
  else if (node.is_object() && !node.empty()) last = &std::prev(node.end()).value();
  return last && (last->is_array() || last->is_object()) && !last->empty() ? last : nullptr;
}

// Removes a container's last child, which has no children: its destructor allocates nothing.
template <class Json>
void pop_leaf(Json& node) {
  if (node.is_array()) node.template get_ref<typename Json::array_t&>().pop_back();
  else node.erase(std::prev(node.end()));
}

}  // namespace

template <class Json>
void release_json(Json& document) noexcept {
  // Depth-first along last children, popping leaves; the path is held in a fixed array (past its
  // depth the walk starts again from the top, which is slower but still allocates nothing).
  constexpr std::size_t kPathDepth = 128;
  Json* path[kPathDepth];
  std::size_t depth = 0;
  Json* node = &document;
  for (;;) {
    if (Json* child = last_full_container(*node)) {
      if (depth == kPathDepth) depth = 0;  // forget the path; the top is found again below
      else path[depth++] = node;
      node = child;
      continue;
    }
    if ((node->is_array() || node->is_object()) && !node->empty()) {
      pop_leaf(*node);
      continue;
    }
    if (node == &document) break;
    node = depth > 0 ? path[--depth] : &document;
  }
  document = Json();  // a scalar or an empty container: nothing to free but itself
}

template <class Json>
Json parse_json(std::string_view text, const std::string& source, std::size_t max_document_bytes) {
  check_json_nesting(text, source);
  Json document;
  try {
    BudgetedDom<Json> dom(document, max_document_bytes);
    const bool parsed = Json::sax_parse(text, &dom, Json::input_format_t::json, /*strict=*/true);
    if (!parsed && dom.over_budget()) {
      release_json(document);
      throw JsonTooLarge(source + ": its " + format_bytes(text.size()) + " of JSON would take more than " +
                             format_bytes(max_document_bytes) + " of memory to hold (many tiny values)",
                         JsonTooLarge::Cause::budget);
    }
  } catch (const nlohmann::json::exception& e) {
    release_json(document);
    // e.what(): "[json.exception.parse_error.101] parse error at line 3, column 5: ..."; nlohmann
    // quotes the last token read whole: megabytes, for a long string cut off.
    const std::string_view detail = e.what();
    const std::size_t after_id = detail.find("] ");
    throw InputError(source + ": not JSON: " +
                         printable_excerpt(after_id == std::string_view::npos ? detail : detail.substr(after_id + 2), 300),
                     kExitBadContent);
  } catch (const std::bad_alloc&) {
    release_json(document);
    throw JsonTooLarge(source + ": out of memory while parsing its " + format_bytes(text.size()) + " of JSON",
                       JsonTooLarge::Cause::out_of_memory);
  }
  return document;
}

template nlohmann::json parse_json<nlohmann::json>(std::string_view, const std::string&, std::size_t);
template nlohmann::ordered_json parse_json<nlohmann::ordered_json>(std::string_view, const std::string&, std::size_t);
template void release_json<nlohmann::json>(nlohmann::json&) noexcept;
template void release_json<nlohmann::ordered_json>(nlohmann::ordered_json&) noexcept;

std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars) {
  if (value.is_array()) return "a list of " + std::to_string(value.size()) + (value.size() == 1 ? " value" : " values");
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + (value.size() == 1 ? " field" : " fields");
  // Cut by characters, not bytes, so the message stays valid UTF-8.
  return printable_excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max_chars);
}

}  // namespace switchyard
