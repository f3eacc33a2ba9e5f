// Stop strings over streamed text against a plain reference on the whole text: cut before the
// stop string that completes first (the longest of those completing at the same byte), whatever
// the pieces.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "text/stop_strings.h"

using switchyard::text::StopStrings;

namespace {

// The reference: the first byte where some stop string ends, then the earliest start among those
// ending there.
std::string cut(const std::string& text, const std::vector<std::string>& stops, bool& stopped) {
  for (std::size_t end = 1; end <= text.size(); ++end) {
    std::size_t start = std::string::npos;
    for (const std::string& s : stops)
      if (!s.empty() && s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) start = std::min(start, end - s.size());
    if (start != std::string::npos) {
      stopped = true;
      return text.substr(0, start);
    }
  }
  stopped = false;
  return text;
}

}  // namespace

TEST_CASE("stop strings: random texts in random pieces give the reference's text, never a stop string's start") {
  std::mt19937_64 random(20261203);
  const std::string alphabet = "abcab ";  // few letters: stop strings occur and nearly occur often
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    const int length = std::uniform_int_distribution<int>(0, 60)(random);
    for (int i = 0; i < length; ++i) text += alphabet[random() % alphabet.size()];
    std::vector<std::string> stops;
    const int count = std::uniform_int_distribution<int>(1, 3)(random);
    for (int s = 0; s < count; ++s) {
      std::string stop;
      const int n = std::uniform_int_distribution<int>(1, 5)(random);
      for (int i = 0; i < n; ++i) stop += alphabet[random() % 3];
      stops.push_back(stop);
    }
    bool expect_stopped = false;
    const std::string expected = cut(text, stops, expect_stopped);
    StopStrings matcher(stops);
    std::string got;
    std::size_t at = 0;
    while (at < text.size() && !matcher.stopped()) {
      const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 7)(random);
      const std::string piece = text.substr(at, n);
      at += piece.size();
      got += matcher.push(piece);
      // What was handed on is always a prefix of the answer: nothing is taken back.
      REQUIRE(expected.compare(0, got.size(), got) == 0);
    }
    got += matcher.finish();
    INFO("text '" << text << "'");
    CHECK(got == expected);
    CHECK(matcher.stopped() == expect_stopped);
  }
}

TEST_CASE("stop strings: held text waits only while it may become a stop string; none means pass-through") {
  StopStrings matcher({"</s>", ""});
  CHECK(matcher.push("hello <") == "hello ");  // "<" may begin "</s>"
  CHECK(matcher.push("/") == "");
  CHECK(matcher.push("b>") == "</b>");          // it did not
  CHECK(matcher.push("x</s>y") == "x");
  CHECK(matcher.stopped());
  CHECK(matcher.push("more") == "");
  CHECK(matcher.finish() == "");
  StopStrings none;
  CHECK(none.empty());
  CHECK(none.push("</s>") == "</s>");
  // Multi-byte text: a stop string in Japanese, split inside its characters by the pieces.
  StopStrings japanese({"終わり"});
  const std::string text = "川の終わり";
  std::string got;
  for (char c : text) got += japanese.push(std::string(1, c));
  CHECK(got == "川の");
  CHECK(japanese.stopped());
}
