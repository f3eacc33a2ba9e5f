// JSON from outside (core/json_input.h): the parse nlohmann gives, under a memory budget that
// refuses documents far costlier than their text, and a release that frees a document without
// allocating (so that one can be dropped while memory is short).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "core/json_input.h"

using namespace switchyard;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string repeated(const std::string& item, int count, const std::string& open = "[", const std::string& close = "]") {
  std::string text = open;
  for (int i = 0; i < count; ++i) text += (i ? "," : "") + item;
  return text + close;
}

}  // namespace

TEST_CASE("json input: parse_json gives what nlohmann's parse gives, key order kept for ordered_json") {
  const std::string text = R"({"z": 1, "messages": [{"role": "user", "content": "a long enough string to leave the SSO buffer"}],
                               "t": 0.5, "n": null, "b": true, "u": 18446744073709551615, "i": -3, "deep": [[[{"k": []}]]]})";
  CHECK(parse_json<json>(text, "t", json_document_budget(text.size())) == json::parse(text));
  const ordered_json ordered = parse_json<ordered_json>(text, "t", json_document_budget(text.size()));
  CHECK(ordered == ordered_json::parse(text));
  CHECK(ordered.begin().key() == "z");
}

TEST_CASE("json input: bad syntax and deep nesting are InputErrors of bad content naming the source") {
  for (const std::string& text : {std::string("{bad"), std::string("[1] 2"), std::string(""), std::string(1000, '[')}) {
    try {
      parse_json<json>(text, "body.json", json_document_budget(text.size()));
      FAIL("parsed: " << text.substr(0, 20));
    } catch (const JsonTooLarge&) {
      FAIL("a syntax error taken for a document too large");
    } catch (const InputError& e) {
      CHECK(e.exit_code() == kExitBadContent);
      CHECK(std::string(e.what()).starts_with("body.json: "));
    }
  }
}

TEST_CASE("json input: the document budget refuses what costs far more memory than its text, and only that") {
  // Real shapes fit their budget: one long string (~1 byte per byte), many short messages (~8).
  const std::string long_string = R"({"content": ")" + std::string(4 << 20, 'a') + R"("})";
  CHECK_NOTHROW(parse_json<ordered_json>(long_string, "t", json_document_budget(long_string.size())));
  const std::string messages = repeated(R"({"role":"user","content":"hi"})", 200000);
  CHECK_NOTHROW(parse_json<ordered_json>(messages, "t", json_document_budget(messages.size())));
  const std::string numbers = repeated("1", 1000000);
  CHECK_NOTHROW(parse_json<json>(numbers, "t", json_document_budget(numbers.size())));
  // Hostile ones do not: an empty list, object or string in 3 bytes takes ~64-80 of heap.
  for (const std::string& item : {std::string("[]"), std::string("{}"), std::string("\"\"")}) {
    const std::string text = repeated(item, 1000000);
    try {
      parse_json<ordered_json>(text, "body", json_document_budget(text.size()));
      FAIL("a million of " << item << " fit the budget");
    } catch (const JsonTooLarge& e) {
      CHECK(e.cause() == JsonTooLarge::Cause::budget);
      CHECK(e.exit_code() == kExitUsageOrIo);
      CHECK(std::string(e.what()).find("body: its 2.9 MiB of JSON would take more than") == 0);
    }
  }
  // A small budget stops the parse early, whatever the shape.
  CHECK_THROWS_AS(parse_json<json>(long_string, "t", 1 << 20), JsonTooLarge);
}

TEST_CASE("json input: release_json empties any document, deep and wide, and leaves null") {
  json wide = json::parse(repeated(R"({"a": [1, {"b": "a string longer than the short buffer"}], "c": {}})", 10000));
  release_json(wide);
  CHECK(wide.is_null());
  // Deeper than the release's fixed path (128): its walk starts again from the top, still correct.
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += R"({"k": [1, 2, )";
  deep += "0";
  for (int i = 0; i < 300; ++i) deep += "]}";
  ordered_json d = ordered_json::parse(deep);
  release_json(d);
  CHECK(d.is_null());
  json scalar = "text";
  release_json(scalar);
  CHECK(scalar.is_null());
}
